"""``kosumi export MODEL --format NAME --out OUT``: any net kosumi reads, written in another format.

The formats are the writable entries of the one model-format registry (``kosumi.nets.formats``):
``kosumi`` (a checkpoint), ``leelaz`` (Leela Zero text weights), ``onnx`` (fp32/fp16, kosumi
metadata) and ``tensorrt`` (a serialized engine built from the ONNX, GPU only). The source is
read as (config, tensors) through the same registry, so a KataGo model or Leela Zero weights
export like a kosumi checkpoint. Every writer writes atomically and returns a one-line summary;
every problem a user can cause is a ``KosumiError``.
"""

from __future__ import annotations

import os
from typing import Any

from kosumi.errors import KosumiError


def export_formats() -> dict[str, str]:
    """name -> description of every format ``export_model`` writes."""
    from kosumi.nets.formats import writable_formats

    return {f.name: f.description for f in writable_formats()}


def export_model(source: str | os.PathLike[str], fmt: str, out: str | os.PathLike[str],
                 **options: Any) -> str:
    """Export ``source`` to ``out`` in format ``fmt``; returns the writer's summary line.
    ``options`` go to the writer (``precision``, ``batch`` for TensorRT, ...)."""
    from kosumi.models import resolve_model
    from kosumi.nets.formats import get_format, read_net

    names = export_formats()
    if fmt not in names:
        raise KosumiError(f"unknown export format {fmt!r} (known: {', '.join(names)})")
    target = get_format(fmt)
    path = resolve_model(source)
    checkpoint = read_net(path, what="export")
    return target.writer()(checkpoint, out, source=str(source), **options)
