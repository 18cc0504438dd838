"""Coordinates: GTP vertices, SGF points, flat indices and the 8 board symmetries.

Every public array in kosumi (boards, policies, ownership) is row-major from the TOP-LEFT point:
index ``i = y * N + x`` where ``x`` is the column (A, B, ... skipping I) and ``y`` counts rows
from the top (``y = 0`` is GTP row N). Index 0 is A19 on 19x19; index N*N-1 is T1. Policy
arrays append the pass move at index N*N.

Moves are flat indices, with ``PASS`` (-1) for a pass and ``RESIGN`` (-2) for a resignation.
"""

from __future__ import annotations

from functools import cache

import numpy as np

PASS = -1
RESIGN = -2
COLUMNS = "ABCDEFGHJKLMNOPQRST"
MIN_SIZE, MAX_SIZE = 2, 19

EMPTY, BLACK, WHITE = 0, 1, 2
COLOR_NAMES = {BLACK: "B", WHITE: "W"}


def check_size(size: int) -> int:
    if not (MIN_SIZE <= int(size) <= MAX_SIZE):
        raise ValueError(f"board size {size} is not supported (use {MIN_SIZE}..{MAX_SIZE})")
    return int(size)


def opponent(color: int) -> int:
    return 3 - color


def parse_color(text: str) -> int:
    """'B', 'b', 'black', 'W', 'white' -> BLACK / WHITE."""
    t = text.strip().lower()
    if t in ("b", "black"):
        return BLACK
    if t in ("w", "white"):
        return WHITE
    raise ValueError(f"invalid color {text!r}")


def point(x: int, y: int, size: int) -> int:
    """Column x, row-from-top y -> flat index."""
    return y * size + x


def xy(p: int, size: int) -> tuple[int, int]:
    return p % size, p // size


def vertex_to_point(vertex: str, size: int) -> int:
    """GTP vertex ('D4', 'pass') -> flat index (PASS for a pass). Raises ValueError."""
    v = vertex.strip().upper()
    if v == "PASS":
        return PASS
    if v == "RESIGN":
        return RESIGN
    if len(v) < 2 or v[0] not in COLUMNS or not v[1:].isdigit():
        raise ValueError(f"invalid vertex {vertex!r}")
    x = COLUMNS.index(v[0])
    row = int(v[1:])
    if x >= size or not (1 <= row <= size):
        raise ValueError(f"vertex {vertex!r} is off the {size}x{size} board")
    return (size - row) * size + x


def point_to_vertex(p: int, size: int) -> str:
    if p == PASS or p == size * size:
        return "pass"
    if p == RESIGN:
        return "resign"
    if not (0 <= p < size * size):
        raise ValueError(f"point {p} is off the {size}x{size} board")
    return f"{COLUMNS[p % size]}{size - p // size}"


def point_to_sgfmill(p: int, size: int) -> tuple[int, int] | None:
    """Flat index -> sgfmill's (row, col) with row 0 at the BOTTOM; None for a pass."""
    if p == PASS:
        return None
    return size - 1 - p // size, p % size


def sgfmill_to_point(move: tuple[int, int] | None, size: int) -> int:
    if move is None:
        return PASS
    row, col = move
    return (size - 1 - row) * size + col


def policy_index(move: int, size: int) -> int:
    """A move (flat index or PASS) -> its index in a policy array of N*N + 1 entries."""
    return size * size if move == PASS else move


def policy_move(index: int, size: int) -> int:
    return PASS if index == size * size else index


@cache
def neighbor_table(size: int) -> tuple[tuple[int, ...], ...]:
    """For each point, the tuple of its orthogonal on-board neighbours."""
    out = []
    for p in range(size * size):
        x, y = p % size, p // size
        nb = []
        if y > 0:
            nb.append(p - size)
        if x > 0:
            nb.append(p - 1)
        if x < size - 1:
            nb.append(p + 1)
        if y < size - 1:
            nb.append(p + size)
        out.append(tuple(nb))
    return tuple(out)


def _transform_xy(x: int, y: int, size: int, sym: int) -> tuple[int, int]:
    """Symmetry sym (0..7): bit 2 transposes, bit 1 flips rows, bit 0 flips columns (after)."""
    if sym & 4:
        x, y = y, x
    if sym & 2:
        y = size - 1 - y
    if sym & 1:
        x = size - 1 - x
    return x, y


@cache
def symmetry_permutation(size: int, sym: int) -> np.ndarray:
    """perm such that ``transformed[perm[p]] = original[p]`` for every point p.

    For a board array ``a`` of N*N entries, ``apply_symmetry(a, size, sym)`` returns the board seen
    under symmetry ``sym``; symmetry 0 is the identity.
    """
    if not 0 <= sym < 8:
        raise ValueError(f"symmetry {sym} is not in 0..7")
    perm = np.empty(size * size, dtype=np.int64)
    for p in range(size * size):
        x, y = _transform_xy(p % size, p // size, size, sym)
        perm[p] = y * size + x
    perm.setflags(write=False)
    return perm


def inverse_symmetry(sym: int) -> int:
    """The symmetry that undoes ``sym`` (transposition combined with one flip is not an
    involution)."""
    return {5: 6, 6: 5}.get(sym, sym)


def apply_symmetry(values: np.ndarray, size: int, sym: int) -> np.ndarray:
    """Transform the last axis of ``values`` (N*N points, optionally + pass) by symmetry ``sym``."""
    perm = symmetry_permutation(size, sym)
    n = size * size
    out = np.empty_like(values)
    out[..., perm] = values[..., :n]
    if values.shape[-1] == n + 1:
        out[..., n] = values[..., n]
    return out


def transform_point(p: int, size: int, sym: int) -> int:
    if p < 0:
        return p
    return int(symmetry_permutation(size, sym)[p])
