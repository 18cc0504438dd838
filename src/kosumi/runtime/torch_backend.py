"""The PyTorch backend: the net's torch module (``KosumiNet`` or ``KataGoNet``) under
``torch.inference_mode``.

Imported only when the ``torch`` backend is asked for (see ``backend.BACKENDS``). On the CPU,
KataGo nets run with channels-last activations (about 15% faster convolutions, the same results
up to float rounding). ``precision`` fp16 runs the module in half precision (CUDA only: the CPU
has no fast fp16 convolutions).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint, build_net
from kosumi.nets.config import NetConfig
from kosumi.runtime.backend import Backend
from kosumi.runtime.options import LoadOptions


class TorchBackend(Backend):
    """Runs a torch module that maps (planes, globals) to the raw output dict.

    ``threads`` sets torch's intra-op thread count, which is global to the process (0 leaves it
    alone). ``device`` is a torch device string ("cpu", "cuda", "cuda:1"); default "cpu".
    """

    name = "torch"

    def __init__(self, net: torch.nn.Module, threads: int = 1, device: str | None = None,
                 channels_last: bool = False, half: bool = False):
        if threads and threads > 0:
            torch.set_num_threads(int(threads))
        self.device = torch.device(device or "cpu")
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.dtype = torch.float16 if half else torch.float32
        # Module.to accepts memory_format (torch._C._nn._parse_to); its overloads omit it
        self.net = net.to(self.device, dtype=self.dtype,  # type: ignore[call-overload]
                          memory_format=self.memory_format).eval()

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(planes, dtype=np.float32)).to(
                self.device, dtype=self.dtype, memory_format=self.memory_format)
            g = None
            if globals is not None:
                g = torch.from_numpy(np.ascontiguousarray(globals, dtype=np.float32)).to(
                    self.device, dtype=self.dtype)
            out = self.net(x, g)
            return {k: v.float().cpu().numpy() for k, v in out.items()}


def open_torch(config: NetConfig, source: dict[str, np.ndarray] | Path,
               options: LoadOptions) -> TorchBackend:
    """The backend factory registered as ``torch``."""
    if isinstance(source, Path):
        raise KosumiError(f"{source}: the torch backend runs kosumi, KataGo and Leela Zero nets, "
                          "not this file")
    if config.quantized:
        raise KosumiError(f"a {config.quantization.get('bits')}-bit quantized net runs on the "
                          "numpy and onnxruntime backends, not torch")
    if options.precision == "int8":
        raise KosumiError("the torch backend runs fp32 and fp16 nets, not int8")
    half = options.precision == "fp16"
    if half and not options.cuda:
        raise KosumiError("the torch backend runs fp16 on CUDA only (give --device cuda, or "
                          "--backend onnxruntime)")
    net = build_net(Checkpoint(config=config, tensors=source), config.provenance.get(
        "source", "model"))
    katago = config.family == "katago"
    return TorchBackend(net, threads=options.threads, device=options.device,
                        channels_last=katago and not options.cuda, half=half)
