"""The kosumi pack: a net in one small file that a bare install (numpy + zstandard) can play.

Layout::

    b"KOSUMIPK"                  magic (8 bytes)
    uint16 little-endian         format version (2)
    uint16                       flags (0)
    uint32 little-endian         length of the zstd-compressed JSON header
    header (zstd frame)          {"config": {...NetConfig, quantization scheme included...},
                                  "tensors": [{"name", "dtype", "shape", "layout": [steps]
                                               (omitted when empty), "frame" (omitted: 0)},
                                              ...],
                                  "blobs": [{"dtype", "count"}, ...] (all in frame 0),
                                  "frames": [compressed bytes of each frame, ...]}
    payload (zstd frames)        the frames back to back; a frame holds the stored bytes
                                 (``nets.layouts``) of the tensors that name it, then of the
                                 blobs (the layouts' parameters: a permutation's order, a value
                                 table; the steps name them by index), each in header order
    SHA-256 (32 bytes)           over everything before it

The writer keeps the smallest of three plans: one frame for everything; a frame of its own for
every tensor of 1 KiB or more; or one frame per dtype for those tensors (the small tensors and
the blobs share frame 0 in both). Own frames give each tensor its own entropy-coder tables,
which wins when the weights' values are distributed unlike the rest (a 5-bit grid: the tiny
net's pack is 9% smaller than in one frame); a frame per dtype keeps that gain without paying
for a Huffman table per small tensor; one frame wins when neither pays. A tensor's stored size
follows from its shape and dtype (one byte per value once a ``table`` step has run), so the
header holds no offsets.
Version 1 (one frame, every tensor and blob with an explicit "offset" and "nbytes") still reads.

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
PACK_VERSION = 2
_FIXED = struct.Struct("<HHI")
DTYPES = ("float32", "float16", "int8", "uint8", "int32", "uint16", "uint32", "int16")
MAX_HEADER = 64 << 20
OWN_FRAME = 1024  # stored bytes from which a tensor has a zstd frame of its own


def sniff_pack(path: Path, head: bytes) -> bool:
    return head.startswith(MAGIC) or str(path).lower().endswith(".kpk")


def pack_bytes(config: NetConfig, entries: list[dict[str, Any]], stored: list[bytes],
               blobs: list[np.ndarray], level: int = 19) -> bytes:
    """The file's bytes: the smallest of the three frame plans (see the module docstring)."""
    plans = [_pack_bytes(config, entries, stored, blobs, level, plan)
             for plan in ("one", "own", "dtype")]
    return min(plans, key=len)


def _pack_bytes(config: NetConfig, entries: list[dict[str, Any]], stored: list[bytes],
                blobs: list[np.ndarray], level: int, plan: str) -> bytes:
    """The file's bytes: each tensor's header entry (name, dtype, shape, layout steps whose
    parameters name ``blobs`` by index) and stored bytes, a zstd frame each."""
    import zstandard

    zc = zstandard.ZstdCompressor(level=level)
    frames: list[bytearray] = [bytearray()]  # frame 0: the small tensors and the blobs
    by_dtype: dict[str, int] = {}
    tensors = []
    for entry, data in zip(entries, stored, strict=True):
        entry = {k: v for k, v in entry.items() if k != "layout" or v}
        if len(data) != _stored_nbytes(entry):
            raise ValueError(f"{entry['name']}: {len(data)} stored bytes, the layout says "
                             f"{_stored_nbytes(entry)}")
        k = 0
        if plan != "one" and len(data) >= OWN_FRAME:
            if plan == "own":
                frames.append(bytearray())
                k = len(frames) - 1
            else:  # "dtype": the large tensors of one dtype share a frame
                if entry["dtype"] not in by_dtype:
                    frames.append(bytearray())
                    by_dtype[entry["dtype"]] = len(frames) - 1
                k = by_dtype[entry["dtype"]]
        frames[k] += data
        tensors.append({**entry, "frame": k} if k else entry)
    blob_entries = []
    for blob in blobs:
        blob = np.ascontiguousarray(blob).reshape(-1)
        blob_entries.append({"dtype": str(blob.dtype), "count": int(blob.size)})
        frames[0] += blob.tobytes()
    packed = [zc.compress(bytes(f)) for f in frames]
    header = {"config": config.to_dict(), "tensors": tensors, "blobs": blob_entries,
              "frames": [len(f) for f in packed]}
    head = zc.compress(json.dumps(header, separators=(",", ":")).encode())
    body = MAGIC + _FIXED.pack(PACK_VERSION, 0, len(head)) + head + b"".join(packed)
    return body + hashlib.sha256(body).digest()


