"""The board kernels: which points a colour may play (simple ko and suicide), each chain's
liberties, and Tromp-Taylor area ownership, over a raw board buffer (the C extension's
functions, ``kosumi.accel``; the Python versions here, the same results bit for bit).

``legal_mask(board, size, color, ko, suicide_allowed, out=None) -> bytes | out``
    1 where ``color`` may play under simple-ko rules: the point is empty, is not ``ko`` (pass -1
    when no ko ban applies to ``color``) and is not suicide. With ``suicide_allowed``, multi-stone
    suicide is legal; single-stone suicide never is. Positional superko is NOT checked (that stays
    in ``GameState.legal_mask``).

``chain_liberties(board, size, out=None) -> bytes | out``
    For each stone, the number of distinct liberties of its chain (capped at 255); 0 when empty.

``area_ownership(board, size, out=None) -> bytes | out``
    Tromp-Taylor owner of each point: 1 black, 2 white, 0 neutral (as ``GameState.area_ownership``).

Boards, ``out`` and errors as ``kosumi.accel`` states them.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from kosumi.accel import Out, check_board, pick, result_bytes
from kosumi.go.coords import neighbor_table

if TYPE_CHECKING:
    from kosumi.accel import BufferLike

__all__ = ["area_ownership", "chain_liberties", "legal_mask", "py_area_ownership",
           "py_chain_liberties", "py_legal_mask"]


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
                  out: Out | None = None) -> bytes | Out:
    """Pure-Python version of ``legal_mask``."""
    size, bb = check_board(board, size)
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
    return result_bytes(mask, out)


def py_chain_liberties(board: BufferLike, size: int, out: Out | None = None) -> bytes | Out:
    """Pure-Python version of ``chain_liberties``."""
    size, bb = check_board(board, size)
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
    return result_bytes(res, out)


def py_area_ownership(board: BufferLike, size: int, out: Out | None = None) -> bytes | Out:
    """Pure-Python version of ``area_ownership`` (the algorithm of ``GameState.area_ownership``)."""
    size, bb = check_board(board, size)
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
    return result_bytes(owner, out)


legal_mask = pick("legal_mask", py_legal_mask)
chain_liberties = pick("chain_liberties", py_chain_liberties)
area_ownership = pick("area_ownership", py_area_ownership)
