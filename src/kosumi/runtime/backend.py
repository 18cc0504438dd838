"""Backends: the raw forward pass of a network, on feature arrays, and nothing else.

A backend takes the arrays of the net's feature set (``planes`` float32 [B, C, N, N],
``globals`` float32 [B, G] or None; one board size per call) and returns the network's RAW
outputs as float32 numpy arrays, exactly as ``KosumiNet.forward`` defines them:

    policy [B, N*N+1] logits (kosumi order), value [B, 3] wdl logits or [B, 1] pre-tanh,
    optional score_lead [B] (points), optional ownership [B, N*N] (pre-tanh)

Everything else (features, masking, softmax, perspective, symmetries) is ``NetEvaluator``'s job,
done once for every backend. Backends register by name with a lazily imported factory, so that
``import kosumi.runtime`` never imports torch, onnxruntime or tensorrt.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from kosumi.errors import KosumiError
from kosumi.lazy import resolve

if TYPE_CHECKING:
    from kosumi.nets.checkpoint import Checkpoint


class Backend(ABC):
    """Runs a network's forward pass on numpy feature arrays."""

    name: str = "backend"

    @abstractmethod
    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        """Raw outputs (see the module docstring) for one same-size batch."""

    def close(self) -> None:
        """Release resources (sessions, device memory)."""


#: backend name -> "module:factory"; a factory is called as
#: ``factory(checkpoint, path=..., threads=..., device=...) -> Backend``
BACKENDS: dict[str, str | Callable[..., Backend]] = {
    "torch": "kosumi.runtime.torch_backend:from_checkpoint",
}


def register_backend(name: str, factory: str | Callable[..., Backend]) -> None:
    """Register (or replace) a backend: a callable or a lazy ``"module:function"`` string."""
    BACKENDS[name] = factory


def backend_factory(name: str) -> Callable[..., Backend]:
    """The factory of backend ``name`` (imported on first use). KosumiError if unknown."""
    target = BACKENDS.get(name)
    if target is None:
        raise KosumiError(f"unknown backend {name!r} (known: {', '.join(sorted(BACKENDS))})")
    return resolve(target, f"backend {name!r}")


def make_backend(name: str, checkpoint: Checkpoint, path: str = "", threads: int = 1,
                 device: str | None = None) -> Backend:
    """Build backend ``name`` for a loaded kosumi checkpoint."""
    return backend_factory(name)(checkpoint, path=path, threads=threads, device=device)
