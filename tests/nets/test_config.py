"""NetConfig (kosumi.nets.config): architecture names, validation, JSON round trip."""

from __future__ import annotations

import json

import pytest
import torch

from kosumi.errors import KosumiError
from kosumi.nets.config import NetConfig, parse_arch

torch.set_num_threads(1)


# ----------------------------------------------------------------------------- config
def test_parse_arch():
    assert parse_arch("b6c64") == (6, 64)
    assert parse_arch("B10C128") == (10, 128)
    for bad in ("b6", "6c64", "b6c0", "bxc64", "b6c64x", ""):
        with pytest.raises(KosumiError, match="config field 'arch'"):
            parse_arch(bad)


@pytest.mark.parametrize("kwargs,field", [
    ({"arch": "c64"}, "arch"),
    ({"features": "katago_v99"}, "features"),
    ({"features": ["basic"]}, "features"),  # JSON of the wrong type: an error, not a crash
    ({"head": {"conv": 1}}, "head"),
    ({"value": ["wdl"]}, "value"),
    ({"arch": 64}, "arch"),
    ({"head": "dense"}, "head"),
    ({"board_sizes": []}, "board_sizes"),
    ({"board_sizes": [9, 25]}, "board_sizes"),
    ({"board_sizes": ["9"]}, "board_sizes"),
    ({"value": "sigmoid"}, "value"),
    ({"score_lead": "yes"}, "score_lead"),
    ({"policy_channels": -1}, "policy_channels"),
    ({"provenance": [1]}, "provenance"),
    ({"head": "lz", "features": "lz18", "board_sizes": [9], "value": "tanh", "score_lead": False,
      "ownership": False}, "board_sizes"),
    ({"head": "lz", "features": "lz18", "board_sizes": [19], "value": "wdl", "score_lead": False,
      "ownership": False}, "value"),
    ({"head": "lz", "features": "lz18", "board_sizes": [19], "value": "tanh"}, "score_lead"),
    ({"value_pool": "mean"}, "value_pool"),
    ({"value_pool": "katago", "features": "lz18"}, "value_pool"),  # plane 0 is no mask
    ({"value_pool": "katago", "head": "lz", "features": "lz18", "board_sizes": [19],
      "value": "tanh", "score_lead": False, "ownership": False}, "value_pool"),
])
def test_config_validation_names_the_field(kwargs, field):
    with pytest.raises(KosumiError, match=f"config field '{field}'") as e:
        NetConfig(**kwargs)
    assert "\n" not in str(e.value)


def test_config_json_round_trip_and_errors():
    c = NetConfig(arch="b2c16", board_sizes=[19, 9], provenance={"teacher": "g170"})
    assert c.board_sizes == [9, 19] and c.policy_channels == 8  # resolved, concrete
    d = json.loads(c.to_json())
    assert d["version"] == 1 and d["arch"] == "b2c16" and d["provenance"] == {"teacher": "g170"}
    assert NetConfig.from_json(c.to_json()) == c
    assert "value_pool" not in d  # at its default: left out, so older files read the same
    pooled = NetConfig(arch="b2c16", value_pool="katago")
    assert json.loads(pooled.to_json())["value_pool"] == "katago"
    assert NetConfig.from_json(pooled.to_json()) == pooled
    with pytest.raises(KosumiError, match=r"f.json: config field 'colour' is unknown"):
        NetConfig.from_dict({**d, "colour": 1}, source="f.json")
    with pytest.raises(KosumiError, match=r"f.json: the net config is not valid JSON"):
        NetConfig.from_json("{", source="f.json")
    with pytest.raises(KosumiError, match="'version'"):
        NetConfig.from_dict({**d, "version": 7})


def test_own_precision_follows_the_quantization_scheme():
    from kosumi.nets.quant import QuantScheme

    plain = NetConfig(arch="b1c8")
    assert plain.own_precision is None
    for bits, precision in ((8, "int8"), (16, "fp16")):
        cfg = NetConfig.from_json(json.dumps({**json.loads(plain.to_json()),
                                              "quantization": QuantScheme(bits=bits).to_dict()}))
        assert cfg.quantized and cfg.own_precision == precision
