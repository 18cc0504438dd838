"""The ``onnxruntime`` backend: ONNX Runtime sessions over kosumi's ONNX models.

It runs ``.onnx`` files with kosumi metadata (``kosumi export --format onnx``), and any other
net kosumi reads (a kosumi checkpoint, a KataGo model, Leela Zero weights): those are exported
in memory on first use (``nets.onnx``) and cached on disk under a content hash
(``$KOSUMI_ONNX_CACHE_DIR``, else ``~/.cache/kosumi/onnx/<sha256>.onnx``: the net's config and
tensors, the precision and the exporter's version), so the next run starts at once.

An int8 net whose weights go beyond +-63 runs on x86 CPUs without VNNI with its weights held as
uint8 (zero point 128, ``nets.onnx.unsigned_weights``): ONNX Runtime's uint8 x int8 kernels
there add product pairs in int16 and would saturate; its uint8 x uint8 ones are exact
(``int8_weight_type``; the backend's ``int8_weights`` says which it took).

Execution providers: the CPU (``intra_op_num_threads`` = ``--threads``, sequential execution);
with ``--device cuda[:K]``, CUDA (``onnxruntime-gpu``), after ONNX Runtime's TensorRT provider
when ``KOSUMI_ORT_TENSORRT=1`` and it is installed (its engines cached beside the ONNX files).
On CUDA the inputs and outputs go through I/O binding (one copy each way, no per-call
allocation of device buffers by ``run``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write, user_cache_dir
from kosumi.nets.config import NetConfig
from kosumi.nets.onnx import (
    EXPORTER_VERSION,
    META_INT8_WEIGHTS,
    META_SOURCE,
    OPSET,
    is_int8,
    onnx_bytes,
    read_onnx_model,
    tensors_sha256,
)
from kosumi.runtime.backend import Backend
from kosumi.runtime.options import LoadOptions

CACHE_ENV = "KOSUMI_ONNX_CACHE_DIR"


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise KosumiError("backend 'onnxruntime' is not installed (pip install "
                          "'kosumi[onnx]')") from None
    return onnxruntime


def int8_weight_type(config: NetConfig) -> str:
    """How ONNX Runtime on this CPU should hold an int8 net's weights: "uint8" (zero point 128,
    ``nets.onnx.unsigned_weights``) where its uint8 x int8 kernels would saturate them (x86
    without VNNI, weights beyond +-63), else "int8" (the faster kernels)."""
    from kosumi.nets.quant import scheme_of
    from kosumi.runtime.cpu import int8_pairs_saturate

    if not is_int8(config) or not int8_pairs_saturate():
        return "int8"
    scheme = scheme_of(config)
    return "uint8" if scheme is not None and scheme.weight_max > 63 else "int8"


def _cache_path(key_text: str) -> tuple[Path, Path]:
    key = hashlib.sha256(f"{key_text}:{EXPORTER_VERSION}:{OPSET}".encode()).hexdigest()
    folder = user_cache_dir("onnx", CACHE_ENV)
    return folder, folder / f"{key}.onnx"


def cached_onnx(config: NetConfig, tensors: dict[str, np.ndarray], precision: str,
                int8_weights: str = "int8", pad_channels: bool = True) -> Path:
    """The ONNX file of a net in the on-disk cache, exported now if it is not there yet
    (``pad_channels``: ``nets.onnx.onnx_model``'s, False for CUDA)."""
    suffix = (":uint8" if int8_weights == "uint8" else "") + ("" if pad_channels else ":nopad")
    folder, path = _cache_path(f"{tensors_sha256(config, tensors)}:{precision}{suffix}")
    if path.exists():
        return path
    return _store(folder, path, onnx_bytes(config, tensors, precision, check=False,
                                           int8_weights=int8_weights, pad_channels=pad_channels))


def _unsigned_copy(model: Path, meta: dict[str, str]) -> Path:
    """A cached copy of a kosumi int8 ONNX file with its weights unsigned."""
    import onnx

    from kosumi.nets.onnx import unsigned_weights

    digest = meta.get(META_SOURCE) or hashlib.sha256(model.read_bytes()).hexdigest()
    folder, path = _cache_path(f"{digest}:file:uint8")
    if path.exists():
        return path
    proto = onnx.load(str(model))
    unsigned_weights(proto)
    return _store(folder, path, proto.SerializeToString())


def _store(folder: Path, path: Path, data: bytes) -> Path:
    """Write ``data`` to the cache file ``path`` (atomically), or beside the cache if it is
    not writable; the path written."""
    key = path.stem
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
    except OSError:  # an unwritable cache is no reason not to run: run from memory
        fallback = folder.parent / f"kosumi-onnx-{os.getpid()}-{key[:16]}.onnx"
        try:
            atomic_write(fallback, data)
            return fallback
        except OSError:
            raise KosumiError(f"{folder}: cannot write the ONNX cache (set {CACHE_ENV} to a "
                              "writable folder)") from None
    return path


def _providers(ort: Any, options: LoadOptions, cache: Path) -> list[Any]:
    if not options.cuda:
        return ["CPUExecutionProvider"]
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise KosumiError(f"--device {options.device}: this onnxruntime has no CUDA provider "
                          "(pip install onnxruntime-gpu)")
    dev = {"device_id": options.device_index}
    providers: list[Any] = []
    if os.environ.get("KOSUMI_ORT_TENSORRT") == "1" and "TensorrtExecutionProvider" in available:
        providers.append(("TensorrtExecutionProvider", {
            **dev, "trt_engine_cache_enable": True, "trt_engine_cache_path": str(cache),
            "trt_fp16_enable": options.precision == "fp16"}))
    providers.append(("CUDAExecutionProvider", dev))
    providers.append("CPUExecutionProvider")
    return providers


class OnnxRuntimeBackend(Backend):
    """One ONNX Runtime session (see the module docstring)."""

    name = "onnxruntime"

    def __init__(self, model: Path, options: LoadOptions, io_binding: bool | None = None,
                 int8_weights: str = "int8"):
        ort = _ort()
        so = ort.SessionOptions()
        if options.threads:
            so.intra_op_num_threads = int(options.threads)
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(model), so,
                                                providers=_providers(ort, options, model.parent))
        except KosumiError:
            raise
        except Exception as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise KosumiError(f"{model}: onnxruntime cannot load it ({first})") from None
        self.path = model
        self.int8_weights = int8_weights  # how an int8 net's weights are held (int8_weight_type)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.providers = self.session.get_providers()
        self.io_binding = options.cuda if io_binding is None else io_binding

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        feeds = {"planes": np.ascontiguousarray(planes, dtype=np.float32)}
        if "globals" in self.inputs:
            if globals is None:
                raise ValueError("this net needs global inputs")
            feeds["globals"] = np.ascontiguousarray(globals, dtype=np.float32)
        if not self.io_binding:
            return dict(zip(self.outputs, self.session.run(self.outputs, feeds), strict=True))
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        for name in self.outputs:
            binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        return dict(zip(self.outputs, binding.copy_outputs_to_cpu(), strict=True))


