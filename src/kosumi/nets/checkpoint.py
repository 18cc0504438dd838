"""kosumi checkpoints: safetensors files with the ``NetConfig`` JSON in the metadata.

Layout: a standard safetensors file (8-byte little-endian header length, JSON header, raw
little-endian tensor data) whose header metadata holds ``kosumi_config`` (the config JSON) and
``format`` = ``kosumi-checkpoint``. Tensors are the net's state dict without BatchNorm's
``num_batches_tracked``, plus any extra tensors the config declares (``extra_tensors``: e.g. the
quantization scales of a quantized net). Tensors are typed: float32 (the default; float64 and
bfloat16 are read as float32), float16, int8, uint8 and int32 keep their type both ways, so a
quantized net stores int8 weights and int32 biases as they are. Nothing is ever pickled.

Writing is atomic (temp file in the same folder, fsync, rename). Reading parses and validates the
file itself (no torch needed): any problem -- not a safetensors file, truncated, bad header,
unknown dtype, NaN/inf, missing/extra tensors or wrong shapes (``load_net``) -- raises a
``KosumiError`` whose one-line message names the file and, where it applies, the tensor.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write  # re-exported: the one atomic write lives in fileio
from kosumi.nets.config import NetConfig

if TYPE_CHECKING:
    from kosumi.nets.resnet import KosumiNet

CONFIG_KEY = "kosumi_config"
FORMAT_KEY = "format"
FORMAT_NAME = "kosumi-checkpoint"
MAX_HEADER_BYTES = 100 * 1024 * 1024

_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),  # read as float32
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # converted to float32 by shifting into the high half
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "I32": np.dtype("<i4"),
}
#: numpy dtypes a checkpoint stores as they are (anything else floating becomes float32)
STORED_DTYPES = (np.dtype("float32"), np.dtype("float16"), np.dtype("int8"), np.dtype("uint8"),
                 np.dtype("int32"))


def stored_array(name: str, t: Any) -> np.ndarray:
    """``t`` (numpy or torch) as the array a checkpoint stores: its own type if it is one of
    ``STORED_DTYPES``, float32 for other floats; KosumiError for NaN/inf or another type."""
    if hasattr(t, "detach"):
        t = t.detach().cpu().numpy()
    arr = np.asarray(t)
    if arr.dtype not in STORED_DTYPES:
        if arr.dtype.kind != "f":
            raise KosumiError(f"refusing to save tensor {name!r}: dtype {arr.dtype} is not "
                              "one a checkpoint stores (float32, float16, int8, uint8, int32)")
        arr = arr.astype(np.float32)
    arr = np.ascontiguousarray(arr)
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise KosumiError(f"refusing to save tensor {name!r}: it holds NaN or inf")
    return arr


@dataclass
class Checkpoint:
    """A net in memory, whatever file it came from: its config, its tensors (named as the
    config's architecture names them, typed) and the file's raw metadata."""

    config: NetConfig
    tensors: dict[str, np.ndarray]
    metadata: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- writing
def checkpoint_bytes(tensors: dict[str, Any], config: NetConfig,
                     metadata: dict[str, str] | None = None) -> bytes:
    """Serialise ``tensors`` (numpy arrays or torch tensors) + ``config`` as safetensors bytes."""
    from safetensors.numpy import save

    arrays = {name: stored_array(name, t) for name, t in tensors.items()}
    meta = {**(metadata or {}), FORMAT_KEY: FORMAT_NAME, CONFIG_KEY: config.to_json()}
    return _metadata_in_key_order(save(arrays, metadata=meta))


def _metadata_in_key_order(data: bytes) -> bytes:
    """``data`` with its header's metadata in key order. safetensors writes the metadata map in
    the order of a Rust HashMap, which is seeded anew in every process, so the same net saved
    twice gave two files; rewritten in key order, in the same number of bytes (the header is
    padded with spaces, as safetensors pads it), it gives one. The tensors' entries and data are
    left as they are."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    meta = header.get("__metadata__")
    if not meta:
        return data
    header["__metadata__"] = dict(sorted(meta.items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    if len(text) > n:  # another JSON spelling than safetensors' own: keep its bytes
        return data
    return data[:8] + text.ljust(n) + data[8 + n:]


def save_checkpoint(path: str | os.PathLike[str], net_or_tensors: Any,
                    config: NetConfig | None = None,
                    metadata: dict[str, str] | None = None) -> int:
    """Write a checkpoint atomically; return its size in bytes.

    ``net_or_tensors`` is a ``KosumiNet`` (its config is used unless ``config`` is given) or a
    dict of tensors (then ``config`` is required).
    """
    if isinstance(net_or_tensors, dict):
        tensors = net_or_tensors
        if config is None:
            raise ValueError("save_checkpoint: a config is needed with a dict of tensors")
    else:
        from kosumi.nets.resnet import inference_tensors

        tensors = inference_tensors(net_or_tensors)
        config = config or net_or_tensors.config
    data = checkpoint_bytes(tensors, config, metadata)
    atomic_write(path, data)
    return len(data)


# ---------------------------------------------------------------------------- reading
def _read_header(path: Path, data: bytes) -> tuple[dict[str, Any], int]:
    """Parse and check the safetensors header; return it and the offset where data starts."""
    if len(data) < 8:
        raise KosumiError(f"{path}: truncated or not a safetensors file (only {len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if n < 2 or n > MAX_HEADER_BYTES or data[8:9] != b"{":
        raise KosumiError(f"{path}: not a safetensors file (no JSON header)")
    if 8 + n > len(data):
        raise KosumiError(f"{path}: truncated file (header of {n} bytes, file of {len(data)})")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise KosumiError(f"{path}: corrupted safetensors header (not valid JSON)") from None
    if not isinstance(header, dict):
        raise KosumiError(f"{path}: corrupted safetensors header (not a JSON object)")
    return header, 8 + n


def sniff_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Does the file start like a safetensors file (a kosumi checkpoint or a broken one)?"""
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError:
        return False
    if len(head) < 9 or head[8:9] != b"{":
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= MAX_HEADER_BYTES


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Read and validate a kosumi checkpoint (torch-free). Raises KosumiError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    header, start = _read_header(path, data)
    body = memoryview(data)[start:]
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise KosumiError(f"{path}: corrupted safetensors header (bad __metadata__)")
    if CONFIG_KEY not in meta:
        raise KosumiError(f"{path}: a safetensors file without a kosumi config "
                          f"(metadata key {CONFIG_KEY!r}); not a kosumi checkpoint")
    config = NetConfig.from_json(meta[CONFIG_KEY], source=str(path))
    tensors: dict[str, np.ndarray] = {}
    end_max = 0
    for name, info in header.items():
        what = f"{path}: tensor {name!r}"
        if not isinstance(info, dict):
            raise KosumiError(f"{what}: corrupted header entry")
        dtype = _DTYPES.get(info.get("dtype"))  # type: ignore[arg-type]
        if dtype is None:
            raise KosumiError(f"{what}: unsupported dtype {info.get('dtype')!r}")
        shape, offs = info.get("shape"), info.get("data_offsets")
        if (not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape)
                or not isinstance(offs, list) or len(offs) != 2
                or not all(type(o) is int for o in offs)):
            raise KosumiError(f"{what}: corrupted header entry (shape/data_offsets)")
        begin, end = offs
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end or end - begin != count * dtype.itemsize:
            raise KosumiError(f"{what}: data_offsets {offs} do not match shape {shape}")
        if end > len(body):
            raise KosumiError(f"{what}: truncated file (data ends at {end}, only {len(body)} "
                              "bytes of data)")
        end_max = max(end_max, end)
        arr = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        arr = arr.astype(np.float32 if info["dtype"] in ("F64", "BF16")
                         else dtype.newbyteorder("="))
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise KosumiError(f"{what}: holds NaN or inf values")
        tensors[name] = arr
    if end_max != len(body):
        raise KosumiError(f"{path}: corrupted file ({len(body) - end_max} unexpected bytes after "
                          "the tensor data)")
    return Checkpoint(config=config, tensors=tensors, metadata=dict(meta))


def check_tensors(path: str | os.PathLike[str], tensors: dict[str, np.ndarray],
                  expected: dict[str, tuple[int, ...]], extra: list[str] | None = None) -> None:
    """Missing, extra or wrongly shaped tensors -> KosumiError naming the file and the tensor.
    ``extra`` names tensors the config declares beyond the architecture's (any shape)."""
    for name in extra or ():
        if name not in tensors:
            raise KosumiError(f"{path}: tensor {name!r} is missing (the config declares it)")
    for name, shape in expected.items():
        if name not in tensors:
            raise KosumiError(f"{path}: tensor {name!r} is missing")
        if tuple(tensors[name].shape) != tuple(shape):
            raise KosumiError(f"{path}: tensor {name!r} has shape {list(tensors[name].shape)}, "
                              f"expected {list(shape)}")
    unexpected = sorted(set(tensors) - set(expected) - set(extra or ()))
    if unexpected:
        raise KosumiError(f"{path}: unexpected tensor {unexpected[0]!r} (not in a net of this "
                          "config)")


def build_net(checkpoint: Checkpoint, path: str | os.PathLike[str] = "checkpoint") -> Any:
    """The torch module of a net in memory, in eval mode, float32 (needs torch): a ``KosumiNet``
    (conv and lz heads) or a ``KataGoNet`` (katago head). Missing, extra or wrongly shaped
    tensors -> KosumiError naming ``path`` and the tensor; integer (quantized) weights ->
    KosumiError (they run on the backends that execute the quantization scheme)."""
    import torch

    config = checkpoint.config
    if config.family == "katago":
        from kosumi.nets.katago_net import KataGoNet

        net: torch.nn.Module = KataGoNet(config)
    else:
        from kosumi.nets.resnet import KosumiNet

        net = KosumiNet(config)
    expected = {k: tuple(v.shape) for k, v in architecture_tensors(net).items()}
    check_tensors(path, checkpoint.tensors, expected, config.extra_tensors)
    state = {}
    for k in expected:
        v = checkpoint.tensors[k]
        if v.dtype.kind != "f":
            raise KosumiError(f"{path}: tensor {k!r} is {v.dtype} (a quantized net); torch runs "
                              "float nets only")
        state[k] = torch.from_numpy(np.array(v, dtype=np.float32))
    net.load_state_dict(state, strict=False)  # only num_batches_tracked is left out
    return net.eval()


def architecture_tensors(net: Any) -> dict[str, Any]:
    """The tensors a torch module's checkpoint holds: the state dict without BatchNorm's
    ``num_batches_tracked``."""
    return {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}


def load_net(path: str | os.PathLike[str]) -> KosumiNet:
    """Read a checkpoint file into a ``KosumiNet`` in eval mode (needs torch)."""
    return build_net(read_checkpoint(path), path)


def write_checkpoint_model(checkpoint: Checkpoint, out: str | os.PathLike[str],
                           source: str = "net", **_: Any) -> str:
    """``kosumi export --format kosumi``: any net kosumi reads (a KataGo or Leela Zero file
    included) as a kosumi checkpoint; a summary line."""
    from kosumi.fileio import output_errors

    with output_errors(out):
        nbytes = save_checkpoint(out, checkpoint.tensors, checkpoint.config,
                                 {k: v for k, v in checkpoint.metadata.items()
                                  if k not in (FORMAT_KEY, CONFIG_KEY)})
    return f"wrote {out}: kosumi checkpoint, {checkpoint.config.describe()}, {nbytes:,} bytes"
