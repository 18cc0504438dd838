"""The PyTorch backend: ``KosumiNet.forward`` under ``torch.inference_mode``.

Imported only when the ``torch`` backend is asked for (see ``backend.BACKENDS``).
"""

from __future__ import annotations

import numpy as np
import torch

from kosumi.nets.checkpoint import Checkpoint, build_net
from kosumi.runtime.backend import Backend


class TorchBackend(Backend):
    """Runs a torch module that maps (planes, globals) to the raw output dict.

    ``threads`` sets torch's intra-op thread count, which is global to the process (0 leaves it
    alone). ``device`` is a torch device string ("cpu", "cuda", "cuda:1"); default "cpu".
    """

    name = "torch"

    def __init__(self, net: torch.nn.Module, threads: int = 1, device: str | None = None):
        if threads and threads > 0:
            torch.set_num_threads(int(threads))
        self.device = torch.device(device or "cpu")
        self.net = net.to(self.device).eval()

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(planes, dtype=np.float32)).to(self.device)
            g = None
            if globals is not None:
                g = torch.from_numpy(np.ascontiguousarray(globals, dtype=np.float32)).to(
                    self.device)
            out = self.net(x, g)
            return {k: v.float().cpu().numpy() for k, v in out.items()}


def from_checkpoint(checkpoint: Checkpoint, path: str = "", threads: int = 1,
                    device: str | None = None) -> TorchBackend:
    """The backend factory registered as ``torch``."""
    return TorchBackend(build_net(checkpoint, path), threads=threads, device=device)
