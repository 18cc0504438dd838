"""kosumi TensorRT plans: a serialized TensorRT engine with the net's kosumi config beside it.

A TensorRT engine holds no metadata of ours, and it runs only on the GPU model and TensorRT
version that built it. A kosumi ``.plan`` file is therefore a small container::

    b"KOSUMI-TRT\\n"                 magic (11 bytes)
    uint32 little-endian             container version (1)
    uint64 little-endian             length of the JSON header
    JSON header                      {"config": {...}, "precision": "fp16", "tensorrt": "10.9.0",
                                      "gpu": "NVIDIA H200", "compute_capability": "9.0",
                                      "profiles": [{"size": 19, "batch": [1, 16, 64]}, ...],
                                      "engine_bytes": N, "engine_sha256": "..."}
    engine                           TensorRT's serialized engine (N bytes)

so that ``kosumi inspect`` can describe a plan without a GPU, and the backend refuses, in one
line, a plan built for another GPU or TensorRT version before TensorRT itself fails on it.
Reading needs nothing but the standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.config import NetConfig

MAGIC = b"KOSUMI-TRT\n"
CONTAINER_VERSION = 1
MAX_HEADER = 16 << 20


def plan_bytes(header: dict[str, Any], engine: bytes) -> bytes:
    """The container's bytes (``engine_bytes`` and ``engine_sha256`` are filled in)."""
    header = {**header, "engine_bytes": len(engine),
              "engine_sha256": hashlib.sha256(engine).hexdigest()}
    text = json.dumps(header, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<IQ", CONTAINER_VERSION, len(text)) + text + engine


def sniff_plan(path: Path, head: bytes) -> bool:
    return head.startswith(MAGIC) or str(path).lower().endswith(".plan")


def read_plan(path: str | os.PathLike[str], engine: bool = True) -> tuple[dict[str, Any], bytes]:
    """(header, engine bytes) of a kosumi plan; KosumiError naming the problem."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    if not data.startswith(MAGIC):
        raise KosumiError(f"{path}: not a kosumi TensorRT plan (build one with kosumi export "
                          "MODEL --format tensorrt); a bare TensorRT engine has no kosumi config")
    fixed = len(MAGIC) + 12
    if len(data) < fixed:
        raise KosumiError(f"{path}: truncated kosumi TensorRT plan")
    version, n = struct.unpack("<IQ", data[len(MAGIC):fixed])
    if version != CONTAINER_VERSION:
        raise KosumiError(f"{path}: kosumi TensorRT plan version {version} is not supported "
                          f"(this kosumi reads version {CONTAINER_VERSION})")
    if n > MAX_HEADER or fixed + n > len(data):
        raise KosumiError(f"{path}: truncated or corrupt kosumi TensorRT plan (header)")
    try:
        header = json.loads(data[fixed:fixed + n])
    except (ValueError, UnicodeDecodeError):
        raise KosumiError(f"{path}: corrupt kosumi TensorRT plan (header is not JSON)") from None
    if not isinstance(header, dict) or "config" not in header:
        raise KosumiError(f"{path}: corrupt kosumi TensorRT plan (no config in the header)")
    body = data[fixed + n:]
    if len(body) != header.get("engine_bytes"):
        raise KosumiError(f"{path}: truncated kosumi TensorRT plan (engine of {len(body)} bytes, "
                          f"the header says {header.get('engine_bytes')})")
    if engine and hashlib.sha256(body).hexdigest() != header.get("engine_sha256"):
        raise KosumiError(f"{path}: corrupt kosumi TensorRT plan (the engine's SHA-256 does not "
                          "match its header)")
    return header, body


def read_plan_model(path: str | os.PathLike[str]) -> Checkpoint:
    """A plan's config (no tensors: the engine runs as it is); the engine's checksum is
    verified, so a damaged file is refused before any backend is chosen."""
    header, _ = read_plan(path)
    config = NetConfig.from_dict(header["config"], source=f"{path}: plan header config")
    meta = {k: json.dumps(v) if not isinstance(v, str) else v
            for k, v in header.items() if k != "config"}
    return Checkpoint(config=config, tensors={}, metadata=meta)


def describe_plan(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What ``kosumi inspect`` shows for a plan (no GPU needed)."""
    header, _ = read_plan(path, engine=False)
    cfg = NetConfig.from_dict(header["config"], source=f"{path}: plan header config")
    return {
        "format": f"kosumi TensorRT plan ({header.get('precision', '?')})",
        "version": CONTAINER_VERSION,
        "arch": cfg.arch, "blocks": cfg.blocks, "channels": cfg.channels,
        "head": cfg.head,
        "tensorrt": header.get("tensorrt"),
        "gpu": header.get("gpu"),
        "compute_capability": header.get("compute_capability"),
        "profiles": header.get("profiles"),
        "engine_bytes": header.get("engine_bytes"),
        "board_sizes": list(cfg.board_sizes),
    }


def gpu_identity(device_index: int = 0) -> dict[str, str]:
    """{"gpu": name, "compute_capability": "9.0"} of a CUDA device (through torch)."""
    try:
        import torch
    except ImportError:
        raise KosumiError("TensorRT needs torch with CUDA for its device buffers (pip install "
                          "'kosumi[train,tensorrt]' with a CUDA build of torch)") from None
    if not torch.cuda.is_available():
        raise KosumiError("TensorRT needs a CUDA device, and torch sees none (--device cuda)")
    major, minor = torch.cuda.get_device_capability(device_index)
    return {"gpu": torch.cuda.get_device_name(device_index),
            "compute_capability": f"{major}.{minor}"}
