"""``load_teacher(path)``: the network kosumi distills from, as an ``Evaluator``, whatever its
format.

A teacher is any model file ``load_evaluator`` can open -- a KataGo model, Leela Zero weights, a
kosumi checkpoint or an ONNX file kosumi exported -- the format detected from the content, on
any backend. Teachers label many positions from the same games, so the evaluator keeps a
transposition cache by default; ``symmetries=8`` averages the 8 board symmetries (slower,
exactly equivariant, usually a better label).
"""

from __future__ import annotations

import os

from kosumi.errors import KosumiError
from kosumi.runtime.evaluator import Evaluator
from kosumi.runtime.loader import load_evaluator


def load_teacher(path: str | os.PathLike[str], symmetries: int = 1, threads: int = 1,
                 backend: str = "auto", device: str | None = None,
                 cache: bool = True, precision: str = "auto") -> Evaluator:
    """Open the teacher model at ``path`` (any supported format) as an Evaluator.

    symmetries  1..8: average over this many board symmetries (1 = as the file plays, 8 = all)
    threads     CPU threads of the backend
    backend     the backend that runs it ("auto", "torch", "onnxruntime", ...)
    device      e.g. "cuda" (default: CPU)
    cache       keep an LRU transposition cache in front of it
    precision   "auto", "fp32" or "fp16"

    Raises KosumiError (one line naming the file) for a missing, unknown or corrupt file.
    """
    if not isinstance(symmetries, int) or not 1 <= symmetries <= 8:
        raise KosumiError(f"{path}: teacher symmetries must be 1..8, not {symmetries!r}")
    if not isinstance(threads, int) or threads < 1:
        raise KosumiError(f"{path}: teacher threads must be at least 1, not {threads!r}")
    return load_evaluator(path, backend=backend, threads=threads, cache=cache,
                          symmetries=symmetries, device=device, precision=precision)
