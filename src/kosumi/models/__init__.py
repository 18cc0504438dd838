"""Nets that ship inside the package, and the name ``default`` every command accepts.

``default.safetensors`` is the embedded default teacher: a small student distilled from KataGo's
g170 net with kosumi's own commands (its model card: ``docs/models/default.md``).
"""

from __future__ import annotations

import os
from pathlib import Path

from kosumi.errors import KosumiError

MODELS_DIR = Path(__file__).resolve().parent
DEFAULT_MODEL = MODELS_DIR / "default.safetensors"
DEFAULT_NAME = "default"


def resolve_model(path: str | os.PathLike) -> Path:
    """A model argument -> a file path: ``default`` is the embedded default net."""
    if os.fspath(path) == DEFAULT_NAME and not Path(DEFAULT_NAME).exists():
        if not DEFAULT_MODEL.exists():
            raise KosumiError(f"default: the embedded default net is missing from this install "
                              f"({DEFAULT_MODEL})")
        return DEFAULT_MODEL
    return Path(path)