def open_onnxruntime(config: NetConfig, source: dict[str, np.ndarray] | Path,
                     options: LoadOptions) -> OnnxRuntimeBackend:
    """The backend factory registered as ``onnxruntime``."""
    if isinstance(source, Path):
        meta = read_onnx_model(source).metadata
        precision = meta.get("kosumi_precision", "fp32")
        if options.precision not in ("auto", precision):
            raise KosumiError(f"{source}: an {precision} ONNX file (asked for "
                              f"{options.precision}; export another one)")
        weights = meta.get(META_INT8_WEIGHTS, "int8")
        if weights == "int8" and int8_weight_type(config) == "uint8" and not options.cuda:
            return OnnxRuntimeBackend(_unsigned_copy(source, meta), options, int8_weights="uint8")
        return OnnxRuntimeBackend(source, options, int8_weights=weights)
    own = config.own_precision
    if own is not None:  # a quantized net runs at its own precision (int8 Q/DQ, or fp16)
        if options.precision not in ("auto", own):
            raise KosumiError(f"an {own} net runs in {own} (asked for {options.precision})")
        weights = "int8" if options.cuda else int8_weight_type(config)
        return OnnxRuntimeBackend(cached_onnx(config, source, own, weights,
                                              pad_channels=not options.cuda), options,
                                  int8_weights=weights)
    precision = "fp32" if options.precision == "auto" else options.precision
    if precision not in ("fp32", "fp16"):
        raise KosumiError(f"the onnxruntime backend runs fp32 or fp16 float nets (asked for "
                          f"{precision}: quantize the net first)")
    return OnnxRuntimeBackend(cached_onnx(config, source, precision), options)
