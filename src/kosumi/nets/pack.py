"""The kosumi pack: a net in one small file that a bare install (numpy + zstandard) can play.

Layout::

    b"KOSUMIPK"                  magic (8 bytes)
    uint16 little-endian         format version (1)
    uint16                       flags (0)
    uint32 little-endian         length of the zstd-compressed JSON header
    header (zstd frame)          {"config": {...NetConfig, quantization scheme included...},
                                  "tensors": [{"name", "dtype", "shape", "layout": [steps],
                                               "offset", "nbytes"}, ...],
                                  "blobs": [{"dtype", "offset", "nbytes"}, ...]}
    payload (one zstd frame)     every tensor's stored bytes in its layout (``nets.layouts``),
                                 then the layouts' parameters (a permutation's order, a value
                                 table) as binary blobs, which the steps name by index
    SHA-256 (32 bytes)           over everything before it

Reading checks the magic, the version (a newer one is refused, naming both), the checksum (any
flipped byte or truncation is one line), every tensor's size, then undoes each layout: the
tensors read back bit for bit. ``read_pack_model(path)`` gives (config, tensors) like every
model format, so ``load_evaluator("NET.kpk")`` runs a pack on any backend (the numpy integer
backend on a bare install). Writing -- choosing each tensor's layout -- is ``kosumi.export.pack``.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.layouts import undo_layout

MAGIC = b"KOSUMIPK"
PACK_VERSION = 1
_FIXED = struct.Struct("<HHI")
DTYPES = ("float32", "float16", "int8", "uint8", "int32", "uint16", "uint32", "int16")
MAX_HEADER = 64 << 20


def sniff_pack(path: Path, head: bytes) -> bool:
    return head.startswith(MAGIC) or str(path).lower().endswith(".kpk")


def pack_bytes(config: NetConfig, entries: list[dict[str, Any]], stored: list[bytes],
               blobs: list[np.ndarray], level: int = 19) -> bytes:
    """The file's bytes: each tensor's header entry (name, dtype, shape, layout steps whose
    parameters name ``blobs`` by index) and stored bytes, compressed as one zstd frame."""
    import zstandard

    payload = bytearray()
    tensors = []
    for entry, data in zip(entries, stored):
        tensors.append({**entry, "offset": len(payload), "nbytes": len(data)})
        payload += data
    blob_entries = []
    for blob in blobs:
        raw = np.ascontiguousarray(blob).tobytes()
        blob_entries.append({"dtype": str(blob.dtype), "offset": len(payload),
                             "nbytes": len(raw)})
        payload += raw
    header = {"config": config.to_dict(), "tensors": tensors, "blobs": blob_entries}
    zc = zstandard.ZstdCompressor(level=level)
    head = zc.compress(json.dumps(header, separators=(",", ":")).encode())
    body = MAGIC + _FIXED.pack(PACK_VERSION, 0, len(head)) + head + zc.compress(bytes(payload))
    return body + hashlib.sha256(body).digest()


def params_to_blobs(steps: list[dict[str, Any]], dtype: np.dtype, blobs: list[np.ndarray]
                    ) -> list[dict[str, Any]]:
    """Layout steps with their array parameters moved into ``blobs`` (appended; the step keeps
    the index): a permutation's order as uint16/uint32, a table's values in the tensor's dtype."""
    out = []
    for step in steps:
        step = dict(step)
        if "order" in step:
            order = np.asarray(step.pop("order"))
            blobs.append(order.astype(np.uint16 if order.max(initial=0) < 65536 else np.uint32))
            step["order_blob"] = len(blobs) - 1
        if "values" in step:
            blobs.append(np.asarray(step.pop("values"), dtype=dtype))
            step["values_blob"] = len(blobs) - 1
        out.append(step)
    return out


def _blobs_to_params(steps: list[dict[str, Any]], blobs: list[np.ndarray]
                     ) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        step = dict(step)
        if "order_blob" in step:
            step["order"] = blobs[int(step.pop("order_blob"))].astype(np.int64).tolist()
        if "values_blob" in step:
            step["values"] = blobs[int(step.pop("values_blob"))]
        out.append(step)
    return out


