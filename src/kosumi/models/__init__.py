"""Nets that ship inside the package, and the names every command accepts for them.

``default`` (``default.safetensors``) is the embedded default teacher: a b6c64 student distilled
from KataGo's g170 net with kosumi's own commands (model card: ``docs/models/default.md``).
``tiny`` (``tiny.kpk``) is a 47 KB 9x9 net that beats KataGo's raw policy: an int8 student in a
kosumi pack, so that it plays on a bare install (numpy + zstandard; ``docs/models/tiny.md``).
A file of the same name in the working directory wins over the embedded net.
"""

from __future__ import annotations

import os
from pathlib import Path

from kosumi.errors import KosumiError

MODELS_DIR = Path(__file__).resolve().parent
DEFAULT_NAME = "default"
DEFAULT_MODEL = MODELS_DIR / "default.safetensors"
TINY_NAME = "tiny"
TINY_MODEL = MODELS_DIR / "tiny.kpk"
#: name -> (file, what it is)
EMBEDDED = {DEFAULT_NAME: (DEFAULT_MODEL, "the embedded default net"),
            TINY_NAME: (TINY_MODEL, "the embedded tiny pack")}


def embedded_name(path: str | os.PathLike[str]) -> str | None:
    """The embedded net's name when ``path`` is one of its files, else None."""
    p = Path(path).resolve()
    return next((name for name, (file, _) in EMBEDDED.items() if p == file), None)


def resolve_model(path: str | os.PathLike[str]) -> Path:
    """A model argument -> a file path: ``default`` and ``tiny`` are the embedded nets."""
    name = os.fspath(path)
    if name in EMBEDDED and not Path(name).exists():
        file, what = EMBEDDED[name]
        if not file.exists():
            raise KosumiError(f"{name}: {what} is missing from this install ({file})")
        return file
    return Path(path)