def _stored_nbytes(entry: dict[str, Any]) -> int:
    """A tensor's bytes in its layout: its values, one byte each after a ``table`` step."""
    n = int(np.prod([int(x) for x in entry["shape"]], dtype=np.int64))
    if any(step["kind"] == "table" for step in entry.get("layout", [])):
        return n
    return n * np.dtype(entry["dtype"]).itemsize


def _inflate_frames(header: dict[str, Any], payload: bytes, dec: Any) -> bytes:
    """Version 2: the frames decompressed back to back, each tensor's and blob's place in the
    result recorded as in version 1 ("offset", "nbytes"); ValueError on a frame that does not
    hold what its entries say."""
    import zstandard

    sizes = [int(z) for z in header["frames"]]
    items = [(e, _stored_nbytes(e)) for e in header.get("tensors", [])]
    items += [(b, int(b["count"]) * np.dtype(b["dtype"]).itemsize)
              for b in header.get("blobs", [])]
    content = [0] * len(sizes)
    for entry, nbytes in items:  # each item's place inside its frame
        k = int(entry.get("frame", 0))
        if not 0 <= k < len(sizes):
            raise ValueError(f"frame {k} of {len(sizes)}")
        entry["offset"], entry["nbytes"] = content[k], nbytes
        content[k] += nbytes
    if sum(sizes) != len(payload) or min(sizes, default=1) <= 0:
        raise ValueError("the frames do not fill the payload")
    out, starts, at = bytearray(), [], 0
    for k, z in enumerate(sizes):
        frame = payload[at:at + z]
        if zstandard.frame_content_size(frame) != content[k]:
            raise ValueError(f"frame {k} does not hold the {content[k]} bytes of its entries")
        starts.append(len(out))
        out += dec.decompress(frame)
        at += z
    for entry, _ in items:
        entry["offset"] += starts[int(entry.get("frame", 0))]
    return bytes(out)


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


def read_pack(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
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
        if not isinstance(header, dict):
            raise TypeError("the header is not a JSON object")
        header["pack_version"] = version
        rest = body[fixed + head_len:]
        payload = _inflate_frames(header, rest, dec) if version >= 2 else dec.decompress(rest)
    except (zstandard.ZstdError, ValueError, KeyError, TypeError) as e:
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


def read_pack_model(path: str | os.PathLike[str]) -> Checkpoint:
    """A pack as (config, tensors)."""
    header, tensors = read_pack(path)
    config = NetConfig.from_dict(header.get("config"), source=f"{path}: pack header config")
    return Checkpoint(config=config, tensors=tensors, metadata={"format": "kosumi-pack"})


def describe_pack(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What ``kosumi inspect`` shows for a pack."""
    from kosumi.nets.describe import describe_checkpoint_parts

    header, tensors = read_pack(path)
    config = NetConfig.from_dict(header.get("config"), source=f"{path}: pack header config")
    info = describe_checkpoint_parts(config, tensors,
                                     f"kosumi pack (version {header['pack_version']})")
    chosen: dict[str, int] = {}
    for e in header["tensors"]:
        label = "+".join(s["kind"] for s in e.get("layout", [])) or "stored"
        chosen[label] = chosen.get(label, 0) + 1
    info["pack_layouts"] = chosen
    info["stored_bytes"] = sum(int(e["nbytes"]) for e in header["tensors"])
    info["tensor_bytes"] = sum(int(t.nbytes) for t in tensors.values())
    return info
