"""Pass-alive groups and territory (kosumi.go.benson), checked by hand on small positions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kosumi.go import benson
from kosumi.go.benson import area_map, area_map_py, pass_alive
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, WHITE, vertex_to_point

# the dispatching area_map (C through kosumi.accel when built) and the Python algorithm: both
# answer every hand-checked position
AREA_MAPS = [pytest.param(area_map, id="accel"), pytest.param(area_map_py, id="python")]


def board(rows: list[str]) -> bytes:
    return bytes(GameState.from_rows(rows).board)


def diagram(area: np.ndarray, size: int) -> list[str]:
    return ["".join(".XO"[int(a)] for a in area[y * size : (y + 1) * size]) for y in range(size)]


def pts(vertices: str, size: int = 9) -> list[int]:
    return [vertex_to_point(x, size) for x in vertices.split()]


# Black's corner group has two separate eyes, A9 and C9; White walls it in.
TWO_EYES = [
    ".X.XO....",
    "XXXXO....",
    "OOOOO....",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
]


@pytest.mark.parametrize("am", AREA_MAPS)
def test_two_eyes_are_pass_alive(am):
    b = board(TWO_EYES)
    black = pass_alive(b, 9, BLACK)
    assert sorted(np.flatnonzero(black.stones)) == sorted(pts("B9 D9 A8 B8 C8 D8"))
    assert sorted(np.flatnonzero(black.territory)) == sorted(pts("A9 C9"))
    # White's wall has no eyes at all: nothing of White's is pass-alive
    white = pass_alive(b, 9, WHITE)
    assert not white.stones.any() and not white.territory.any()
    # area: Black's group and eyes; the rest is an empty region bordered by White alone
    assert diagram(am(b, 9), 9) == ["XXXXOOOOO", "XXXXOOOOO"] + ["O" * 9] * 7


@pytest.mark.parametrize("am", AREA_MAPS)
def test_one_eye_is_not_pass_alive(am):
    rows = list(TWO_EYES)
    rows[0] = ".XXXO...."  # C9 filled: one eye left
    b = board(rows)
    black = pass_alive(b, 9, BLACK)
    assert not black.stones.any() and not black.territory.any()
    # area still gives the stones their colour and A9 (bordered by Black only) to Black
    area = am(b, 9)
    assert diagram(area, 9)[:2] == ["XXXXOOOOO", "XXXXOOOOO"]


# A black group with the eye A9 and a 3x3 eye around a white stone on D7 that touches no black
# stone.
BIG_EYE = [
    ".XXXXX...",
    "XX...X...",
    "XX.O.X...",
    "XX...X...",
    "XXXXXX...",
    ".........",
    ".........",
    ".........",
    ".........",
]


@pytest.mark.parametrize("am", AREA_MAPS)
def test_dead_stone_inside_an_eye_and_suicide_rules(am):
    b = board(BIG_EYE)
    # suicide illegal (KataGo's chinese rules): only the EMPTY points of a region must touch the
    # chain for the region to be vital; D7 is the region's one point away from Black, so the
    # region is also pass-alive territory and the white stone is dead
    black = pass_alive(b, 9, BLACK, suicide_legal=False)
    assert black.stones.sum() == 20
    assert black.territory[pts("A9 C8 D7 E6")].all()
    # ... and so is the empty outside, bordered by that pass-alive chain alone
    assert (am(b, 9) == BLACK).all()
    # multi-stone suicide legal: every point of a vital region must touch the chain; D7 does
    # not, so the group has one vital region only and is not pass-alive
    black = pass_alive(b, 9, BLACK, suicide_legal=True)
    assert not black.stones.any()
    assert am(b, 9, suicide_legal=True)[pts("D7")[0]] == WHITE


@pytest.mark.parametrize("am", AREA_MAPS)
def test_dead_stone_touching_the_wall_and_outside_territory(am):
    rows = [
        ".X..X....",
        "XXO.X....",
        "XX..X....",
        "XXXXX....",
        ".........",
        ".........",
        ".........",
        ".........",
        ".........",
    ]
    b = board(rows)
    black = pass_alive(b, 9, BLACK)
    assert black.stones.sum() == 13
    # with Black's only chain pass-alive, the empty rest of the board (no white stone in it) is
    # Black's too, and the white stone C8 is dead: the whole board is Black's
    assert (am(b, 9) == BLACK).all()
    assert (pass_alive(b, 9, BLACK, suicide_legal=True).stones.sum()) == 13  # C8 touches B8


@pytest.mark.parametrize("am", AREA_MAPS)
def test_dame_and_stones(am):
    rows = ["....", ".XO.", "....", "...."]
    b = board(rows)
    area = am(b, 4)
    # every empty point is connected to both colours: neutral; stones count for their colour
    assert diagram(area, 4) == ["....", ".XO.", "....", "...."]
    assert not pass_alive(b, 4, BLACK).stones.any()


@pytest.mark.parametrize("am", AREA_MAPS)
def test_empty_board(am):
    assert not am(bytes(81), 9).any()
    assert not pass_alive(bytes(81), 9, BLACK).stones.any()


def test_the_c_area_map_is_the_python_algorithm():
    """On boards of every size and density, and with both suicide rules, the dispatching
    ``area_map`` (the C extension when built) and ``area_map_py`` give the same area."""
    from kosumi import accel

    rng = random.Random(7)
    checked = 0
    for size in (2, 3, 5, 9, 13, 19):
        for _ in range(60):
            density = rng.random()
            b = bytes(rng.choice((1, 2)) if rng.random() < density else 0
                      for _ in range(size * size))
            for suicide in (False, True):
                np.testing.assert_array_equal(area_map(b, size, suicide),
                                              area_map_py(b, size, suicide))
                checked += 1
    assert checked == 720
    assert accel.IMPLEMENTATION == "python" or benson._C_AREA_MAP is not None  # C when built
    with pytest.raises(ValueError, match="a 9x9 board has 81 points"):
        area_map(bytes(80), 9)
