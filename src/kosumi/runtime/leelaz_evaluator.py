"""Leela Zero weights as an ``Evaluator``: ``open_leelaz(path, options)``.

The weights become the equivalent kosumi ``lz``-head net (``kosumi.nets.leelaz``), run by any
registered backend, under the usual ``NetEvaluator`` (lz18 features, masking, softmax,
symmetries). A version-2 file's value is Black's: ``BlackValueToSideToMove`` negates the raw
value of every position where White is to move (lz18 plane 17 is all ones), so that the
evaluator's winrate is the side to move's, as Leela Zero itself reports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kosumi.runtime.backend import Backend, make_backend
from kosumi.runtime.evaluator import Evaluator
from kosumi.runtime.loader import LoadOptions
from kosumi.runtime.net_evaluator import NetEvaluator

#: lz18 plane that is all ones when White is to move
WHITE_TO_MOVE_PLANE = 17


class BlackValueToSideToMove(Backend):
    """Wraps the backend of a net whose (pre-tanh) value is from Black's view; returns it from
    the side to move's view: -v where White is to move. tanh is odd, so the winrate becomes
    1 - w, exactly Leela Zero's conversion of version-2 nets."""

    def __init__(self, inner: Backend):
        self.inner = inner
        self.name = inner.name

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        out = dict(self.inner.forward(planes, globals))
        white = planes[:, WHITE_TO_MOVE_PLANE, 0, 0] > 0.5
        out["value"] = np.where(white[:, None], -out["value"], out["value"]).astype(np.float32)
        return out

    def close(self) -> None:
        self.inner.close()


def open_leelaz(path: Path, options: LoadOptions) -> Evaluator:
    """Open Leela Zero text weights (version 1 or 2, plain or gzip) as an Evaluator."""
    from kosumi.nets.checkpoint import Checkpoint
    from kosumi.nets.leelaz import read_leelaz

    weights = read_leelaz(path)
    checkpoint = Checkpoint(config=weights.config, tensors=weights.state_dict(),
                            metadata={"source": path.name})
    backend: Backend = make_backend(options.backend, checkpoint, path=str(path),
                                    threads=options.threads, device=options.device)
    if weights.version == 2:
        backend = BlackValueToSideToMove(backend)
    return NetEvaluator(backend, checkpoint.config, symmetries=options.symmetries,
                        name=path.name)
