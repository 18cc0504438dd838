"""Area scoring checked against GNU Go (--chinese-rules) and hand-counted positions.

The arena scores a finished game as kosumi's Tromp-Taylor area score after removing the dead
stones GNU Go names; these tests check that this equals GNU Go's own ``final_score`` on real
finished games, and check ``area_score`` on positions counted by hand (seki, dame, dead stones,
a full board).
"""

from __future__ import annotations

import random

import pytest
from helpers import GNUGO, require_program

from kosumi.engine.gtp_client import GTPProcess
from kosumi.engine.match_results import parse_score
from kosumi.engine.scoring import format_score
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE, point_to_vertex, vertex_to_point


def position(rows: list[str], komi: float) -> GameState:
    """A position from rows ('X' black, 'O' white, '.' empty; top row first)."""
    size = len(rows)
    state = GameState(size, komi)
    black = [y * size + x for y, r in enumerate(rows) for x, c in enumerate(r) if c == "X"]
    white = [y * size + x for y, r in enumerate(rows) for x, c in enumerate(r) if c == "O"]
    state.place_setup(BLACK, black)
    state.place_setup(WHITE, white, to_move=BLACK)
    assert state.rows() == rows  # nothing was captured while placing
    return state


def gnugo_verdict(state: GameState) -> tuple[float, list[int], list[int]]:
    """GNU Go's final_score, dead stones and seki stones for a position."""
    gnugo = require_program(GNUGO)
    n = state.size
    with GTPProcess([gnugo, "--mode", "gtp", "--chinese-rules"]) as g:
        g.send(f"boardsize {n}", timeout=30)
        g.send(f"komi {state.komi:g}", timeout=30)
        g.send("clear_board", timeout=30)
        for color in (BLACK, WHITE):
            for c, p in state.setup:
                if c == color:
                    g.send(f"play {'b' if c == BLACK else 'w'} {point_to_vertex(p, n)}",
                           timeout=30)
        score = parse_score(g.send("final_score", timeout=120))
        dead = [vertex_to_point(v, n) for v in g.send("final_status_list dead", 60).split()]
        seki = [vertex_to_point(v, n) for v in g.send("final_status_list seki", 60).split()]
    return score, dead, seki


SEKI = [  # one eye each (A6, F6) and one shared liberty (D6): a finished seki
    ".XX.O.",
    "XXXXOO",
    "XXXXOO",
    "XXXXOO",
    "XXXXOO",
    "XXXXOO",
]
DAME = [  # both alive with two eyes; C3 touches both colours: one dame point (unfilled)
    ".XXO.",
    "XXXOO",
    ".X.OO",
    "XXXO.",
    "XXXOO",
]
FULL = [  # a full 5x5 board: Black 12 stones + 3 eyes, White 8 stones + 2 eyes
    ".XXO.",
    "XXXOO",
    ".XXO.",
    "XXXOO",
    "X.XOO",
]
DEAD = [  # a lone black stone (D2) inside White's bottom area
    ".......",
    ".......",
    "XXXXXXX",
    "OOOOOOO",
    ".......",
    "...X...",
    ".......",
]


def test_seki_area_score_by_hand():
    # Black 22 stones + eye A6 = 23; White 11 stones + eye F6 = 12; D6 is neutral
    state = position(SEKI, komi=0.5)
    assert state.area_score() == 23 - 12 - 0.5
    owner = state.area_ownership()
    assert owner[vertex_to_point("D6", 6)] == 0
    assert owner[vertex_to_point("A6", 6)] == BLACK and owner[vertex_to_point("F6", 6)] == WHITE


def test_dame_area_score_by_hand():
    # Black 12 stones + 2 eyes = 14; White 8 stones + 2 eyes = 10; C3 is dame.
    # (Not compared with GNU Go: its final_score plays the dame out, the side to move gets C3.)
    state = position(DAME, komi=7.0)
    assert state.area_score() == 14 - 10 - 7.0
    assert state.area_ownership()[vertex_to_point("C3", 5)] == 0
    state.play(vertex_to_point("C3", 5), BLACK)
    assert state.area_score() == 15 - 10 - 7.0


def test_full_board_area_score_by_hand():
    state = position(FULL, komi=7.0)
    assert state.area_score() == 15 - 10 - 7.0


def test_dead_stone_removal_by_hand():
    state = position(DEAD, komi=0.5)
    dead = [vertex_to_point("D2", 7)]
    # without removal the bottom area (20 points) touches both colours: Black 21 + 1, White 7
    assert state.area_score() == 22 - 7 - 0.5
    # with D2 dead: Black 21, White 28
    assert state.area_score(dead) == 21 - 28 - 0.5


@pytest.mark.parametrize(
    "rows, komi, expected",
    [(SEKI, 0.5, 10.5), (FULL, 7.0, -2.0), (DEAD, 0.5, -7.5)],
    ids=["seki", "full", "dead"],
)
def test_hand_positions_agree_with_gnugo(rows, komi, expected):
    """Finished positions (nothing left to fill): GNU Go's count equals the hand count."""
    state = position(rows, komi)
    score, dead, seki = gnugo_verdict(state)
    assert score == expected
    assert state.area_score(dead) == expected
    if rows is SEKI:
        assert seki, "GNU Go should see the seki"
    if rows is DEAD:
        assert dead == [vertex_to_point("D2", 7)]


def finish_with_gnugo(seed: int) -> tuple[GameState, float, list[int]]:
    """Random legal opening moves, then GNU Go plays both sides until two passes."""
    gnugo = require_program(GNUGO)
    rng = random.Random(seed)
    state = GameState(9, 7.0)
    with GTPProcess([gnugo, "--mode", "gtp", "--chinese-rules", "--level", "1",
                     "--seed", str(seed)]) as g:
        for cmd in ("boardsize 9", "komi 7", "clear_board"):
            g.send(cmd, timeout=30)
        for _ in range(rng.randint(6, 30)):
            legal = [int(p) for p in state.legal_mask().nonzero()[0]]
            p = rng.choice(legal)
            g.send(f"play {'b' if state.to_move == BLACK else 'w'} {point_to_vertex(p, 9)}",
                   timeout=30)
            state.play(p)
        while state.passes < 2:
            assert len(state.moves) < 400, "GNU Go did not end the game"
            reply = g.send(f"genmove {'b' if state.to_move == BLACK else 'w'}", timeout=60)
            state.play(vertex_to_point(reply, 9))  # GNU Go's moves are legal for kosumi too
        dead = [vertex_to_point(v, 9) for v in g.send("final_status_list dead", 60).split()]
        score = parse_score(g.send("final_score", timeout=120))
    assert state.moves[-1][1] == PASS
    return state, score, dead


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 7, 11, 19, 23])
def test_finished_games_match_gnugo_final_score(seed: int):
    state, gnugo_score, dead = finish_with_gnugo(seed)
    assert state.area_score(dead) == gnugo_score


def test_format_score():
    assert format_score(6.5) == "B+6.5"
    assert format_score(-15.5) == "W+15.5"
    assert format_score(13.0) == "B+13.0"
    assert format_score(0.0) == "0"
    assert format_score(-0.25) == "W+0.25"
