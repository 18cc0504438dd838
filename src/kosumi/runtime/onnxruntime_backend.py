"""The ``onnxruntime`` backend: ONNX Runtime sessions over kosumi's ONNX models.

It runs ``.onnx`` files with kosumi metadata (``kosumi export --format onnx``), and any other
net kosumi reads (a kosumi checkpoint, a KataGo model, Leela Zero weights): those are exported
in memory on first use (``nets.onnx``) and cached on disk under a content hash
(``$KOSUMI_ONNX_CACHE_DIR``, else ``~/.cache/kosumi/onnx/<sha256>.onnx``: the net's config and
tensors, the precision and the exporter's version), so the next run starts at once.

How an int8 net's weights are held is chosen per CPU (``int8_weight_type``; the backend's
``int8_weights`` says which it took; ``nets.onnx_weights.recode_weights`` rewrites them, the
integers unchanged): on x86 CPUs without VNNI, weights beyond +-63 as uint8 (zero point 128), since
ONNX Runtime's uint8 x int8 kernels there add product pairs in int16 and would saturate while
its uint8 x uint8 ones are exact; on CPUs with AMX_INT8 tiles as int8 with zero point -1
("offset"), which sends the convolutions to the QGEMM kernels that use the tiles, when a probe
convolution timed both ways says it is faster (``weight_form_timings``: MLAS does not always
take the tiles, e.g. not in a process confined to one CPU) and the net runs on one thread;
elsewhere as they are (symmetric
int8, ONNX Runtime's direct ``ConvSym`` convolution). ``KOSUMI_INT8_WEIGHTS`` (int8, uint8 or
offset) overrides the choice, e.g. to time one form against another.

Execution providers: the CPU (``intra_op_num_threads`` = ``--threads``, sequential execution);
with ``--device cuda[:K]``, CUDA (``onnxruntime-gpu``), after ONNX Runtime's TensorRT provider
when ``KOSUMI_ORT_TENSORRT=1`` and it is installed (its engines cached beside the ONNX files).
On CUDA the inputs and outputs go through I/O binding (one copy each way, no per-call
allocation of device buffers by ``run``).
"""

from __future__ import annotations

import hashlib
import os
import time
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write, user_cache_dir
from kosumi.nets.config import NetConfig
from kosumi.nets.onnx import (
    EXPORTER_VERSION,
    OPSET,
    is_int8,
    onnx_bytes,
    read_onnx_model,
    tensors_sha256,
)
from kosumi.nets.onnx_meta import META_INT8_WEIGHTS, META_SOURCE
from kosumi.nets.onnx_weights import INT8_WEIGHTS
from kosumi.runtime.backend import Backend
from kosumi.runtime.options import LoadOptions

CACHE_ENV = "KOSUMI_ONNX_CACHE_DIR"
WEIGHTS_ENV = "KOSUMI_INT8_WEIGHTS"


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise KosumiError("backend 'onnxruntime' is not installed: it needs onnxruntime, which "
                          "is missing (pip install 'kosumi[onnx]')") from None
    return onnxruntime


def int8_weight_type(config: NetConfig, threads: int = 1) -> str:
    """How ONNX Runtime on this CPU should hold an int8 net's weights (``INT8_WEIGHTS``) when it
    runs on ``threads`` threads (0: ONNX Runtime's default): ``$KOSUMI_INT8_WEIGHTS`` if set;
    else "uint8" where its uint8 x int8 kernels would saturate them (x86 without VNNI, weights
    beyond +-63), "offset" on one thread where AMX_INT8 tiles make its QGEMM path the faster
    one, else "int8" (see the module docstring). On more threads the symmetric kernel gains
    from each one and QGEMM on the tiles need not: on a 2-core Xeon, `default`'s 9x9 batch of
    16 took 1.17 ms symmetric against 1.48 ms offset on 2 threads (1.72 / 1.45 on one)."""
    from kosumi.nets.quant import scheme_of
    from kosumi.runtime.cpu import int8_pairs_saturate, int8_tiles

    if not is_int8(config):
        return "int8"
    forced = os.environ.get(WEIGHTS_ENV)
    if forced:
        if forced not in INT8_WEIGHTS:
            raise KosumiError(f"{WEIGHTS_ENV}={forced}: use {', '.join(INT8_WEIGHTS)}")
        return forced
    scheme = scheme_of(config)
    if int8_pairs_saturate():
        return "uint8" if scheme is not None and scheme.weight_max > 63 else "int8"
    if threads != 1 or not int8_tiles():
        return "int8"
    size = min((n for n in config.board_sizes if n >= 9), default=max(config.board_sizes))
    timings = weight_form_timings(config.channels, size)  # the smallest board played on
    return "offset" if timings and timings["offset"] < OFFSET_GAIN * timings["int8"] else "int8"


OFFSET_GAIN = 0.95  # the offset form is taken when its probe convolution is 5% faster


