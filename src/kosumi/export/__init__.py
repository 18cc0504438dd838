"""Exporters: a kosumi model -> another format (``kosumi export FILE --format NAME --out OUT``).

Exporters live in one registry, ``EXPORT_FORMATS``: name -> a lazily imported
``"module:function"`` (or a callable) called as ``function(source, out) -> str``, which reads
``source``, writes ``out`` atomically and returns a one-line summary; every problem a user can
cause is a ``KosumiError``. Built in: ``leelaz`` (Leela Zero text weights). ONNX, TensorRT and
packed formats register here with ``register_export_format``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kosumi.errors import KosumiError
from kosumi.lazy import resolve

Exporter = Callable[[str | os.PathLike, str | os.PathLike], str]

#: format name -> (one-line description, "module:function" or callable)
EXPORT_FORMATS: dict[str, tuple[str, str | Exporter]] = {
    "leelaz": ("Leela Zero text weights, version 1 (.txt, or gzip when OUT ends in .gz)",
               "kosumi.export.leelaz:export_leelaz"),
}


def register_export_format(name: str, description: str, exporter: str | Exporter) -> None:
    """Register (or replace) an export format."""
    EXPORT_FORMATS[name] = (description, exporter)


def get_exporter(name: str) -> Exporter:
    """The exporter of format ``name`` (imported on first use). KosumiError if unknown."""
    entry = EXPORT_FORMATS.get(name)
    if entry is None:
        raise KosumiError(f"unknown export format {name!r} (known: "
                          f"{', '.join(sorted(EXPORT_FORMATS))})")
    target = entry[1]
    return resolve(target, f"export format {name!r}")


def export_model(source: str | os.PathLike, fmt: str, out: str | os.PathLike) -> str:
    """Export ``source`` to ``out`` in format ``fmt``; returns the exporter's summary line."""
    from kosumi.models import resolve_model

    return get_exporter(fmt)(resolve_model(source), out)
