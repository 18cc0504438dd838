"""``load_evaluator(path)``: any model file -> an ``Evaluator``, on any backend.

The one door: the file's format is detected from its content through the model-format registry
(``kosumi.nets.formats``: kosumi checkpoints, KataGo models, Leela Zero weights, ONNX files with
kosumi metadata, kosumi TensorRT plans), read as (config, tensors) -- or, for a runtime file
such as ``.onnx``, as its config and the path -- and handed to the backend the options ask for
(``auto``: the fastest installed, ``runtime.backend.choose_backend``), under one
``NetEvaluator`` that does the encoding, masking, softmax, perspective, symmetries and the
KataGo head's post-processing for every backend alike. A file no format claims gives one line:
``FILE: unsupported model format (...)``. A model set (``default``, or a ``kosumi-model-set``
manifest) opens as a ``SizeRouter``: each board size played by its own net.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kosumi.errors import KosumiError
from kosumi.models import DEFAULT_NAME, DEFAULT_SET, embedded_name, resolve_model, resolve_model_set
from kosumi.nets.formats import ModelFormat, detect_format, read_model_file
from kosumi.runtime.backend import choose_backend, make_backend
from kosumi.runtime.evaluator import CachedEvaluator, Evaluator
from kosumi.runtime.options import LoadOptions

__all__ = ["LoadOptions", "ModelFormat", "detect_format", "load_evaluator", "open_evaluator"]


def open_evaluator(path: str | os.PathLike[str], options: LoadOptions,
                   announce: bool = False) -> Evaluator:
    """The ``NetEvaluator`` of any model file under ``options`` (no cache). ``announce``
    prints which backend ``auto`` chose (one line on stderr)."""
    from kosumi.runtime.net_evaluator import NetEvaluator

    path = resolve_model(path)
    fmt, model = read_model_file(path)
    source = path if fmt.native else model.tensors
    try:  # name the file in every refusal
        if options.backend == "auto":
            name, why = choose_backend(fmt.name, fmt.native, options,
                                       quantized=model.config.quantized)
            if announce:
                print(f"kosumi: backend auto -> {name} ({why}) for {path.name}", file=sys.stderr)
            options = LoadOptions(backend=name, threads=options.threads, device=options.device,
                                  symmetries=options.symmetries, precision=options.precision)
        backend = make_backend(model.config, source, options, file_format=fmt.name)
    except KosumiError as e:
        if str(path) in str(e):
            raise
        raise KosumiError(f"{path}: {e}") from None
    name = embedded_name(path) or path.name
    return NetEvaluator(backend, model.config, symmetries=options.symmetries, name=name)


def load_evaluator(path: str | os.PathLike[str], backend: str = "auto", threads: int = 1,
                   cache: bool = True, symmetries: int = 1, device: str | None = None,
                   cache_size: int = 100_000, precision: str = "auto",
                   announce: bool = False) -> Evaluator:
    """Open any supported model file as an Evaluator.

    backend     "auto" (the fastest installed for the file and device), "torch",
                "onnxruntime", "tensorrt" or "numpy" (``kosumi.runtime.backend.BACKENDS``)
    threads     CPU threads for the backend
    cache       put a ``CachedEvaluator`` (LRU, ``cache_size`` positions) in front
    symmetries  average over this many board symmetries (8 = all; exact equivariance; 0: one
                random symmetry per position, KataGo's nnRandomize)
    device      backend device, e.g. "cuda" (default: CPU)
    precision   "auto", "fp32" or "fp16"
    announce    say on stderr which backend "auto" chose
    """
    options = LoadOptions(backend=backend, threads=threads, device=device,
                          symmetries=int(symmetries), precision=precision)
    model_set = resolve_model_set(path)
    evaluator: Evaluator
    if model_set is not None:
        from kosumi.runtime.size_router import SizeRouter

        name = DEFAULT_NAME if model_set.path == DEFAULT_SET else model_set.path.name
        evaluator = SizeRouter(model_set, lambda file: open_evaluator(file, options, announce),
                               name=name)
    else:
        evaluator = open_evaluator(Path(os.fspath(path)), options, announce=announce)
    return CachedEvaluator(evaluator, capacity=cache_size) if cache else evaluator
