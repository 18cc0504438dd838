"""A model set: one name for several nets, one per board size, in a small JSON manifest.

A net distilled for both 9x9 and 19x19 trades one board for the other (every both-board
fine-tune of ``default`` did); one net per board does not. A model set keeps that behind one
name, the way Leela Zero ships separate 9x9 nets::

    {"format": "kosumi-model-set", "version": 1,
     "base": "default.safetensors",
     "nets": {"19": "default-19.safetensors"}}

``base`` plays every board size that ``nets`` does not name; paths are relative to the
manifest's folder. The engine plays each board size with its own net (``runtime.size_router``),
self-play and labels take the net of their board size (``models.resolve_model_for_sizes``);
wherever one net is wanted (quantize, export, inspect, ``distill --init``) a set stands for its
base net, and another member is named by its own file. Every refusal names
the manifest and the field.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from kosumi.errors import KosumiError
from kosumi.go.coords import MAX_SIZE, MIN_SIZE

SET_FORMAT = "kosumi-model-set"
SET_VERSION = 1
_KEYS = {"format", "version", "base", "nets", "about"}


@dataclass(frozen=True)
class ModelSet:
    """A parsed manifest: ``nets`` board size -> net file; ``base`` for every other size."""

    path: Path
    base: Path
    nets: dict[int, Path] = field(default_factory=dict)
    about: str = ""

    def net_for(self, size: int) -> Path:
        """The file that plays ``size`` x ``size``."""
        return self.nets.get(size, self.base)

    def describe(self) -> str:
        """One line: which file plays which size."""
        parts = [f"{size}x{size} {file.name}" for size, file in sorted(self.nets.items())]
        return ", ".join([*parts, f"other sizes {self.base.name}"])


def is_model_set(path: str | os.PathLike[str]) -> bool:
    """Is ``path`` a model-set manifest (a ``.json`` file whose ``format`` says so)?"""
    p = Path(path)
    if p.suffix.lower() != ".json" or not p.is_file():
        return False
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == SET_FORMAT


def _member(path: Path, where: str, value: object) -> Path:
    if not isinstance(value, str) or not value:
        raise KosumiError(f"{path}: field '{where}': expected a file name, got {value!r}")
    file = path.parent / value
    if not file.is_file():
        raise KosumiError(f"{path}: field '{where}': no such file {file}")
    if file.suffix.lower() == ".json":
        raise KosumiError(f"{path}: field '{where}': a member must be a net, not a manifest")
    return file


def _board_size(path: Path, key: str) -> int:
    if not key.isdigit() or not MIN_SIZE <= int(key) <= MAX_SIZE:
        raise KosumiError(f"{path}: field 'nets': {key!r} is not a board size "
                          f"({MIN_SIZE}-{MAX_SIZE})")
    return int(key)


def read_model_set(path: str | os.PathLike[str]) -> ModelSet:
    """Parse and check a manifest: its format and version, the base, each size's net."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise KosumiError(f"{p}: cannot read the model set ({e.strerror or e})") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise KosumiError(f"{p}: not a JSON model set ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != SET_FORMAT:
        raise KosumiError(f"{p}: field 'format': expected {SET_FORMAT!r}")
    if doc.get("version") != SET_VERSION:
        raise KosumiError(f"{p}: field 'version': {doc.get('version')!r} is not supported "
                          f"(this kosumi reads version {SET_VERSION})")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise KosumiError(f"{p}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(_KEYS))})")
    nets = doc.get("nets", {})
    if not isinstance(nets, dict):
        raise KosumiError(f"{p}: field 'nets': expected an object of board size -> file")
    members = {_board_size(p, k): _member(p, f"nets.{k}", v) for k, v in nets.items()}
    about = doc.get("about", "")
    if not isinstance(about, str):
        raise KosumiError(f"{p}: field 'about': expected text")
    return ModelSet(path=p, base=_member(p, "base", doc.get("base")), nets=members, about=about)
