"""``load_evaluator(path)``: any model file -> an ``Evaluator``, the format detected from content.

Model formats live in one registry, ``MODEL_FORMATS``, tried in order: each has a ``sniff``
(path, first bytes of the file) -> bool and an ``open`` (path, LoadOptions) -> Evaluator. Known:
kosumi checkpoints (safetensors + config) and Leela Zero text weights (registered below); the
KataGo (.bin.gz / .txt.gz); later formats (ONNX, the pack) register themselves here with
``register_model_format`` (use ``first=True`` to be tried before the others). A file no format claims gives one line:
``FILE: unsupported model format (...)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kosumi.errors import KosumiError
from kosumi.models import resolve_model
from kosumi.runtime.evaluator import CachedEvaluator, Evaluator

SNIFF_BYTES = 4096


@dataclass(frozen=True)
class LoadOptions:
    """How to run a model: backend name, CPU threads, device, symmetries to average."""

    backend: str = "torch"
    threads: int = 1
    device: str | None = None
    symmetries: int = 1


@dataclass(frozen=True)
class ModelFormat:
    """A model file format: how to recognise it and how to open it as an Evaluator."""

    name: str
    description: str
    sniff: Callable[[Path, bytes], bool]
    open: Callable[[Path, LoadOptions], Evaluator]


MODEL_FORMATS: list[ModelFormat] = []


def register_model_format(fmt: ModelFormat, first: bool = False) -> None:
    """Add a format (replacing one of the same name); ``first`` makes it be tried first."""
    MODEL_FORMATS[:] = [f for f in MODEL_FORMATS if f.name != fmt.name]
    if first:
        MODEL_FORMATS.insert(0, fmt)
    else:
        MODEL_FORMATS.append(fmt)


def detect_format(path: str | os.PathLike) -> ModelFormat:
    """The registered format that claims the file; KosumiError if none does."""
    path = resolve_model(path)
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise KosumiError(f"{path}: cannot read model file ({e.strerror or e})") from None
    for fmt in MODEL_FORMATS:
        if fmt.sniff(path, head):
            return fmt
    known = "; ".join(f.description for f in MODEL_FORMATS)
    raise KosumiError(f"{path}: unsupported model format (known: {known})")


def load_evaluator(path: str | os.PathLike, backend: str = "torch", threads: int = 1,
                   cache: bool = True, symmetries: int = 1, device: str | None = None,
                   cache_size: int = 100_000) -> Evaluator:
    """Open any supported model file as an Evaluator.

    backend     "torch" (more register in ``kosumi.runtime.backend.BACKENDS``)
    threads     CPU threads for the backend
    cache       put a ``CachedEvaluator`` (LRU, ``cache_size`` positions) in front
    symmetries  average over this many board symmetries (8 = all; exact equivariance)
    device      backend device, e.g. "cuda" (default: CPU)
    """
    if not 1 <= int(symmetries) <= 8:
        raise KosumiError(f"symmetries must be 1..8, not {symmetries}")
    options = LoadOptions(backend=backend, threads=threads, device=device,
                          symmetries=int(symmetries))
    path = resolve_model(path)
    evaluator = detect_format(path).open(path, options)
    return CachedEvaluator(evaluator, capacity=cache_size) if cache else evaluator


# ---------------------------------------------------------------------------- kosumi checkpoints
def _sniff_kosumi(path: Path, head: bytes) -> bool:
    from kosumi.nets.checkpoint import sniff_checkpoint

    return sniff_checkpoint(path)


def _open_kosumi(path: Path, options: LoadOptions) -> Evaluator:
    from kosumi.nets.checkpoint import read_checkpoint
    from kosumi.runtime.backend import make_backend
    from kosumi.runtime.net_evaluator import NetEvaluator

    ckpt = read_checkpoint(path)
    backend = make_backend(options.backend, ckpt, path=str(path), threads=options.threads,
                           device=options.device)
    return NetEvaluator(backend, ckpt.config, symmetries=options.symmetries, name=path.name)


register_model_format(ModelFormat(
    name="kosumi",
    description="kosumi checkpoint (safetensors with a kosumi_config)",
    sniff=_sniff_kosumi,
    open=_open_kosumi,
))


# ---------------------------------------------------------------------------- Leela Zero
def _sniff_leelaz(path: Path, head: bytes) -> bool:
    from kosumi.nets.leelaz import sniff_leelaz

    return sniff_leelaz(head)


def _open_leelaz(path: Path, options: LoadOptions) -> Evaluator:
    from kosumi.runtime.leelaz_evaluator import open_leelaz

    return open_leelaz(path, options)


register_model_format(ModelFormat(
    name="leelaz",
    description="Leela Zero text weights (version 1 or 2, plain or gzip)",
    sniff=_sniff_leelaz,
    open=_open_leelaz,
))


# ---------------------------------------------------------------------------- KataGo
def _sniff_katago(path: Path, head: bytes) -> bool:
    from kosumi.nets.katago import is_katago_file

    return is_katago_file(path)  # reads (and un-gzips) the header itself


def _open_katago(path: Path, options: LoadOptions) -> Evaluator:
    from kosumi.runtime.katago_evaluator import load_katago_evaluator

    if options.backend != "torch":
        raise KosumiError(f"{path}: KataGo models run on the torch backend only "
                          f"(asked for {options.backend!r}); export a student for other runtimes")
    return load_katago_evaluator(path, threads=options.threads, symmetries=options.symmetries,
                                 device=options.device)


register_model_format(ModelFormat(
    name="katago",
    description="KataGo model (.bin.gz / .txt.gz, model version 8)",
    sniff=_sniff_katago,
    open=_open_katago,
))
