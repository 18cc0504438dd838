"""KataGo model descriptions (kosumi.nets.katago_desc): the layer descriptors, their parameter
counts and batch-norm merging, and the whole description of KataGo's g170 b6c96 net.

Oracles: a batch norm applied to numbers by its formula, parameter counts by hand, and what
KataGo itself says of the g170 net (its info text: the channel widths and block kinds; KataGo
reports 1,027,911 parameters when it loads the file, ../shared/models/README.md).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import shared_path

from kosumi.nets.katago_desc import (
    INPUT_FEATURES,
    SUPPORTED_VERSIONS,
    BlockDesc,
    BNDesc,
    ConvDesc,
    MatBiasDesc,
    MatMulDesc,
)


def bn(channels: int, eps: float = 1e-3, scale=True, bias=True) -> BNDesc:
    rng = np.random.default_rng(channels)
    return BNDesc("bn", channels, eps, scale, bias, rng.standard_normal(channels),
                  rng.random(channels) + 0.5, rng.random(channels) + 0.5,
                  rng.standard_normal(channels))


def test_batch_norm_merged_is_its_formula():
    b = bn(4)
    x = np.random.default_rng(0).standard_normal((7, 4))
    mult, off = b.merged()
    assert mult.dtype == off.dtype == np.float32
    want = (x - b.mean) / np.sqrt(b.var + b.eps) * b.scale + b.bias
    np.testing.assert_allclose(x * mult + off, want, rtol=1e-5, atol=1e-5)


def test_parameter_counts_by_hand():
    conv = ConvDesc("c", 3, 3, 5, 7, 1, 1, np.zeros((7, 5, 3, 3), np.float32))
    assert conv.num_parameters == 7 * 5 * 9
    assert bn(6).num_parameters == 12 and bn(6, scale=False).num_parameters == 6
    assert MatMulDesc("m", 4, 3, np.zeros((4, 3), np.float32)).num_parameters == 12
    assert MatBiasDesc("b", 3, np.zeros(3, np.float32)).num_parameters == 3
    plain = BlockDesc("ordinary", "r", bn(2), conv, bn(2), conv)
    assert [type(x).__name__ for x in plain.layers()] == ["BNDesc", "ConvDesc", "BNDesc",
                                                          "ConvDesc"]
    g = BlockDesc("gpool", "g", bn(2), conv, bn(2), conv, conv, bn(2),
                  MatMulDesc("m", 6, 2, np.zeros((6, 2), np.float32)))
    assert len(g.layers()) == 7 and g.layers()[2] is conv  # pre, conv1, gpool conv, bn, mul...
    # KataGo v1.17.2 (cpp/neuralnet/modelversion.cpp): versions 8 to 17 take inputs V7
    assert tuple(range(8, 18)) == SUPPORTED_VERSIONS
    assert all(INPUT_FEATURES[v] == ("katago_v7", 22, 19) for v in SUPPORTED_VERSIONS)


@pytest.fixture(scope="module")
def info() -> dict:
    text = shared_path("models/g170-b6c96-s175395328-d26788732-info.txt").read_text()
    return json.loads(text[text.index("{"):])


def test_the_g170_description_is_what_katago_says(katago_model, info):
    from kosumi.nets.katago import read_katago

    d = read_katago(katago_model)
    assert d.version == info["version"] == 8 and d.gzipped and d.binary
    assert (d.trunk_channels, d.mid_channels, d.regular_channels, d.dilated_channels,
            d.gpool_channels) == (info["trunk_num_channels"], info["mid_num_channels"],
                                  info["regular_num_channels"], info["dilated_num_channels"],
                                  info["gpool_num_channels"])
    kinds = ["gpool" if kind == "gpool" else "ordinary" for _, kind in info["block_kind"]]
    assert [b.kind for b in d.blocks] == kinds
    assert (d.num_input_channels, d.num_input_globals) == (22, 19)
    assert d.p1_conv.oc == info["p1_num_channels"] and d.g1_conv.oc == info["g1_num_channels"]
    assert d.v1_conv.oc == info["v1_num_channels"] and d.v2_mul.oc == info["v2_size"]
    assert d.arch() == "b6c96" and d.features == "katago_v7"
    assert d.num_parameters == 1_027_911  # KataGo's own count when it loads the file
