"""The ``tensorrt`` backend: runs kosumi TensorRT plans (``kosumi export --format tensorrt``).

The plan's header (``nets.trt_plan``) is checked before TensorRT sees the engine: a plan built
by another TensorRT version or for another GPU is a one-line error saying to rebuild it (an
engine only runs where it was built). One execution context per optimisation profile (one per
board size), created on first use; device buffers are torch CUDA tensors on one CUDA stream, so
the backend needs torch with CUDA beside TensorRT. Batches larger than the profile's maximum are
run in chunks. Works with the TensorRT 10 and 11 name-based tensor API (``set_input_shape``,
``set_tensor_address``, ``execute_async_v3``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.config import NetConfig
from kosumi.nets.trt_plan import read_plan
from kosumi.runtime.backend import Backend
from kosumi.runtime.options import LoadOptions


def check_plan_fits(path: Path, header: dict[str, Any], trt_version: str,
                    gpu: dict[str, str]) -> None:
    """A plan from another TensorRT version or GPU -> KosumiError (before deserializing)."""
    built = str(header.get("tensorrt"))
    if built != trt_version:
        raise KosumiError(f"{path}: built with TensorRT {built}, this is TensorRT {trt_version}; "
                          "rebuild it here (kosumi export MODEL --format tensorrt)")
    if (header.get("compute_capability") != gpu["compute_capability"]
            or header.get("gpu") != gpu["gpu"]):
        raise KosumiError(f"{path}: built for {header.get('gpu')} (sm "
                          f"{header.get('compute_capability')}), this GPU is {gpu['gpu']} (sm "
                          f"{gpu['compute_capability']}); rebuild it here")


class TensorRTBackend(Backend):
    """Runs a deserialized TensorRT engine (see the module docstring)."""

    name = "tensorrt"

    def __init__(self, path: Path, options: LoadOptions):
        import tensorrt as trt
        import torch

        from kosumi.nets.trt_plan import gpu_identity

        self.torch = torch
        header, engine_bytes = read_plan(path)
        index = options.device_index
        check_plan_fits(path, header, trt.__version__, gpu_identity(index))
        self.device = torch.device(f"cuda:{index}")
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(engine_bytes)
        if self.engine is None:
            raise KosumiError(f"{path}: TensorRT cannot deserialize this engine (built for "
                              "another GPU or TensorRT version? rebuild it here)")
        self.profiles = {int(p["size"]): (i, int(p["batch"][2]))
                         for i, p in enumerate(header["profiles"])}
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.inputs = [n for n in names
                       if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in names if n not in self.inputs]
        # torch.cuda.Stream's constructor is unannotated in torch
        self.stream = torch.cuda.Stream(device=self.device)  # type: ignore[no-untyped-call]
        self.contexts: dict[int, Any] = {}
        self.path = path

    def _context(self, profile: int) -> Any:
        ctx = self.contexts.get(profile)
        if ctx is None:
            ctx = self.engine.create_execution_context()
            ctx.set_optimization_profile_async(profile, self.stream.cuda_stream)
            self.contexts[profile] = ctx
        return ctx

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        size = planes.shape[2]
        if size not in self.profiles:
            raise KosumiError(f"{self.path}: this engine has no profile for {size}x{size} "
                              f"(built for {', '.join(map(str, sorted(self.profiles)))})")
        profile, max_batch = self.profiles[size]
        parts = []
        for start in range(0, planes.shape[0], max_batch):
            g = None if globals is None else globals[start:start + max_batch]
            parts.append(self._run(profile, planes[start:start + max_batch], g))
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def _run(self, profile: int, planes: np.ndarray, globals: np.ndarray | None
             ) -> dict[str, np.ndarray]:
        torch = self.torch
        ctx = self._context(profile)
        feeds: dict[str, np.ndarray | None] = {"planes": planes}
        if "globals" in self.inputs:
            feeds["globals"] = globals
        keep = []
        with torch.cuda.stream(self.stream):
            for name, array in feeds.items():
                t = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(
                    self.device, non_blocking=False)
                keep.append(t)
                ctx.set_input_shape(name, tuple(t.shape))
                ctx.set_tensor_address(name, t.data_ptr())
            outs = {}
            for name in self.outputs:
                out = torch.empty(tuple(ctx.get_tensor_shape(name)), dtype=torch.float32,
                                  device=self.device)
                ctx.set_tensor_address(name, out.data_ptr())
                outs[name] = out
            if not ctx.execute_async_v3(self.stream.cuda_stream):
                raise KosumiError(f"{self.path}: TensorRT failed to run the engine")
        self.stream.synchronize()
        return {k: v.cpu().numpy() for k, v in outs.items()}

    def close(self) -> None:
        self.contexts.clear()


def open_tensorrt(config: NetConfig, source: dict[str, np.ndarray] | Path,
                  options: LoadOptions) -> TensorRTBackend:
    """The backend factory registered as ``tensorrt``: plan files only."""
    if not isinstance(source, Path):
        raise KosumiError("the tensorrt backend runs plan files: build one with kosumi export "
                          "MODEL --format tensorrt --out NET.plan")
    return TensorRTBackend(source, options)
