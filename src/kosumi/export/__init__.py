"""``kosumi export MODEL --format NAME --out OUT``: any net kosumi reads, written in another format.

``WRITERS`` names the formats of the one model-format registry (``kosumi.nets.formats``) that
kosumi writes, each with its writer: ``kosumi`` (a checkpoint), ``leelaz`` (Leela Zero text
weights), ``pack`` (the compact zstd pack), ``onnx`` (fp32/fp16/int8, kosumi metadata) and
``tensorrt`` (a serialized engine built from the ONNX, GPU only). The source is
read as (config, tensors) through the same registry, so a KataGo model or Leela Zero weights
export like a kosumi checkpoint. Every writer writes atomically and returns a one-line summary;
every problem a user can cause is a ``KosumiError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from kosumi.errors import KosumiError
from kosumi.export.pack import write_pack_model
from kosumi.export.tensorrt import write_plan_model
from kosumi.nets.checkpoint import write_checkpoint_model
from kosumi.nets.formats import get_format, read_net
from kosumi.nets.leelaz import write_leelaz_model
from kosumi.nets.onnx import write_onnx_model

#: ``writer(checkpoint, out, source=..., **options) -> summary line``, atomic
Writer = Callable[..., str]
#: the formats ``kosumi export`` writes (names of ``nets.formats``), each with its writer
WRITERS: dict[str, Writer] = {
    "kosumi": write_checkpoint_model,
    "leelaz": write_leelaz_model,
    "pack": write_pack_model,
    "onnx": write_onnx_model,
    "tensorrt": write_plan_model,
}


def export_formats() -> dict[str, str]:
    """name -> description of every format ``export_model`` writes."""
    return {name: get_format(name).description for name in WRITERS}


def export_model(source: str | os.PathLike[str], fmt: str, out: str | os.PathLike[str],
                 **options: Any) -> str:
    """Export ``source`` to ``out`` in format ``fmt``; returns the writer's summary line.
    ``options`` go to the writer (``precision``, ``batch`` for TensorRT, ...)."""
    if fmt not in WRITERS:
        raise KosumiError(f"unknown export format {fmt!r} (known: {', '.join(WRITERS)})")
    checkpoint = read_net(source, what="export")
    return WRITERS[fmt](checkpoint, out, source=str(source), **options)
