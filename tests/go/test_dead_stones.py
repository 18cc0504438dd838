"""Dead stones from ownership (kosumi.go.dead_stones), on hand-made boards and ownerships."""

from __future__ import annotations

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.coords import vertex_to_point
from kosumi.go.dead_stones import DEAD_OWNERSHIP, dead_stones


def test_a_chain_is_dead_when_its_mean_ownership_is_the_opponents():
    s = GameState.from_rows([". . . . .", ". X X . .", ". . . O .", ". . . . .", ". . . . ."])
    own = np.zeros(25)  # Black's view
    b2, c2 = vertex_to_point("B4", 5), vertex_to_point("C4", 5)
    d3 = vertex_to_point("D3", 5)
    own[[b2, c2]] = -0.9, -0.2  # mean -0.55 for a black chain: dead
    own[d3] = -0.9  # White owns its own stone: alive
    assert dead_stones(s, own) == {b2, c2}
    own[[b2, c2]] = -0.3, -0.2  # mean -0.25, above -DEAD_OWNERSHIP: alive
    assert -DEAD_OWNERSHIP < -0.25 and dead_stones(s, own) == set()
    own[d3] = 0.5  # Black owns White's stone: dead
    assert dead_stones(s, own) == {d3}
    assert dead_stones(s, None) == set()


def test_taking_dead_stones_off_changes_the_area_score():
    s = GameState.from_rows([". . . . .", ". . . . .", ". . O . .", ". . . . .", "X X X X X"],
                            komi=0.5)
    own = np.ones(25)  # Black owns everything: the white stone is dead
    assert s.area_score() == 5 - 1 - 0.5  # as it stands: 5 black stones, 1 white
    assert s.area_score(dead_stones(s, own)) == 25 - 0.5
