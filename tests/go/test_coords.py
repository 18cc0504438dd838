"""Coordinates (kosumi.go.coords): GTP vertices, SGF points, policy indices, neighbours and the
8 board symmetries.

Oracles: vertices placed by hand on the documented layout (index 0 is the top-left point,
A19 on 19x19; the column letters skip I), numpy's own rotations and mirrors of an index grid
for the symmetries, and counted neighbours (2 in a corner, 3 on an edge, 4 inside).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kosumi.go.coords import (
    BLACK,
    PASS,
    RESIGN,
    WHITE,
    apply_symmetry,
    check_size,
    inverse_symmetry,
    neighbor_table,
    opponent,
    parse_color,
    point_to_sgfmill,
    point_to_vertex,
    policy_index,
    policy_move,
    sgfmill_to_point,
    symmetry_permutation,
    transform_point,
    vertex_to_point,
)

SIZES = [2, 5, 9, 13, 19]


@pytest.mark.parametrize("vertex,size,point", [
    ("A19", 19, 0), ("T19", 19, 18), ("A1", 19, 342), ("T1", 19, 360),
    ("J19", 19, 8),  # J is the 9th column: there is no I
    ("D4", 19, 15 * 19 + 3), ("Q16", 19, 3 * 19 + 15), ("K10", 19, 9 * 19 + 9),
    ("A9", 9, 0), ("J1", 9, 80), ("E5", 9, 40), ("C3", 9, 6 * 9 + 2),
    ("b2", 5, 3 * 5 + 1), (" e1 ", 5, 24),
])
def test_vertices_by_hand(vertex, size, point):
    assert vertex_to_point(vertex, size) == point
    assert point_to_vertex(point, size) == vertex.strip().upper()


def test_pass_resign_and_bad_vertices():
    assert vertex_to_point("pass", 9) == vertex_to_point("PASS", 19) == PASS
    assert vertex_to_point("resign", 9) == RESIGN
    assert point_to_vertex(PASS, 9) == point_to_vertex(81, 9) == "pass"  # policy's pass index
    assert point_to_vertex(RESIGN, 9) == "resign"
    for bad, size in [("I5", 19), ("K1", 9), ("A10", 9), ("A0", 9), ("Z3", 19), ("A", 9),
                      ("", 9), ("3A", 9), ("A-1", 9)]:
        with pytest.raises(ValueError):
            vertex_to_point(bad, size)
    for bad in (-3, 82, 100):
        with pytest.raises(ValueError):
            point_to_vertex(bad, 9)


@pytest.mark.parametrize("size", SIZES)
def test_every_point_round_trips_through_vertex_and_sgf(size):
    seen = set()
    for p in range(size * size):
        v = point_to_vertex(p, size)
        assert "I" not in v and v not in seen
        seen.add(v)
        assert vertex_to_point(v, size) == p
        row, col = point_to_sgfmill(p, size)
        # sgfmill counts rows from the bottom: GTP row number - 1
        assert row == int(v[1:]) - 1 and col == p % size
        assert sgfmill_to_point((row, col), size) == p
    assert point_to_sgfmill(PASS, size) is None and sgfmill_to_point(None, size) == PASS


def test_colours_policy_indices_and_sizes():
    assert [parse_color(t) for t in ("B", "b", "black", " White ", "w")] == \
        [BLACK, BLACK, BLACK, WHITE, WHITE]
    with pytest.raises(ValueError):
        parse_color("red")
    assert opponent(BLACK) == WHITE and opponent(WHITE) == BLACK
    assert policy_index(PASS, 9) == 81 and policy_index(40, 9) == 40
    assert policy_move(81, 9) == PASS and policy_move(40, 9) == 40
    assert check_size(2) == 2 and check_size(19) == 19
    for bad in (1, 20, 0):
        with pytest.raises(ValueError):
            check_size(bad)


@pytest.mark.parametrize("size", SIZES)
def test_neighbours_are_the_orthogonal_points_on_the_board(size):
    table = neighbor_table(size)
    assert len(table) == size * size
    corners = {0, size - 1, size * (size - 1), size * size - 1}
    for p, nbs in enumerate(table):
        x, y = p % size, p // size
        want = {(x + dx) + (y + dy) * size for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))
                if 0 <= x + dx < size and 0 <= y + dy < size}
        assert set(nbs) == want and len(nbs) == len(want)
        on_edge = x in (0, size - 1) or y in (0, size - 1)
        assert len(nbs) == (2 if p in corners else 3 if on_edge else 4)
        assert all(p in table[q] for q in nbs)  # symmetric relation


def dihedral_grids(size: int) -> set[bytes]:
    """The 8 images of the index grid under numpy's rotations and mirrors (the oracle)."""
    grid = np.arange(size * size).reshape(size, size)
    out = set()
    for k in range(4):
        r = np.rot90(grid, k)
        out.add(r.tobytes())
        out.add(np.fliplr(r).tobytes())
    return out


@pytest.mark.parametrize("size", SIZES)
def test_the_eight_symmetries_are_the_rotations_and_mirrors(size):
    assert symmetry_permutation(size, 0).tolist() == list(range(size * size))
    seen = set()
    for sym in range(8):
        perm = symmetry_permutation(size, sym)
        assert sorted(perm.tolist()) == list(range(size * size))  # a permutation
        image = apply_symmetry(np.arange(size * size), size, sym)
        # the same point never moves to two places: image[perm[p]] == p
        assert all(image[perm[p]] == p for p in range(size * size))
        seen.add(image.reshape(size, size).tobytes())
    if size > 1:
        assert seen == dihedral_grids(size)  # all 8 and nothing else


def test_symmetries_by_hand_on_9x9():
    # A9 is the top-left corner (0), J9 the top-right (8), A1 the bottom-left (72)
    a9, c8 = vertex_to_point("A9", 9), vertex_to_point("C8", 9)
    # bit 2 transposes (the corner stays), then bit 1 flips the rows, bit 0 the columns
    assert [transform_point(a9, 9, s) for s in range(8)] == [0, 8, 72, 80, 0, 8, 72, 80]
    # C8 is column 2, row-from-top 1: bit 2 transposes (x, y) -> (1, 2) = B7
    assert point_to_vertex(transform_point(c8, 9, 4), 9) == "B7"
    assert point_to_vertex(transform_point(c8, 9, 1), 9) == "G8"  # mirrored left-right
    assert point_to_vertex(transform_point(c8, 9, 2), 9) == "C2"  # mirrored top-bottom
    assert transform_point(vertex_to_point("E5", 9), 9, 5) == vertex_to_point("E5", 9)
    assert transform_point(PASS, 9, 3) == PASS


@pytest.mark.parametrize("size", [5, 9, 19])
def test_inverse_symmetry_undoes_and_pass_is_kept(size):
    rng = np.random.default_rng(size)
    values = rng.random((2, size * size + 1))
    for sym in range(8):
        inv = inverse_symmetry(sym)
        back = apply_symmetry(apply_symmetry(values, size, sym), size, inv)
        np.testing.assert_array_equal(back, values)
        assert (apply_symmetry(values, size, sym)[:, -1] == values[:, -1]).all()  # pass stays
        for p in range(size * size):
            assert transform_point(transform_point(p, size, sym), size, inv) == p
    # composition is closed: the 8 permutations form a group
    perms = {symmetry_permutation(size, s).tobytes() for s in range(8)}
    for a, b in itertools.product(range(8), repeat=2):
        pa, pb = symmetry_permutation(size, a), symmetry_permutation(size, b)
        assert pb[pa].tobytes() in perms
    with pytest.raises(ValueError):
        symmetry_permutation(size, 8)
