"""Backends: the raw forward pass of a network, on feature arrays, and nothing else.

A backend takes the arrays of the net's feature set (``planes`` float32 [B, C, N, N],
``globals`` float32 [B, G] or None; one board size per call) and returns the network's RAW
outputs as float32 numpy arrays, named as the net defines them:

    policy     [B, N*N+1] logits (kosumi order: row-major from the top-left point, then pass)
    value      [B, 3] win/loss/noResult logits ("wdl") or [B, 1] pre-tanh value ("tanh")
    score_lead [B] points (kosumi nets with a score output)
    ownership  [B, N*N] pre-tanh
    score      [B, 4] KataGo's raw score outputs (katago head only; see nets.katago_net)

Everything else (features, masking, softmax, perspective, symmetries, KataGo's score and
no-result rules) is ``NetEvaluator``'s job, done once for every backend.

Backends register in ``BACKENDS`` with a lazily imported factory, so that ``import
kosumi.runtime`` never imports torch, onnxruntime or tensorrt. A factory is called as
``factory(config, source, options)``: ``config`` the ``NetConfig``, ``source`` either the net's
tensors (a dict of numpy arrays: any net kosumi reads) or the ``Path`` of a file the backend runs
natively (``.onnx`` for onnxruntime, a kosumi TensorRT ``.plan``), ``options`` the
``LoadOptions``. ``make_backend`` resolves ``auto`` and says clearly when a backend is not
installed.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kosumi.errors import KosumiError
from kosumi.extras import EXTRA_OF
from kosumi.lazy import resolve
from kosumi.nets.config import NetConfig
from kosumi.runtime.options import LoadOptions


class Backend(ABC):
    """Runs a network's forward pass on numpy feature arrays."""

    name: str = "backend"

    @abstractmethod
    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        """Raw outputs (see the module docstring) for one same-size batch."""

    def close(self) -> None:
        """Release resources (sessions, device memory)."""


@dataclass(frozen=True)
class BackendInfo:
    """A registered backend: its factory, what it needs installed, what it runs."""

    name: str
    factory: str | Callable[..., Backend]
    requires: tuple[str, ...] = ()  # Python modules that must be importable
    extra: str = ""  # the pip extra that installs them (default: kosumi.extras.EXTRA_OF's)
    nets: bool = True  # runs any net from its tensors (kosumi, KataGo, Leela Zero)
    files: tuple[str, ...] = ()  # model formats it runs natively (nets.formats names)
    devices: tuple[str, ...] = ("cpu",)  # "cpu", "cuda"
    quantized: bool = True  # runs nets quantized to int8 (their integer scheme)

    def missing(self) -> list[str]:
        """The modules it needs that are not importable here."""
        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    def installed(self) -> bool:
        return not self.missing()

    def not_installed(self) -> str:
        """One line: which package is missing, and the extra that installs it."""
        missing = self.missing() or list(self.requires)
        need = " and ".join(missing)
        extras = [self.extra] if self.extra else \
            sorted({EXTRA_OF[m] for m in missing if m in EXTRA_OF})
        hint = f" (pip install 'kosumi[{','.join(extras)}]')" if extras else ""
        return (f"backend {self.name!r} is not installed: it needs {need}, which "
                f"{'is' if len(missing) == 1 else 'are'} missing{hint}")


BACKENDS: dict[str, BackendInfo] = {}


def register_backend(info: BackendInfo) -> None:
    """Register (or replace) a backend."""
    BACKENDS[info.name] = info


register_backend(BackendInfo("torch", "kosumi.runtime.torch_backend:open_torch",
                             requires=("torch",), devices=("cpu", "cuda"), quantized=False))
register_backend(BackendInfo("onnxruntime", "kosumi.runtime.onnxruntime_backend:open_onnxruntime",
                             requires=("onnxruntime", "onnx"), files=("onnx",),
                             devices=("cpu", "cuda")))
register_backend(BackendInfo("tensorrt", "kosumi.runtime.tensorrt_backend:open_tensorrt",
                             requires=("tensorrt", "torch"), nets=False,
                             files=("tensorrt",), devices=("cuda",)))
