"""Weight pictures (kosumi.viz.weights): each filter in its cell, the difference with a
reference is the real difference."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import random_net_file

from kosumi.nets.checkpoint import read_checkpoint, save_checkpoint
from kosumi.nets.formats import read_net
from kosumi.viz.weights import diff_view, net_view, tile_filters


@pytest.fixture
def nets(viz_nets):
    return viz_nets


def test_tiles_put_each_filter_in_its_cell():
    w = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    img = tile_filters(w)
    assert img.shape == (2 * 3 - 1, 3 * 3 - 1)  # 2x2 tiles, one separator pixel between
    for o in range(2):
        for i in range(3):
            assert np.array_equal(img[3 * o:3 * o + 2, 3 * i:3 * i + 2], w[o, i])
    assert np.isnan(img[2]).all() and np.isnan(img[:, 2]).all() and np.isnan(img[:, 5]).all()


def test_difference_is_the_change_made_by_hand(nets, tmp_path):
    ck = read_checkpoint(nets["float"])
    tensors = {k: v.copy() for k, v in ck.tensors.items()}
    delta = np.random.default_rng(1).normal(size=tensors["value_fc2.weight"].shape)
    tensors["value_fc2.weight"] = (tensors["value_fc2.weight"] + delta).astype(np.float32)
    changed = tmp_path / "changed.safetensors"
    save_checkpoint(changed, tensors, ck.config)
    a = net_view(read_net(changed).config, read_net(changed).tensors)
    b = net_view(ck.config, ck.tensors)
    diff, notes = diff_view(a, b)
    assert notes == []
    for layer in diff.layers:
        if layer.name == "value_fc2":  # a dense layer, no batch norm folded into it
            np.testing.assert_allclose(layer.weight, delta, rtol=1e-5, atol=1e-6)
        else:
            assert not np.any(layer.weight), layer.name
    # a different architecture: what cannot be compared is said, layer by layer
    small = random_net_file(tmp_path / "b1c8.safetensors", arch="b1c8", board_sizes=(9,))
    c = net_view(read_net(small).config, read_net(small).tensors)
    diff, notes = diff_view(b, c)
    assert "layer blocks.1.conv1: not in the reference, not compared" in notes
    assert "layer blocks.0.conv1: conv [16, 16, 3, 3] here, conv [8, 8, 3, 3] in the " \
           "reference, not compared" in notes
    for x in diff.layers:  # what is compared has one shape in both
        assert b.layer(x.name).shape == c.layer(x.name).shape == x.shape
