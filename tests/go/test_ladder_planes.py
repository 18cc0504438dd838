"""Ladder feature planes (kosumi.go.ladder_planes), checked by hand on small positions."""

from __future__ import annotations

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, WHITE, parse_color, point_to_vertex, vertex_to_point
from kosumi.go.ladder_planes import ladder_features


def play(moves: list[tuple[str, str]], size: int = 19) -> GameState:
    s = GameState(size, 7.5)
    for color, vertex in moves:
        s.play(vertex_to_point(vertex, size), parse_color(color))
    return s


# The two constructed ladder positions of KataGo's reference file (dev-19x19-0001/0002): white
# D16 (liberties D15, E16) under black C16 D17 E17; the ladder D15 runs down-right towards Q4.
LADDER = [("B", "C16"), ("W", "D16"), ("B", "D17"), ("W", "Q16"), ("B", "E17")]

WORKS = [*LADDER, ("W", "C4")]   # C4 is far from the ladder's path

BROKEN = [*LADDER, ("W", "Q4")]  # Q4 sits on the path: a ladder breaker


def test_ladder_features_mark_chains_and_working_moves():
    lf = ladder_features(play(WORKS).board, 19, cache=False)
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.captured)] == ["D16"]
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.working[WHITE])] == ["D15"]
    assert not lf.working[BLACK].any()
    lf = ladder_features(play(BROKEN).board, 19, cache=False)
    assert not lf.captured.any() and not lf.working.any()
