"""Types of the C extension built from _speedups.c; kosumi.accel documents each function and
holds the pure-Python versions (same signatures, same results)."""

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
from typing_extensions import Buffer

BufferLike = Buffer | np.ndarray
_Out = TypeVar("_Out", bound=BufferLike)

def legal_mask(board: BufferLike, size: int, color: int, ko: int, suicide_allowed: bool,
               out: _Out | None = None) -> bytes | _Out: ...
def chain_liberties(board: BufferLike, size: int, out: _Out | None = None) -> bytes | _Out: ...
def area_ownership(board: BufferLike, size: int, out: _Out | None = None) -> bytes | _Out: ...
def basic_planes(board: BufferLike, size: int, color: int, ko: int,
                 moves: Sequence[tuple[int, int]], out: _Out, /) -> _Out: ...
def masked_softmax(logits: BufferLike, legal: BufferLike, row: int, out: _Out, /) -> _Out: ...
def area_map(board: BufferLike, size: int, suicide_legal: bool, /) -> bytes: ...