register_backend(BackendInfo("numpy", "kosumi.runtime.numpy_backend:open_numpy"))

#: the order ``auto`` tries backends for a net given by its tensors, by device (fastest first;
#: measured with ``kosumi bench``, see benchmarks/RESULTS.md)
AUTO_ORDER = {"cpu": ("onnxruntime", "torch", "numpy"), "cuda": ("onnxruntime", "torch")}


def backend_info(name: str) -> BackendInfo:
    info = BACKENDS.get(name)
    if info is None:
        raise KosumiError(f"unknown backend {name!r} (known: auto, {', '.join(sorted(BACKENDS))})")
    return info


def cuda_available(backend: str) -> bool:
    """Can ``backend`` (installed) reach a CUDA device?"""
    try:
        if backend == "torch":
            import torch

            return bool(torch.cuda.is_available())
        if backend == "onnxruntime":
            import onnxruntime

            return "CUDAExecutionProvider" in onnxruntime.get_available_providers()
        if backend == "tensorrt":
            import torch

            return bool(torch.cuda.is_available())
    except Exception:
        return False
    return False


def choose_backend(file_format: str, native: bool, options: LoadOptions,
                   quantized: bool = False) -> tuple[str, str]:
    """``auto``: (backend name, why) for a model of ``file_format`` (``native``: the file is a
    runtime artefact, e.g. ``.onnx``, that only some backends open; ``quantized``: an int8 net,
    which only the backends that run its integer scheme take)."""
    device = "cuda" if options.cuda else "cpu"
    if native:
        for info in BACKENDS.values():
            if file_format in info.files and info.installed():
                return info.name, f"the one that runs {file_format} files"
        names = [i for i in BACKENDS.values() if file_format in i.files]
        hint = names[0].not_installed() if names else f"no backend runs {file_format} files"
        raise KosumiError(hint)
    for name in AUTO_ORDER[device]:
        info = BACKENDS[name]
        if quantized and not info.quantized:
            continue
        if info.installed() and (device == "cpu" or cuda_available(name)):
            return name, f"the fastest installed on {options.device_name}"
    if device == "cuda":
        raise KosumiError("--device cuda: no installed backend sees a CUDA device (install "
                          "onnxruntime-gpu or a CUDA build of torch, and check the driver)")
    return "numpy", "the only one installed"


def make_backend(config: NetConfig, source: dict[str, np.ndarray] | Path, options: LoadOptions,
                 file_format: str = "") -> Backend:
    """The backend ``options.backend`` (``auto`` resolved) for a net: ``source`` is its tensors
    or the path of a file the backend runs natively. KosumiError when the backend is unknown,
    not installed, cannot run this model, or the device is missing."""
    native = isinstance(source, Path)
    name = options.backend
    if name == "auto":
        name, _ = choose_backend(file_format, native, options, quantized=config.quantized)
    info = backend_info(name)
    if native and file_format not in info.files:
        runs = [i.name for i in BACKENDS.values() if file_format in i.files]
        raise KosumiError(f"{source}: the {name} backend cannot run {file_format} files "
                          f"(use --backend {' or '.join(runs) or 'auto'})")
    if not native and not info.nets:
        raise KosumiError(f"the {name} backend runs its own plan files only: export the net "
                          f"first (kosumi export MODEL --format {name} --out NET.plan)")
    if not info.installed():
        raise KosumiError(info.not_installed())
    if options.cuda and "cuda" not in info.devices:
        raise KosumiError(f"the {name} backend runs on the CPU only, not --device "
                          f"{options.device}")
    if not options.cuda and "cpu" not in info.devices:
        raise KosumiError(f"the {name} backend needs a GPU: give --device cuda")
    if options.cuda and not cuda_available(name):
        raise KosumiError(f"--device {options.device}: the {name} backend sees no CUDA device")
    factory: Callable[..., Backend] = resolve(info.factory, f"backend {name!r}")
    return factory(config, source, options)
