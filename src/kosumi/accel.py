"""Fast paths for the search's hot spots: the C extension ``kosumi._speedups`` when it is built,
exact numpy/Python fallbacks otherwise (edge devices without a compiler still work).

Five functions, with the same signatures and results in both implementations:

``legal_mask(board, size, color, ko, suicide_allowed, out=None) -> bytes | out``
    1 where ``color`` may play under simple-ko rules: the point is empty, is not ``ko`` (pass -1
    when no ko ban applies to ``color``) and is not suicide. With ``suicide_allowed``, multi-stone
    suicide is legal; single-stone suicide never is. Positional superko is NOT checked (that stays
    in ``GameState.legal_mask``).

``chain_liberties(board, size, out=None) -> bytes | out``
    For each stone, the number of distinct liberties of its chain (capped at 255); 0 when empty.

``area_ownership(board, size, out=None) -> bytes | out``
    Tromp-Taylor owner of each point: 1 black, 2 white, 0 neutral (as ``GameState.area_ownership``).

Boards are C-contiguous buffers of ``size*size`` one-byte items (``bytearray``, ``bytes``, numpy
uint8/int8/bool), row-major from the top-left, values 0 empty / 1 black / 2 white, with
``2 <= size <= 19``. The board functions return a new ``bytes`` of N*N values, or, given ``out``
(any writable C-contiguous buffer of N*N one-byte items, e.g. ``np.empty(N*N, np.bool_)``), write
into it and return ``out``. Bad arguments raise ValueError (TypeError for a non-buffer).

``basic_planes(board, size, color, ko, moves, out, /) -> out``
    The 11 planes of the ``basic`` feature set (``kosumi.nets.features``) for ``color`` to move,
    written into ``out`` (a writable C-contiguous float32 buffer of 11*N*N items): ones, the
    mover's stones, the opponent's stones, stones whose chain has 1, 2, and 3+ liberties, the
    ko point ``ko`` (-1: none), and the points of the last 4 of ``moves`` ((colour, point)
    tuples, newest last; a negative point, a pass, leaves its plane empty).

``masked_softmax(logits, legal, row, out, /) -> out``
    Softmax over each row of ``row`` entries of ``logits`` (float32, R*row items) restricted to
    the entries where ``legal`` (as many one-byte items) is nonzero; illegal entries get exactly
    0; written into ``out`` (float32, may be ``logits``). A row without a legal entry is a
    ValueError. Equal to the numpy version up to float32 rounding (not bit-identical).

``HAVE_C`` tells which implementation is in use; set the environment variable
``KOSUMI_NO_SPEEDUPS=1`` before the first import to force the fallbacks. The fallbacks are always
available under the same names with a ``py_`` prefix.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from typing import TypeAlias

    from typing_extensions import Buffer

    # what the functions take: any C-contiguous buffer. numpy's stubs make an ndarray a Buffer
    # only from Python 3.12 on, hence the ignores on memoryview(an ndarray) below
    BufferLike: TypeAlias = Buffer | np.ndarray

from kosumi.go.coords import neighbor_table  # coords imports only numpy: no cycle

__all__ = [
    "HAVE_C",
    "IMPLEMENTATION",
    "area_ownership",
    "basic_planes",
    "chain_liberties",
    "legal_mask",
    "masked_softmax",
    "py_area_ownership",
    "py_basic_planes",
    "py_chain_liberties",
    "py_legal_mask",
    "py_masked_softmax",
]

MIN_SIZE, MAX_SIZE = 2, 19

_Out = TypeVar("_Out", bound="BufferLike")  # an ``out`` buffer, returned as it was given


# ---------------------------------------------------------------------------------- arguments
def _size(size: int) -> int:
    size = operator.index(size)
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"board size {size} is not supported (use {MIN_SIZE}..{MAX_SIZE})")
    return size


def _byte_view(obj: BufferLike, nn: int, name: str, writable: bool = False) -> memoryview:
    """A flat unsigned-byte memoryview of a C-contiguous buffer of exactly ``nn`` one-byte items."""
    # TypeError for a non-buffer, like the C version
    mv = memoryview(obj)  # type: ignore[arg-type]  # ndarray: see BufferLike
    if not mv.c_contiguous or (writable and mv.readonly):
        raise ValueError(f"{name} must be a {'writable ' if writable else ''}C-contiguous buffer")
    if mv.itemsize != 1 or mv.nbytes != nn:
        raise ValueError(
            f"{name} must hold {nn} one-byte items (got {mv.nbytes} bytes, itemsize {mv.itemsize})"
        )
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def _board(board: BufferLike, size: int) -> tuple[int, bytes]:
    """(size, a bytes copy of the board) after checking the size, the length and the values.
    The fallbacks compute from the copy and write ``out`` last, so ``out`` may alias the board."""
    size = _size(size)
    bb = _byte_view(board, size * size, "board").tobytes()
    if bb.translate(None, b"\x00\x01\x02"):  # some value is not 0, 1 or 2
        p = next(i for i, v in enumerate(bb) if v > 2)
        raise ValueError(
            f"board values must be 0 (empty), 1 (black) or 2 (white); got {bb[p]} at point {p}"
        )
    return size, bb


def _result(values: bytes | bytearray | np.ndarray, out: _Out | None) -> bytes | _Out:
    """Return ``values`` (N*N byte values: bytes, bytearray or a uint8 array) as bytes, or copy
    them into ``out`` and return ``out``."""
    data = values.tobytes() if isinstance(values, np.ndarray) else bytes(values)
    if out is None:
        return data
    _byte_view(out, len(data), "out", writable=True)[:] = data
    return out


_EMPTY_TO_ONE = bytes.maketrans(b"\x00\x01\x02", b"\x01\x00\x00")


@cache
def _row_masks(size: int) -> tuple[int, int, int]:
    """Byte-per-point masks as ints (byte p = point p): all points, points with a left
    neighbour, points with a right neighbour."""
    nn = size * size
    return (
        int.from_bytes(b"\x01" * nn, "little"),
        int.from_bytes(bytes(p % size != 0 for p in range(nn)), "little"),
        int.from_bytes(bytes(p % size != size - 1 for p in range(nn)), "little"),
    )


def _empty_points(bb: bytes, size: int) -> tuple[int, int]:
    """(E, N) as byte-per-point ints: E has byte p = 1 where p is empty, N where p has an empty
    orthogonal neighbour. Shifting by 8 bits moves to the next point, by 8*size to the next row;
    the bytes never carry, so a few big-int operations do the whole board."""
    full, has_left, has_right = _row_masks(size)
    e = int.from_bytes(bb.translate(_EMPTY_TO_ONE), "little")
    row = 8 * size
    n = ((e << 8) & has_left) | ((e >> 8) & has_right) | ((e << row) & full) | (e >> row)
    return e, n


def _libs_upto2(b: bytes, nb: Sequence[Sequence[int]], p: int, memo: dict[int, int]) -> int:
    """Liberties (0, 1, or 2 meaning two or more) of the chain through stone ``p``. The search
    stops at the second liberty; every stone it visited is memoised with the answer."""
    c = b[p]
    seen, stack, lib1, libs = [p], [p], -1, 0
    visited = {p}
    while stack and libs < 2:
        s = stack.pop()
        for q in nb[s]:
            cq = b[q]
            if cq == 0:
                if libs == 0:
                    libs, lib1 = 1, q
                elif q != lib1:
                    libs = 2
                    break
            elif cq == c and q not in visited:
                visited.add(q)
                seen.append(q)
                stack.append(q)
    for s in seen:
        memo[s] = libs
    return libs


def _chain(b: bytes, nb: Sequence[Sequence[int]], p: int) -> tuple[list[int], set[int]]:
    """Stones and liberties of the chain through stone ``p``."""
    c = b[p]
    stones, libs, stack, seen = [], set(), [p], {p}
    while stack:
        s = stack.pop()
        stones.append(s)
        for q in nb[s]:
            cq = b[q]
            if cq == 0:
                libs.add(q)
            elif cq == c and q not in seen:
                seen.add(q)
                stack.append(q)
    return stones, libs


def py_legal_mask(board: BufferLike, size: int, color: int, ko: int, suicide_allowed: bool,
                  out: _Out | None = None) -> bytes | _Out:
    """Pure-Python version of ``legal_mask``."""
    size, bb = _board(board, size)
    nn = size * size
    color = operator.index(color)
    if color not in (1, 2):
        raise ValueError(f"color must be 1 (black) or 2 (white), not {color}")
    ko = operator.index(ko)
    if not -1 <= ko < nn:
        raise ValueError(f"ko must be -1 or a point in 0..{nn - 1}, not {ko}")
    suicide_allowed = bool(suicide_allowed)
    e, n = _empty_points(bb, size)
    # empty with an empty neighbour: legal (unless ko)
    mask = bytearray((e & n).to_bytes(nn, "little"))
    # empty without one: look at the neighbouring chains
    surrounded = (e & ~n).to_bytes(nn, "little")
    p = surrounded.find(1)
    if p >= 0:
        nb = neighbor_table(size)
        libs_of: dict[int, int] = {}  # stone -> liberties of its chain (capped at 2)
        while p >= 0:
            legal = own = False
            for q in nb[p]:
                libs = libs_of.get(q)
                if libs is None:
                    libs = _libs_upto2(bb, nb, q, libs_of)
                if bb[q] == color:
                    own = True
                    if libs >= 2:  # the own chain keeps another liberty
                        legal = True
                        break
                elif libs == 1:  # the opponent chain is captured
                    legal = True
                    break
            if legal or (suicide_allowed and own):  # (multi-stone suicide)
                mask[p] = 1
            p = surrounded.find(1, p + 1)
    if ko >= 0:
        mask[ko] = 0
    return _result(mask, out)


def py_chain_liberties(board: BufferLike, size: int, out: _Out | None = None) -> bytes | _Out:
    """Pure-Python version of ``chain_liberties``."""
    size, bb = _board(board, size)
    nb = neighbor_table(size)
    res = bytearray(size * size)
    done = bytearray(size * size)
    for p in range(size * size):
        if bb[p] and not done[p]:
            stones, libs = _chain(bb, nb, p)
            count = min(len(libs), 255)
            for s in stones:
                res[s] = count
                done[s] = 1
    return _result(res, out)


def py_area_ownership(board: BufferLike, size: int, out: _Out | None = None) -> bytes | _Out:
    """Pure-Python version of ``area_ownership`` (the algorithm of ``GameState.area_ownership``)."""
    size, bb = _board(board, size)
    nb = neighbor_table(size)
    owner = bytearray(bb)
    seen = bytearray(size * size)
    for p in range(size * size):
        if bb[p] or seen[p]:
            continue
        region, borders, stack = [], 0, [p]
        seen[p] = 1
        while stack:
            q = stack.pop()
            region.append(q)
            for r in nb[q]:
                cr = bb[r]
                if cr == 0:
                    if not seen[r]:
                        seen[r] = 1
                        stack.append(r)
                else:
                    borders |= cr
        if borders in (1, 2):
            for q in region:
                owner[q] = borders
    return _result(owner, out)


def py_basic_planes(board: BufferLike, size: int, color: int, ko: int,
                    moves: Sequence[tuple[int, int]], out: _Out, /) -> _Out:
    """numpy version of ``basic_planes``."""
    size, bb = _board(board, size)
    nn = size * size
    color, ko = operator.index(color), operator.index(ko)
    if color not in (1, 2):
        raise ValueError(f"color must be 1 (black) or 2 (white), not {color}")
    if not -1 <= ko < nn:
        raise ValueError(f"ko must be -1 or a point in 0..{nn - 1}, not {ko}")
    if not isinstance(moves, (list, tuple)):
        raise TypeError("moves must be a list or tuple of (colour, point) pairs")
    marks = [ko]
    for move in moves[-1:-5:-1]:
        if not isinstance(move, tuple) or len(move) != 2:
            raise ValueError("moves must hold (colour, point) tuples")
        p = operator.index(move[1])
        if p >= nn:
            raise ValueError(f"move point {p} is off a {size}x{size} board")
        marks.append(p)
    mv = memoryview(out)  # type: ignore[arg-type]  # ndarray: see BufferLike
    if mv.readonly or not mv.c_contiguous:
        raise ValueError("out must be a writable C-contiguous buffer")
    if mv.format != "f" or mv.nbytes != 11 * nn * 4:
        raise ValueError(f"out must be a float32 buffer of {11 * nn} items")
    o = np.frombuffer(mv.cast("B"), dtype=np.float32).reshape(11, nn)
    b = np.frombuffer(bb, dtype=np.uint8)
    libs = np.frombuffer(py_chain_liberties(bb, size), dtype=np.uint8)
    o[0] = 1.0
    o[1] = b == color
    o[2] = (b != 0) & (b != color)
    o[3] = libs == 1
    o[4] = libs == 2
    o[5] = libs >= 3
    o[6:] = 0.0
    for k, p in enumerate(marks):
        if p >= 0:
            o[6 + k, p] = 1.0
    return out


def py_masked_softmax(logits: BufferLike, legal: BufferLike, row: int, out: _Out, /) -> _Out:
    """numpy version of ``masked_softmax``."""
    row = operator.index(row)
    if row < 1:
        raise ValueError(f"row must be at least 1, not {row}")
    lmv = memoryview(logits)  # type: ignore[arg-type]  # ndarray: see BufferLike
    if lmv.format != "f" or not lmv.c_contiguous:
        raise ValueError("logits must be a C-contiguous float32 buffer")
    x = np.frombuffer(lmv.cast("B"), dtype=np.float32)
    n = len(x)
    m = np.frombuffer(_byte_view(legal, n, "legal"), dtype=np.uint8).astype(bool)
    omv = memoryview(out)  # type: ignore[arg-type]  # ndarray: see BufferLike
    if omv.readonly or not omv.c_contiguous or omv.format != "f":
        raise ValueError("out must be a writable C-contiguous float32 buffer")
    if omv.nbytes != 4 * n or n % row:
        raise ValueError(f"out must hold as many floats as logits ({n}, got {omv.nbytes // 4}), "
                         f"a whole number of rows of {row}")
    x, m = x.reshape(-1, row), m.reshape(-1, row)
    bad = np.flatnonzero(~m.any(axis=1))
    if len(bad):
        raise ValueError(f"masked_softmax: row {bad[0]} has no legal entry")
    y = np.where(m, x, np.float32(-np.inf))
    y -= y.max(axis=1, keepdims=True)
    np.exp(y, out=y)
    y *= (1.0 / y.sum(axis=1, keepdims=True, dtype=np.float64)).astype(np.float32)
    np.frombuffer(omv.cast("B"), dtype=np.float32)[:] = y.reshape(-1)
    return out


# ---------------------------------------------------------------------------------- selection
_c: ModuleType | None = None
if os.environ.get("KOSUMI_NO_SPEEDUPS", "").strip() in ("", "0"):
    try:
        from kosumi import _speedups as _c
    except ImportError:  # not built (no compiler at install time): use the fallbacks
        _c = None

#: the C extension itself (None: not built, or KOSUMI_NO_SPEEDUPS): the modules that own a rule
#: with a C version take it from here (``go.benson.area_map``)
C: ModuleType | None = _c
HAVE_C: bool = _c is not None
IMPLEMENTATION: str = "c" if HAVE_C else "python"

# the fallbacks first: their signatures are the names' types (the C functions have the same)
if _c is None:
    legal_mask = py_legal_mask
    chain_liberties = py_chain_liberties
    area_ownership = py_area_ownership
    basic_planes = py_basic_planes
    masked_softmax = py_masked_softmax
else:
    legal_mask = _c.legal_mask
    chain_liberties = _c.chain_liberties
    area_ownership = _c.area_ownership
    basic_planes = _c.basic_planes
    masked_softmax = _c.masked_softmax
