"""How small each tensor of a net gets: every codec x every reversible layout, with the floor.

``compressibility(tensors)`` measures, per tensor, the bytes of each codec (zstd at levels 3,
19 and 22, zstd 22 in long mode, zstd with a dictionary trained on the net's own tensors, gzip
-9, xz -9, bz2 -9) on each candidate layout (``nets.layouts``: as stored; transposed; output
channels reordered so that similar filters sit together, alone and transposed; an 8-bit value
table where at most 256 distinct values occur; byte planes for multi-byte tensors; deltas), next
to the empirical order-0 entropy of the values (the floor a coder of independent symbols can
reach). ``best_layouts`` picks, per tensor, the smallest layout under the pack's codec (zstd,
the only one a pack's loader needs); the pack records the choice in its header. The viz report
shows the same table.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zstandard

from kosumi.nets.layouts import apply_layout, similar_order, table_step

ZSTD_CODECS = ("zstd-3", "zstd-19", "zstd-22", "zstd-22-long", "zstd-dict")
OTHER_CODECS = ("gzip-9", "xz-9", "bz2-9")
CODECS = ZSTD_CODECS + OTHER_CODECS
DICT_BYTES = 16 * 1024


def compress(data: bytes, codec: str, dictionary: zstandard.ZstdCompressionDict | None = None
             ) -> bytes:
    if codec == "zstd-3":
        return zstandard.ZstdCompressor(level=3).compress(data)
    if codec == "zstd-19":
        return zstandard.ZstdCompressor(level=19).compress(data)
    if codec == "zstd-22":
        return zstandard.ZstdCompressor(level=22).compress(data)
    if codec == "zstd-22-long":
        params = zstandard.ZstdCompressionParameters.from_level(22, enable_ldm=True,
                                                                window_log=27)
        return zstandard.ZstdCompressor(compression_params=params).compress(data)
    if codec == "zstd-dict":
        if dictionary is None:
            return zstandard.ZstdCompressor(level=19).compress(data)
        return zstandard.ZstdCompressor(level=19, dict_data=dictionary).compress(data)
    if codec == "gzip-9":
        return gzip.compress(data, compresslevel=9, mtime=0)
    if codec == "xz-9":
        return lzma.compress(data, preset=9)
    if codec == "bz2-9":
        return bz2.compress(data, compresslevel=9)
    raise ValueError(f"unknown codec {codec!r}")


def entropy_bytes(arr: np.ndarray) -> float:
    """Order-0 empirical entropy of the values, in bytes: sum over distinct values v of
    -count(v) * log2(count(v) / n) / 8."""
    _, counts = np.unique(np.asarray(arr).reshape(-1), return_counts=True)
    p = counts / counts.sum()
    return float(-(counts * np.log2(p)).sum() / 8.0)


def candidate_layouts(arr: np.ndarray) -> dict[str, list[dict[str, Any]]]:
    """The reversible layouts worth trying for a tensor, by label."""
    out: dict[str, list[dict[str, Any]]] = {"stored": []}
    if arr.ndim >= 2 and arr.shape[0] > 1:
        out["permuted"] = [{"kind": "permute", "order": similar_order(arr)}]
    if arr.ndim == 4:
        out["transposed"] = [{"kind": "transpose", "axes": [2, 3, 1, 0]}]
        out["in-major"] = [{"kind": "transpose", "axes": [1, 0, 2, 3]}]
        if "permuted" in out:
            out["permuted+transposed"] = out["permuted"] + out["transposed"]
    elif arr.ndim == 2:
        out["transposed"] = [{"kind": "transpose", "axes": [1, 0]}]
    table = table_step(arr)
    if table is not None:
        out["table"] = [table]
    if arr.dtype.itemsize > 1:
        out["byteplanes"] = [{"kind": "byteplanes"}]
    if arr.dtype.kind in "iu":
        out["delta"] = [{"kind": "delta"}]
    return out


@dataclass
class TensorRow:
    """One tensor's figures: raw bytes, entropy floor, bytes per (layout, codec)."""

    name: str
    dtype: str
    shape: list[int]
    raw: int
    entropy: float
    sizes: dict[str, dict[str, int]] = field(default_factory=dict)  # layout -> codec -> bytes
    layouts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def best(self, codecs: tuple[str, ...] = ZSTD_CODECS) -> tuple[str, str, int]:
        """(layout, codec, bytes) of the smallest combination among ``codecs``."""
        return min(((lay, c, b) for lay, row in self.sizes.items() for c, b in row.items()
                    if c in codecs), key=lambda x: x[2])