@cache
def weight_form_timings(channels: int = 64, size: int = 9) -> dict[str, float] | None:
    """Microseconds of one probe int8 convolution (``channels`` -> ``channels``, 3x3, a batch
    of 16 boards of ``size``, 1 thread; medians of interleaved calls) with symmetric weights
    ("int8", MLAS's ``ConvSym``) and with zero point -1 ("offset", im2col + QGEMM, on AMX tiles
    when MLAS takes them), measured once a process for each shape; None without ``onnx`` to
    build it or if ONNX Runtime cannot run it. The tiles pay off on wide convolutions: on a
    Xeon with AMX, offset took 0.85x int8's time at 64 channels and 1.4x at 16."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    q = rng.integers(-127, 128, (channels, channels, 3, 3)).astype(np.int8)
    x = rng.integers(0, 256, (16, channels, size, size)).astype(np.uint8)
    try:
        sessions = {"int8": _probe_session(q, 0, x.shape),
                    "offset": _probe_session((q.astype(np.int16) - 1).astype(np.int8), -1,
                                             x.shape)}
        times: dict[str, list[float]] = {form: [] for form in sessions}
        for _ in range(3):
            for form, session in sessions.items():
                session.run(None, {"x": x})
                for _ in range(8):
                    t0 = time.perf_counter()
                    session.run(None, {"x": x})
                    times[form].append(time.perf_counter() - t0)
    except Exception:  # a probe that cannot run is no reason not to run the net
        return None
    return {form: float(np.median(t)) * 1e6 for form, t in times.items()}


def _probe_session(w: np.ndarray, zero: int, shape: tuple[int, ...]) -> Any:
    """An ONNX Runtime session on 1 thread of one uint8 -> uint8 QLinearConv with weights ``w``
    and weight zero point ``zero``."""
    from kosumi.nets.onnx import one_conv_model

    ort = _ort()
    n = w.shape[0]
    model = one_conv_model(shape, (0.02, np.uint8(128)), w, np.full(n, 1e-3, np.float32),
                           np.full(n, zero, np.int8), (0.05, np.uint8(128)))
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _cache_path(key_text: str) -> tuple[Path, Path]:
    key = hashlib.sha256(f"{key_text}:{EXPORTER_VERSION}:{OPSET}".encode()).hexdigest()
    folder = user_cache_dir("onnx", CACHE_ENV)
    return folder, folder / f"{key}.onnx"


def cached_onnx(config: NetConfig, tensors: dict[str, np.ndarray], precision: str,
                int8_weights: str = "int8", pad_channels: bool = True) -> Path:
    """The ONNX file of a net in the on-disk cache, exported now if it is not there yet
    (``pad_channels``: ``nets.onnx.onnx_model``'s, False for CUDA)."""
    suffix = ("" if int8_weights == "int8" else f":{int8_weights}") + \
        ("" if pad_channels else ":nopad")
    folder, path = _cache_path(f"{tensors_sha256(config, tensors)}:{precision}{suffix}")
    if path.exists():
        return path
    return _store(folder, path, onnx_bytes(config, tensors, precision, check=False,
                                           int8_weights=int8_weights, pad_channels=pad_channels))


def _recoded_copy(model: Path, meta: dict[str, str], form: str) -> Path:
    """A cached copy of a kosumi int8 ONNX file with its weights held as ``form``."""
    import onnx

    from kosumi.nets.onnx_weights import recode_weights

    digest = meta.get(META_SOURCE) or hashlib.sha256(model.read_bytes()).hexdigest()
    folder, path = _cache_path(f"{digest}:file:{form}")
    if path.exists():
        return path
    proto = onnx.load(str(model))
    recode_weights(proto, form)
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
        wanted = int8_weight_type(config, options.threads)
        if not options.cuda and weights != wanted and (weights == "int8" or wanted == "uint8"):
            return OnnxRuntimeBackend(_recoded_copy(source, meta, wanted), options,
                                      int8_weights=wanted)
        return OnnxRuntimeBackend(source, options, int8_weights=weights)
    own = config.own_precision
    if own is not None:  # a quantized net runs at its own precision (int8 Q/DQ, or fp16)
        if options.precision not in ("auto", own):
            raise KosumiError(f"an {own} net runs in {own} (asked for {options.precision})")
        weights = "int8" if options.cuda else int8_weight_type(config, options.threads)
        return OnnxRuntimeBackend(cached_onnx(config, source, own, weights,
                                              pad_channels=not options.cuda), options,
                                  int8_weights=weights)
    precision = "fp32" if options.precision == "auto" else options.precision
    if precision not in ("fp32", "fp16"):
        raise KosumiError(f"the onnxruntime backend runs fp32 or fp16 float nets (asked for "
                          f"{precision}: quantize the net first)")
    return OnnxRuntimeBackend(cached_onnx(config, source, precision), options)
