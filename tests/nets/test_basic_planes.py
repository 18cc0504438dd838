"""kosumi.nets.basic_planes: the ``basic`` feature planes in C (the extension) and numpy.

Oracles: a position whose planes and liberties are counted by hand, and the two versions
against each other on random positions.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import board_diagram, random_board_positions

from kosumi.go.coords import BLACK, WHITE
from kosumi.nets.basic_planes import py_basic_planes

try:
    from kosumi import _speedups
except ImportError:  # reported by tests/test_accel.py
    _speedups = None


@pytest.mark.parametrize("fn", [
    pytest.param(_speedups and _speedups.basic_planes, id="c",
                 marks=pytest.mark.skipif(_speedups is None, reason="kosumi._speedups not built")),
    pytest.param(py_basic_planes, id="python"),
])
def test_basic_planes_hand_checked_and_bad_arguments(fn):
    n, b = board_diagram("X O . . .",
                   "X O . . .",
                   "O . . X X",
                   ". . . X O",
                   ". . . . .")
    out = np.full((11, n * n), 7.0, np.float32)
    moves = [(BLACK, 0), (WHITE, 1), (BLACK, -1), (WHITE, 19), (BLACK, 13), (WHITE, 1)]
    assert fn(b, n, WHITE, 7, moves, out) is out
    grid = out.reshape(11, n, n)
    assert (grid[0] == 1).all()
    assert grid[1].sum() == 4 and grid[1][0, 1] == grid[1][3, 4] == 1  # white, to move
    assert grid[2].sum() == 5 and grid[2][0, 0] == grid[2][2, 4] == 1  # black
    # liberties counted by hand (the corner X pair has none: not a real position, but counted)
    libs = {(0, 0): 0, (1, 0): 0, (0, 1): 3, (1, 1): 3, (2, 0): 2, (2, 3): 5, (2, 4): 5,
            (3, 3): 5, (3, 4): 1}
    for (y, x), k in libs.items():
        expect = [k == 1, k == 2, k >= 3]
        assert [bool(grid[j][y, x]) for j in (3, 4, 5)] == expect, (y, x, k)
    empty = np.frombuffer(bytes(b), np.uint8).reshape(n, n) == 0
    assert not grid[1:6, empty].any()
    # ko at point 7; the last 4 moves newest first: 1, 13, 19, pass (plane 10 stays empty)
    for plane, point in ((6, 7), (7, 1), (8, 13), (9, 19)):
        assert grid[plane].sum() == 1 and out[plane, point] == 1, plane
    assert not grid[10].any()
    fn(b, n, BLACK, -1, [], out)
    assert grid[1].sum() == 5 and grid[2].sum() == 4  # the view swaps with the side to move
    assert not grid[6:].any()
    bad_calls = [
        (b, n, 3, -1, [], out),  # colour
        (b, n, BLACK, 25, [], out),  # ko off the board
        (b, n, BLACK, -1, [(BLACK, 25)], out),  # move off the board
        (b, n, BLACK, -1, [(BLACK, 3, 4)], out),  # not a pair
        (b, n, BLACK, -1, [], np.zeros(11 * n * n, np.float64)),
        (b, n, BLACK, -1, [], np.zeros(10 * n * n, np.float32)),
        (b, n, BLACK, -1, [], np.zeros(22 * n * n, np.float32)[::2]),  # not contiguous
        (bytes(24), n, BLACK, -1, [], out),
        (b, 20, BLACK, -1, [], out),
    ]
    for args in bad_calls:
        with pytest.raises(ValueError):
            fn(*args)
    with pytest.raises(TypeError):
        fn(b, n, BLACK, -1, None, out)




@pytest.mark.skipif(_speedups is None, reason="kosumi._speedups not built")
def test_c_equals_numpy_on_random_positions():
    count = 0
    for size, board, ko in random_board_positions(300, seed=1234):
        rng = random.Random(count)
        moves = [(BLACK, rng.randrange(-1, size * size)) for _ in range(rng.randrange(6))]
        for color in (BLACK, WHITE):
            c_out = np.full(11 * size * size, 7.0, np.float32)
            py_out = np.full(11 * size * size, 7.0, np.float32)
            assert _speedups.basic_planes(board, size, color, ko, moves, c_out) is c_out
            assert py_basic_planes(board, size, color, ko, moves, py_out) is py_out
            np.testing.assert_array_equal(c_out, py_out)
        count += 1
    assert count == 300
