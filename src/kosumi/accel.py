"""The C extension ``kosumi._speedups`` and the contract its functions keep with their Python
versions, which live with the modules that own their rules:

- ``kosumi.go.board_kernels``: ``legal_mask``, ``chain_liberties``, ``area_ownership``;
- ``kosumi.go.benson``: ``area_map`` (KataGo's pass-alive area);
- ``kosumi.nets.basic_planes``: ``basic_planes`` (the ``basic`` feature set's planes);
- ``kosumi.runtime.softmax``: ``masked_softmax`` (the policy's softmax over legal moves).

Each of those modules exports the function under its name (the C version when the extension is
built, else its own ``py_`` version, with the same signature and results) and the ``py_``
version beside it. Boards are C-contiguous buffers of ``size*size`` one-byte items
(``bytearray``, ``bytes``, numpy uint8/int8/bool), row-major from the top-left, values 0 empty
/ 1 black / 2 white, with ``2 <= size <= 19``. A board function returns a new ``bytes`` of N*N
values, or, given ``out`` (any writable C-contiguous buffer of N*N one-byte items, e.g.
``np.empty(N*N, np.bool_)``), writes into it and returns ``out``. Bad arguments raise
ValueError (TypeError for a non-buffer): the checks below are the Python versions' half of
that contract.

``C`` is the extension (None when it is not built, or when the environment variable
``KOSUMI_NO_SPEEDUPS=1`` was set before the first import); ``HAVE_C`` and ``IMPLEMENTATION``
say which is in use; ``pick(name, fallback)`` is how an owner chooses.
"""

from __future__ import annotations

import importlib
import operator
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from typing import TypeAlias

    from typing_extensions import Buffer

    # what the functions take: any C-contiguous buffer. numpy's stubs make an ndarray a Buffer
    # only from Python 3.12 on, hence the ignores on memoryview(an ndarray) below
    BufferLike: TypeAlias = Buffer | np.ndarray

MIN_SIZE, MAX_SIZE = 2, 19

Out = TypeVar("Out", bound="BufferLike")  # an ``out`` buffer, returned as it was given
F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------- arguments
def check_size(size: int) -> int:
    size = operator.index(size)
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"board size {size} is not supported (use {MIN_SIZE}..{MAX_SIZE})")
    return size


def byte_view(obj: BufferLike, nn: int, name: str, writable: bool = False) -> memoryview:
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


def check_board(board: BufferLike, size: int) -> tuple[int, bytes]:
    """(size, a bytes copy of the board) after checking the size, the length and the values.
    The fallbacks compute from the copy and write ``out`` last, so ``out`` may alias the board."""
    size = check_size(size)
    bb = byte_view(board, size * size, "board").tobytes()
    if bb.translate(None, b"\x00\x01\x02"):  # some value is not 0, 1 or 2
        p = next(i for i, v in enumerate(bb) if v > 2)
        raise ValueError(
            f"board values must be 0 (empty), 1 (black) or 2 (white); got {bb[p]} at point {p}"
        )
    return size, bb


def result_bytes(values: bytes | bytearray | np.ndarray, out: Out | None) -> bytes | Out:
    """Return ``values`` (N*N byte values: bytes, bytearray or a uint8 array) as bytes, or copy
    them into ``out`` and return ``out``."""
    data = values.tobytes() if isinstance(values, np.ndarray) else bytes(values)
    if out is None:
        return data
    byte_view(out, len(data), "out", writable=True)[:] = data
    return out


# ---------------------------------------------------------------------------------- the extension
def extension(name: str) -> ModuleType | None:
    """The C extension module ``name`` (e.g. ``"kosumi.engine._puct"``), or None when it is not
    built (no compiler at install time) or ``KOSUMI_NO_SPEEDUPS=1`` is set: its owner then uses
    its Python versions."""
    if os.environ.get("KOSUMI_NO_SPEEDUPS", "").strip() not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_c: ModuleType | None = extension("kosumi._speedups")

#: the C extension itself (None: not built, or KOSUMI_NO_SPEEDUPS): the modules that own a rule
#: with a C version take it from here (``pick``)
C: ModuleType | None = _c
HAVE_C: bool = _c is not None
IMPLEMENTATION: str = "c" if HAVE_C else "python"


def pick(name: str, fallback: F) -> F:
    """The extension's ``name`` when it is in use (and has it: an older in-place build may
    not), else ``fallback``; the fallback's signature is the name's type."""
    return getattr(C, name, fallback) if C is not None else fallback