def train_dictionary(tensors: dict[str, np.ndarray]) -> zstandard.ZstdCompressionDict | None:
    """A zstd dictionary trained on samples of the net's own tensors (None when too small)."""
    samples: list[bytes | bytearray | memoryview] = []
    for arr in tensors.values():
        data = np.ascontiguousarray(arr).tobytes()
        for start in range(0, len(data), 4096):
            samples.append(data[start:start + 4096])
    if sum(len(s) for s in samples) < 8 * DICT_BYTES or len(samples) < 8:
        return None
    try:
        return zstandard.train_dictionary(DICT_BYTES, samples)
    except zstandard.ZstdError:
        return None


def compressibility(tensors: dict[str, np.ndarray], codecs: tuple[str, ...] = CODECS,
                    dictionary: zstandard.ZstdCompressionDict | None = None,
                    workers: int | None = None) -> list[TensorRow]:
    """Every tensor x layout x codec (see the module docstring). The codecs release the GIL:
    ``workers`` threads (default: the CPUs) compress side by side; the figures do not depend
    on how many."""
    rows: list[TensorRow] = []
    jobs: list[tuple[TensorRow, str, str, bytes]] = []  # (row, layout, codec, data)
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        row = TensorRow(name=name, dtype=str(arr.dtype), shape=list(arr.shape), raw=arr.nbytes,
                        entropy=entropy_bytes(arr))
        for label, steps in candidate_layouts(arr).items():
            data = apply_layout(arr, steps).tobytes()
            row.sizes[label] = {}
            row.layouts[label] = steps
            jobs.extend((row, label, c, data) for c in codecs)
        rows.append(row)
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        sizes = list(pool.map(lambda j: len(compress(j[3], j[2], dictionary)), jobs))
    for (row, label, codec, _), n in zip(jobs, sizes, strict=True):
        row.sizes[label][codec] = n
    return rows


def best_layouts(rows: list[TensorRow], codecs: tuple[str, ...] = ZSTD_CODECS
                 ) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """Per tensor: (layout steps, codec) of its smallest zstd combination."""
    out = {}
    for row in rows:
        label, codec, _ = row.best(codecs)
        out[row.name] = (row.layouts[label], codec)
    return out


def summary(rows: list[TensorRow]) -> dict[str, Any]:
    """Totals: raw, entropy floor, each codec on the stored layout (the naive file), each codec
    with every tensor in its best layout for that codec, and the pack's choice."""
    out: dict[str, Any] = {"tensors": len(rows), "raw_bytes": sum(r.raw for r in rows),
                           "entropy_bytes": round(sum(r.entropy for r in rows))}
    codecs = sorted({c for r in rows for lay in r.sizes.values() for c in lay})
    out["stored"] = {c: sum(r.sizes["stored"][c] for r in rows) for c in codecs}
    out["best_layout"] = {c: sum(min(lay[c] for lay in r.sizes.values()) for r in rows)
                          for c in codecs}
    out["pack_choice"] = sum(r.best()[2] for r in rows)
    layouts: dict[str, int] = {}
    for r in rows:
        label = r.best()[0]
        layouts[label] = layouts.get(label, 0) + 1
    out["layouts_chosen"] = layouts
    return out
