"""Ladder reading (kosumi.go.ladders), checked by hand on small positions."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import LADDER_BROKEN, LADDER_WORKS, play_moves

from kosumi.go import ladder_planes, ladders
from kosumi.go.board import GameState
from kosumi.go.coords import PASS, WHITE, vertex_to_point
from kosumi.go.ladder_planes import ladder_features
from kosumi.go.ladders import is_ladder_captured, ladder_working_moves


def v(vertex: str, size: int = 19) -> int:
    return vertex_to_point(vertex, size)


def test_two_liberty_ladder_works_and_breaker_stops_it():
    s = play_moves(LADDER_WORKS)
    assert ladder_working_moves(s.board, 19, v("D16")) == [v("D15")]  # E16 lets white out
    s = play_moves(LADDER_BROKEN)
    assert ladder_working_moves(s.board, 19, v("D16")) == []


def test_one_liberty_ladder_with_the_defender_to_move():
    # after black D15 the white stone is in atari (liberty E16) with white to move
    s = play_moves([*LADDER_WORKS, ("B", "D15")])
    assert is_ladder_captured(s.board, 19, v("D16"))
    s = play_moves([*LADDER_BROKEN, ("B", "D15")])
    assert not is_ladder_captured(s.board, 19, v("D16"))
    # a chain that is not in atari is never "captured" by the one-liberty search
    assert not is_ladder_captured(play_moves(LADDER_WORKS).board, 19, v("D16"))


NET = [
    ".........",
    ".........",
    ".........",
    "...OXO...",  # 6: D6 O, E6 X, F6 O
    "..OXOX...",  # 5: C5 O, D5 X, E5 O, F5 X
    "...X.X...",  # 4: D4 X, F4 X
    "....X....",  # 3: E3 X
    ".........",
    ".........",
]


def test_escape_by_capturing_an_attacker_in_atari():
    # white E5 has one liberty, E4, whose other neighbours D4 F4 E3 are black: extending there
    # is suicide. But black E6 is itself in atari (liberty E7): capturing it saves E5.
    s = GameState.from_rows(NET, to_move=WHITE)
    e5 = v("E5", 9)
    assert s.chain_liberties(e5) == {v("E4", 9)}
    assert s.chain_liberties(v("E6", 9)) == {v("E7", 9)}
    assert not is_ladder_captured(s.board, 9, e5)
    # with a black stone on E7, E6 has three liberties and white E5 has no move left
    rows = list(NET)
    rows[2] = "....X...."
    s = GameState.from_rows(rows, to_move=WHITE)
    assert len(s.chain_liberties(v("E6", 9))) == 3
    assert is_ladder_captured(s.board, 9, e5)


def test_search_budget_gives_up_as_not_captured(monkeypatch):
    s = play_moves(LADDER_WORKS)
    before = bytes(s.board)
    monkeypatch.setattr(ladders, "NODE_BUDGET", 5)  # the working ladder needs ~30 moves
    assert ladder_working_moves(s.board, 19, v("D16")) == []
    monkeypatch.undo()
    assert ladder_working_moves(s.board, 19, v("D16")) == [v("D15")]
    assert bytes(s.board) == before


def test_reuse_between_boards_is_exact():
    """Results reused from a nearby board (``hint``) equal a fresh reading, over random games."""
    rng = random.Random(7)
    for size in (7, 9, 13):
        for _game in range(3):
            s = GameState(size, 7.5)
            prev = None
            for _ in range(size * size):
                legal = np.flatnonzero(s.legal_mask())
                s.play(int(rng.choice(legal)) if len(legal) and rng.random() > 0.03 else PASS)
                ko = s.ko
                a = ladder_features(s.board, size, ko, cache=False, hint=prev)
                b = ladder_features(s.board, size, ko, cache=False)
                assert np.array_equal(a.captured, b.captured)
                assert np.array_equal(a.working, b.working)
                prev = a


def test_cache_returns_identical_read_only_results():
    ladder_planes.clear_cache()
    s = play_moves(LADDER_WORKS)
    a = ladder_features(s.board, 19)
    b = ladder_features(bytearray(s.board), 19)
    assert a is b
    with pytest.raises(ValueError):
        a.captured[0] = True
