"""Model file formats: the one registry every command reads, describes and writes models through.

Each ``ModelFormat`` has

    sniff(path, first bytes) -> bool    cheap: does this file claim to be of the format?
    read(path) -> Checkpoint            the net in memory: its ``NetConfig`` and its tensors
                                        (a ``native`` format -- a runtime artefact such as an
                                        ``.onnx`` file -- gives its config and no tensors: a
                                        backend runs the file itself)
    describe(path) -> dict              what ``kosumi inspect`` shows (see ``nets.inspect``)

The functions are the format modules' own (numpy only: importing this registry imports neither
torch nor onnx, which those modules import when a file needs them). Formats are tried in order
(``first=True`` to be tried before the others): a file no format claims gives one line,
``FILE: unsupported model format (known: ...)``. Built in: kosumi checkpoints, KataGo models,
Leela Zero weights, kosumi packs, ONNX files with kosumi metadata and kosumi TensorRT plans.
``runtime.load_evaluator`` opens any of them, ``kosumi inspect`` describes them; which of them
``kosumi export`` writes is the export layer's (``kosumi.export.WRITERS``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint, read_checkpoint, sniff_checkpoint
from kosumi.nets.describe import describe_checkpoint
from kosumi.nets.katago import describe_katago, is_katago_file, read_katago_model
from kosumi.nets.leelaz import describe_leelaz, read_leelaz_model, sniff_leelaz
from kosumi.nets.onnx import describe_onnx, read_onnx_model, sniff_onnx
from kosumi.nets.pack import describe_pack, read_pack_model, sniff_pack
from kosumi.nets.trt_plan import describe_plan, read_plan_model, sniff_plan

SNIFF_BYTES = 4096


@dataclass(frozen=True)
class ModelFormat:
    """A model file format (see the module docstring)."""

    name: str
    description: str
    sniff: Callable[[Path, bytes], bool]
    read: Callable[[Path], Checkpoint]
    describe: Callable[[Path], dict[str, Any]]
    native: bool = False  # a runtime artefact: backends run the file, it has no tensors to read
    suffix: str = ""  # the usual file name ending, for messages and defaults


MODEL_FORMATS: list[ModelFormat] = []


def register_model_format(fmt: ModelFormat, first: bool = False) -> None:
    """Add a format (replacing one of the same name); ``first`` makes it be tried first."""
    MODEL_FORMATS[:] = [f for f in MODEL_FORMATS if f.name != fmt.name]
    if first:
        MODEL_FORMATS.insert(0, fmt)
    else:
        MODEL_FORMATS.append(fmt)


def get_format(name: str) -> ModelFormat:
    for fmt in MODEL_FORMATS:
        if fmt.name == name:
            return fmt
    raise KosumiError(f"unknown model format {name!r} (known: "
                      f"{', '.join(f.name for f in MODEL_FORMATS)})")


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(SNIFF_BYTES)
    except IsADirectoryError:
        raise KosumiError(f"{path}: is a folder, not a model file") from None
    except OSError as e:
        raise KosumiError(f"{path}: cannot read model file ({e.strerror or e})") from None


def detect_format(path: str | os.PathLike[str]) -> ModelFormat:
    """The registered format that claims the file (``default``, ``tiny``: the embedded nets);
    KosumiError if none does or the file cannot be read."""
    from kosumi.models import resolve_model

    return detect_file_format(resolve_model(path))


def detect_file_format(path: Path) -> ModelFormat:
    """``detect_format`` of a file path (``default`` and ``tiny`` already resolved)."""
    head = _head(path)
    for fmt in MODEL_FORMATS:
        if fmt.sniff(path, head):
            return fmt
    known = "; ".join(f.description for f in MODEL_FORMATS)
    raise KosumiError(f"{path}: unsupported model format (known: {known})")


def read_model(path: str | os.PathLike[str]) -> tuple[ModelFormat, Checkpoint]:
    """Detect the format and read the file: (format, the net in memory)."""
    from kosumi.models import resolve_model

    return read_model_file(resolve_model(path))


def read_model_file(path: Path) -> tuple[ModelFormat, Checkpoint]:
    """``read_model`` of a file path (``default`` and ``tiny`` already resolved)."""
    fmt = detect_file_format(path)
    return fmt, fmt.read(path)


def read_net(path: str | os.PathLike[str], what: str = "read") -> Checkpoint:
    """A model file's config and tensors (any format with tensors); a runtime artefact (ONNX,
    TensorRT) -> KosumiError saying that it cannot be ``what``-ed."""
    fmt, ckpt = read_model(path)
    if fmt.native:
        raise KosumiError(f"{path}: a {fmt.description} is a runtime file without the net's "
                          f"own tensors; {what} the model it was exported from instead")
    return ckpt


# ---------------------------------------------------------------------------- sniffers
# ---------------------------------------------------------------------------- the built-in formats
def _sniff_kosumi(path: Path, head: bytes) -> bool:
    return sniff_checkpoint(path)


def _sniff_katago(path: Path, head: bytes) -> bool:
    return is_katago_file(path)  # reads (and un-gzips) the header itself


def _sniff_leelaz(path: Path, head: bytes) -> bool:
    return sniff_leelaz(head)


register_model_format(ModelFormat(
    "kosumi", "kosumi checkpoint (safetensors with a kosumi_config)", _sniff_kosumi,
    read_checkpoint, describe_checkpoint, suffix=".safetensors"))
register_model_format(ModelFormat(
    "katago", "KataGo model (.bin.gz / .txt.gz, model versions 8-17)", _sniff_katago,
    read_katago_model, describe_katago, suffix=".bin.gz"))
register_model_format(ModelFormat(
    "leelaz", "Leela Zero text weights (version 1 or 2, plain or gzip)", _sniff_leelaz,
    read_leelaz_model, describe_leelaz, suffix=".txt.gz"))
register_model_format(ModelFormat(
    "pack", "kosumi pack (.kpk)", sniff_pack, read_pack_model, describe_pack, suffix=".kpk"))
register_model_format(ModelFormat(
    "onnx", "ONNX model with kosumi metadata (.onnx)", sniff_onnx, read_onnx_model,
    describe_onnx, native=True, suffix=".onnx"))
register_model_format(ModelFormat(
    "tensorrt", "kosumi TensorRT engine (.plan)", sniff_plan, read_plan_model, describe_plan,
    native=True, suffix=".plan"))