def read_pack(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, tensors) of a pack; KosumiError naming the file and the problem."""
    import zstandard

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    fixed = len(MAGIC) + _FIXED.size
    if not data.startswith(MAGIC):
        raise KosumiError(f"{path}: not a kosumi pack (no KOSUMIPK magic)")
    if len(data) < fixed + 32:
        raise KosumiError(f"{path}: truncated kosumi pack ({len(data)} bytes)")
    version, _flags, head_len = _FIXED.unpack(data[len(MAGIC):fixed])
    if version > PACK_VERSION:
        raise KosumiError(f"{path}: kosumi pack format version {version} is newer than this "
                          f"kosumi reads ({PACK_VERSION}); upgrade kosumi")
    if version < 1:
        raise KosumiError(f"{path}: kosumi pack format version {version} is not valid")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise KosumiError(f"{path}: damaged kosumi pack (its SHA-256 does not match: a flipped "
                          "byte or a truncated file)")
    if head_len > MAX_HEADER or fixed + head_len > len(body):
        raise KosumiError(f"{path}: corrupt kosumi pack (header length)")
    dec = zstandard.ZstdDecompressor()
    try:
        header = json.loads(dec.decompress(body[fixed:fixed + head_len]))
        payload = dec.decompress(body[fixed + head_len:])
    except (zstandard.ZstdError, ValueError) as e:
        raise KosumiError(f"{path}: corrupt kosumi pack ({e})") from None
    try:
        blobs = [np.frombuffer(payload[b["offset"]:b["offset"] + b["nbytes"]],
                               dtype=np.dtype(b["dtype"])) for b in header.get("blobs", [])]
    except (KeyError, TypeError, ValueError) as e:
        raise KosumiError(f"{path}: corrupt kosumi pack (layout parameters: {e})") from None
    tensors: dict[str, np.ndarray] = {}
    for entry in header.get("tensors", []):
        name = entry.get("name")
        try:
            dtype = np.dtype(entry["dtype"])
            if str(dtype) not in DTYPES:
                raise ValueError(f"dtype {dtype}")
            shape = [int(x) for x in entry["shape"]]
            raw = payload[entry["offset"]:entry["offset"] + entry["nbytes"]]
            if len(raw) != entry["nbytes"]:
                raise ValueError("the tensor runs past the end of the payload")
            steps = _blobs_to_params(entry.get("layout", []), blobs)
            stored = np.frombuffer(raw, dtype=_stored_dtype(dtype, steps))
            tensors[name] = np.array(undo_layout(stored, steps, dtype, shape))  # writable
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise KosumiError(f"{path}: corrupt kosumi pack (tensor {name!r}: {e})") from None
    return header, tensors


def _stored_dtype(dtype: np.dtype, steps: list[dict[str, Any]]) -> np.dtype:
    dt = np.dtype(dtype)
    for step in steps:
        if step["kind"] in ("table", "byteplanes"):
            dt = np.dtype(np.uint8)
        elif step["kind"] == "delta":
            dt = np.dtype(f"u{dt.itemsize}")
    return dt


def read_pack_model(path: str | os.PathLike) -> Checkpoint:
    """A pack as (config, tensors)."""
    header, tensors = read_pack(path)
    config = NetConfig.from_dict(header.get("config"), source=f"{path}: pack header config")
    return Checkpoint(config=config, tensors=tensors, metadata={"format": "kosumi-pack"})


def describe_pack(path: str | os.PathLike) -> dict[str, Any]:
    """What ``kosumi inspect`` shows for a pack."""
    from kosumi.nets.inspect import describe_checkpoint_parts

    header, tensors = read_pack(path)
    config = NetConfig.from_dict(header.get("config"), source=f"{path}: pack header config")
    info = describe_checkpoint_parts(config, tensors, f"kosumi pack (version {PACK_VERSION})")
    chosen: dict[str, int] = {}
    for e in header["tensors"]:
        label = "+".join(s["kind"] for s in e.get("layout", [])) or "stored"
        chosen[label] = chosen.get(label, 0) + 1
    info["pack_layouts"] = chosen
    info["stored_bytes"] = sum(int(e["nbytes"]) for e in header["tensors"])
    info["tensor_bytes"] = sum(int(t.nbytes) for t in tensors.values())
    return info
