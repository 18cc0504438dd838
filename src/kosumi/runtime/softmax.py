"""The policy's softmax over the legal moves: the C extension's ``masked_softmax``
(``kosumi.accel``) and its numpy version.

``masked_softmax(logits, legal, row, out, /) -> out``
    Softmax over each row of ``row`` entries of ``logits`` (float32, R*row items) restricted to
    the entries where ``legal`` (as many one-byte items) is nonzero; illegal entries get exactly
    0; written into ``out`` (float32, may be ``logits``). A row without a legal entry is a
    ValueError. Equal to the numpy version up to float32 rounding (not bit-identical).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np

from kosumi.accel import Out, byte_view, pick

if TYPE_CHECKING:
    from kosumi.accel import BufferLike

__all__ = ["legal_softmax", "masked_softmax", "py_masked_softmax"]


def py_masked_softmax(logits: BufferLike, legal: BufferLike, row: int, out: Out, /) -> Out:
    """numpy version of ``masked_softmax``."""
    row = operator.index(row)
    if row < 1:
        raise ValueError(f"row must be at least 1, not {row}")
    lmv = memoryview(logits)  # type: ignore[arg-type]  # ndarray: see BufferLike
    if lmv.format != "f" or not lmv.c_contiguous:
        raise ValueError("logits must be a C-contiguous float32 buffer")
    x = np.frombuffer(lmv.cast("B"), dtype=np.float32)
    n = len(x)
    m = np.frombuffer(byte_view(legal, n, "legal"), dtype=np.uint8).astype(bool)
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


masked_softmax = pick("masked_softmax", py_masked_softmax)


def legal_softmax(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Softmax over the last axis restricted to ``legal`` (bool, broadcastable); illegal -> 0.

    float32, one pass per row in C when built (``masked_softmax``; this runs at every search
    leaf, where a chain of numpy calls cost ~6 us per position). Every row needs at least one
    legal entry (ValueError otherwise).
    """
    x = np.ascontiguousarray(logits, dtype=np.float32)
    mask = np.ascontiguousarray(np.broadcast_to(legal, x.shape))
    return masked_softmax(x, mask, x.shape[-1], np.empty_like(x))
