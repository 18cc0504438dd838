"""The 11 planes of the ``basic`` feature set (``kosumi.nets.features``), written straight into
a float32 buffer: the C extension's ``basic_planes`` (``kosumi.accel``) and its numpy version.

``basic_planes(board, size, color, ko, moves, out, /) -> out``
    For ``color`` to move, into ``out`` (a writable C-contiguous float32 buffer of 11*N*N
    items): ones, the mover's stones, the opponent's stones, stones whose chain has 1, 2, and 3+
    liberties, the ko point ``ko`` (-1: none), and the points of the last 4 of ``moves``
    ((colour, point) tuples, newest last; a negative point, a pass, leaves its plane empty).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kosumi.accel import Out, check_board, pick
from kosumi.go.board_kernels import py_chain_liberties

if TYPE_CHECKING:
    from kosumi.accel import BufferLike

__all__ = ["basic_planes", "py_basic_planes"]


def py_basic_planes(board: BufferLike, size: int, color: int, ko: int,
                    moves: Sequence[tuple[int, int]], out: Out, /) -> Out:
    """numpy version of ``basic_planes``."""
    size, bb = check_board(board, size)
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


basic_planes = pick("basic_planes", py_basic_planes)
