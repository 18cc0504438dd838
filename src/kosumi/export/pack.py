"""``kosumi export MODEL --format pack --out NET.kpk``: the smallest file a net plays from.

Every tensor is stored in its best reversible layout (``export.compressibility``: the layout x
codec search, the same table the viz report shows; the cost of a layout counts its own
parameters, a permutation's order or a value table), the choice recorded in the pack's header
(``nets.pack``) so that the loader undoes it, and the whole payload is one zstd frame. A
quantized net packs its int8 weights, int32 biases and scales; a float net its float32 tensors
(quantize it first for a small pack). The config travels whole but for the quantization
report's tables (the sensitivity rows) and the training metrics, which stay in the checkpoint.
Written atomically.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import numpy as np

from kosumi.export.compressibility import TensorRow, compress, compressibility
from kosumi.fileio import atomic_write, output_errors
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.layouts import apply_layout
from kosumi.nets.pack import pack_bytes, params_to_blobs

PACK_CODEC = "zstd-19"
#: quantization-report entries a deployed net does not need (they stay in the checkpoint)
REPORT_ONLY = ("sensitivity", "agreement_on_calibration")
#: training-record entries a deployed net does not need (they stay in the checkpoint: the
#: teacher, the data's hash, the command, the steps and where it was quantized from travel)
TRAINING_ONLY = ("metrics", "settings")


def _param_bytes(steps: list[dict[str, Any]], itemsize: int) -> int:
    n = 0
    for s in steps:
        n += 2 * len(s.get("order", ())) + itemsize * len(s.get("values", ()))
    return n


def deploy_config(config: NetConfig) -> NetConfig:
    """The config a pack carries: the quantization scheme without its report tables, the
    provenance without the training metrics and settings."""
    provenance = {k: v for k, v in config.provenance.items() if k not in TRAINING_ONLY}
    if not config.quantized:
        return replace(config, provenance=provenance)
    q = dict(config.quantization)
    q["info"] = {k: v for k, v in q.get("info", {}).items() if k not in REPORT_ONLY}
    return replace(config, quantization=q, provenance=provenance)


def pack_checkpoint(checkpoint: Checkpoint, rows: list[TensorRow] | None = None
                    ) -> tuple[bytes, dict[str, Any]]:
    """(the pack's bytes, a summary: the naive size, the entropy floor, the chosen layouts).
    ``rows``: the net's compressibility table when it was measured already (with the pack's
    codec among its codecs), so that the search is not run twice."""
    tensors = {k: np.ascontiguousarray(v) for k, v in checkpoint.tensors.items()}
    if rows is None:
        rows = compressibility(tensors, (PACK_CODEC,))
    entries: list[dict[str, Any]] = []
    stored: list[bytes] = []
    blobs: list[np.ndarray] = []
    chosen: dict[str, int] = {}
    for row in rows:
        arr = tensors[row.name]
        label = min(row.sizes, key=lambda lay: row.sizes[lay][PACK_CODEC]
                    + _param_bytes(row.layouts[lay], arr.dtype.itemsize))
        steps = row.layouts[label]
        stored.append(apply_layout(arr, steps).tobytes())
        entries.append({"name": row.name, "dtype": str(arr.dtype), "shape": list(arr.shape),
                        "layout": params_to_blobs(steps, arr.dtype, blobs)})
        chosen[label] = chosen.get(label, 0) + 1
    data = pack_bytes(deploy_config(checkpoint.config), entries, stored, blobs)
    naive = len(compress(b"".join(tensors[r.name].tobytes() for r in rows), PACK_CODEC))
    return data, {"naive_bytes": naive, "chosen": chosen,
                  "entropy_bytes": round(sum(r.entropy for r in rows))}


def write_pack_model(checkpoint: Checkpoint, out: str | os.PathLike[str], source: str = "net",
                     **_: Any) -> str:
    """The export target ``pack``: write and summarise."""
    data, info = pack_checkpoint(checkpoint)
    with output_errors(out):
        atomic_write(out, data)
    cfg = checkpoint.config
    kind = f"int{cfg.quantization.get('bits')}" if cfg.quantized else "float"
    return (f"wrote {out}: kosumi pack, {cfg.arch} {kind}, {len(data):,} bytes "
            f"({len(data) / info['naive_bytes']:.2f}x the naive file: its tensors in file "
            f"order, zstd -19, {info['naive_bytes']:,}; entropy floor of the values "
            f"{info['entropy_bytes']:,})")
