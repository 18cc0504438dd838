"""The ``basic_ladder`` feature set (kosumi.nets.basic_ladder).

Oracles: KataGo's two constructed ladder positions (tests/helpers.py: the ladder works, or a
breaker stands on its path), read by hand; the ``basic`` set for the first 11 planes; and a
``basic`` net widened with zero weights, which must play exactly as before."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import LADDER_BROKEN, LADDER_WORKS, play_moves

from kosumi.go.coords import point_to_vertex
from kosumi.nets.features import get_feature_set


def _marked(plane: np.ndarray) -> list[str]:
    return [point_to_vertex(int(p), 19) for p in np.flatnonzero(plane.reshape(-1))]


def test_ladder_planes_by_hand():
    fs = get_feature_set("basic_ladder")
    assert (fs.num_planes, fs.num_globals, fs.extends) == (13, 4, "basic")
    # black to move: white D16 (2 liberties) is taken by the ladder D15
    works = play_moves(LADDER_WORKS)
    broken = play_moves(LADDER_BROKEN)
    after = play_moves([*LADDER_WORKS, ("B", "D15")])  # white to move, D16 in atari
    planes, _ = fs.encode([works, broken])
    assert _marked(planes[0, 11]) == ["D16"] and _marked(planes[0, 12]) == ["D15"]
    assert not planes[1, 11:].any()  # Q4 breaks it
    planes, _ = fs.encode([after])
    assert _marked(planes[0, 11]) == ["D16"]  # its owner to move cannot save it
    assert not planes[0, 12].any()  # white has no ladder to start


def test_first_planes_and_globals_are_basics():
    states = [play_moves(LADDER_WORKS), play_moves([*LADDER_BROKEN, ("B", "D15")])]
    p, g = get_feature_set("basic_ladder").encode(states)
    bp, bg = get_feature_set("basic").encode(states)
    np.testing.assert_array_equal(p[:, :11], bp)
    np.testing.assert_array_equal(g, bg)


def test_a_widened_basic_net_plays_as_before():
    torch = pytest.importorskip("torch")
    from helpers import random_inputs, randomise_bn

    from kosumi.distill.train_state import load_init
    from kosumi.nets.config import NetConfig
    from kosumi.nets.resnet import KosumiNet

    old = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9, 19]), 1)
    randomise_bn(old, torch.Generator().manual_seed(2))
    new = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9, 19],
                                     features="basic_ladder"), 3)
    notes: list[str] = []
    load_init(new, old, "old.safetensors", notes.append)
    assert notes == []
    old.eval(), new.eval()
    for size in (9, 19):
        planes, glob = random_inputs(new.config, size, batch=4)  # ladder planes random too
        with torch.no_grad():
            a, b = old(planes[:, :11], glob), new(planes, glob)
        for key in a:
            torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-6)
