"""Model file formats: the one registry every command reads, describes and writes models through.

Each ``ModelFormat`` has

    sniff(path, first bytes) -> bool    cheap: does this file claim to be of the format?
    read(path) -> Checkpoint            the net in memory: its ``NetConfig`` and its tensors
                                        (a ``native`` format -- a runtime artefact such as an
                                        ``.onnx`` file -- gives its config and no tensors: a
                                        backend runs the file itself)
    describe(path) -> dict              what ``kosumi inspect`` shows (see ``nets.inspect``)
    write(checkpoint, out, **options) -> str   an export target (None if the format is read
                                        only), returning a one-line summary

Functions are given as lazily imported ``"module:function"`` strings, so that importing this
registry imports neither torch nor onnx. Formats are tried in order (``first=True`` to be tried
before the others): a file no format claims gives one line, ``FILE: unsupported model format
(known: ...)``. Built in: kosumi checkpoints, KataGo models, Leela Zero weights, ONNX files with
kosumi metadata and kosumi TensorRT plans. ``runtime.load_evaluator`` opens any of them,
``kosumi inspect`` describes them and ``kosumi export`` writes the writable ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kosumi.errors import KosumiError
from kosumi.lazy import resolve
from kosumi.nets.checkpoint import Checkpoint

SNIFF_BYTES = 4096

Fn = str | Callable[..., Any]


@dataclass(frozen=True)
class ModelFormat:
    """A model file format (see the module docstring)."""

    name: str
    description: str
    sniff: Callable[[Path, bytes], bool]
    read: Fn
    describe: Fn
    write: Fn | None = None
    native: bool = False  # a runtime artefact: backends run the file, it has no tensors to read
    suffix: str = ""  # the usual file name ending, for messages and defaults

    def read_model(self, path: Path) -> Checkpoint:
        return resolve(self.read, f"model format {self.name!r}")(path)

    def describe_file(self, path: Path) -> dict[str, Any]:
        return resolve(self.describe, f"model format {self.name!r}")(path)

    def writer(self) -> Callable[..., str]:
        if self.write is None:
            raise KosumiError(f"kosumi cannot write {self.description} files")
        return resolve(self.write, f"export format {self.name!r}")


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


def writable_formats() -> list[ModelFormat]:
    return [f for f in MODEL_FORMATS if f.write is not None]


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

    path = resolve_model(path)
    head = _head(path)
    for fmt in MODEL_FORMATS:
        if fmt.sniff(path, head):
            return fmt
    known = "; ".join(f.description for f in MODEL_FORMATS)
    raise KosumiError(f"{path}: unsupported model format (known: {known})")


def read_model(path: str | os.PathLike[str]) -> tuple[ModelFormat, Checkpoint]:
    """Detect the format and read the file: (format, the net in memory)."""
    from kosumi.models import resolve_model

    path = resolve_model(path)
    fmt = detect_format(path)
    return fmt, fmt.read_model(path)


def read_net(path: str | os.PathLike[str], what: str = "read") -> Checkpoint:
    """A model file's config and tensors (any format with tensors); a runtime artefact (ONNX,
    TensorRT) -> KosumiError saying that it cannot be ``what``-ed."""
    fmt, ckpt = read_model(path)
    if fmt.native:
        raise KosumiError(f"{path}: a {fmt.description} is a runtime file without the net's "
                          f"own tensors; {what} the model it was exported from instead")
    return ckpt


# ---------------------------------------------------------------------------- sniffers
def _sniff_kosumi(path: Path, head: bytes) -> bool:
    from kosumi.nets.checkpoint import sniff_checkpoint

    return sniff_checkpoint(path)


def _sniff_katago(path: Path, head: bytes) -> bool:
    from kosumi.nets.katago import is_katago_file

    return is_katago_file(path)  # reads (and un-gzips) the header itself


def _sniff_leelaz(path: Path, head: bytes) -> bool:
    from kosumi.nets.leelaz import sniff_leelaz

    return sniff_leelaz(head)


def _sniff_pack(path: Path, head: bytes) -> bool:
    from kosumi.nets.pack import sniff_pack

    return sniff_pack(path, head)


def _sniff_onnx(path: Path, head: bytes) -> bool:
    from kosumi.nets.onnx import sniff_onnx

    return sniff_onnx(path, head)


def _sniff_plan(path: Path, head: bytes) -> bool:
    from kosumi.nets.trt_plan import sniff_plan

    return sniff_plan(path, head)


register_model_format(ModelFormat(
    "kosumi", "kosumi checkpoint (safetensors with a kosumi_config)", _sniff_kosumi,
    "kosumi.nets.checkpoint:read_checkpoint", "kosumi.nets.describe:describe_checkpoint",
    "kosumi.nets.checkpoint:write_checkpoint_model", suffix=".safetensors"))
register_model_format(ModelFormat(
    "katago", "KataGo model (.bin.gz / .txt.gz, model version 8)", _sniff_katago,
    "kosumi.nets.katago:read_katago_model", "kosumi.nets.katago:describe_katago",
    suffix=".bin.gz"))
register_model_format(ModelFormat(
    "leelaz", "Leela Zero text weights (version 1 or 2, plain or gzip)", _sniff_leelaz,
    "kosumi.nets.leelaz:read_leelaz_model", "kosumi.nets.leelaz:describe_leelaz",
    "kosumi.nets.leelaz:write_leelaz_model", suffix=".txt.gz"))
register_model_format(ModelFormat(
    "pack", "kosumi pack (.kpk)", _sniff_pack, "kosumi.nets.pack:read_pack_model",
    "kosumi.nets.pack:describe_pack", "kosumi.export.pack:write_pack_model", suffix=".kpk"))
register_model_format(ModelFormat(
    "onnx", "ONNX model with kosumi metadata (.onnx)", _sniff_onnx,
    "kosumi.nets.onnx:read_onnx_model", "kosumi.nets.onnx:describe_onnx",
    "kosumi.nets.onnx:write_onnx_model", native=True, suffix=".onnx"))
register_model_format(ModelFormat(
    "tensorrt", "kosumi TensorRT engine (.plan)", _sniff_plan,
    "kosumi.nets.trt_plan:read_plan_model", "kosumi.nets.trt_plan:describe_plan",
    "kosumi.export.tensorrt:write_plan_model", native=True, suffix=".plan"))
