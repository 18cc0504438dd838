"""Nets that ship inside the package, and the names every command accepts for them.

``default`` is the embedded default: a model set (``default.json``, ``kosumi.nets.model_set``)
of b6c64 students distilled from KataGo's g170 net with kosumi's own commands
(``docs/models/default.md``): ``default-9.safetensors`` plays 9x9, ``default-19.safetensors``
19x19, and ``default.safetensors`` (version 5, both boards) is the set's base. The engine,
self-play and labels pick by board size; wherever one net is wanted (quantize, export,
``distill --init``) ``default`` is the base, and ``default-9`` / ``default-19`` name the others.
``tiny`` (``tiny.kpk``) is a 47 KB 9x9 net that beats KataGo's raw policy: an int8 student in a
kosumi pack, so that it plays on a bare install (numpy + zstandard; ``docs/models/tiny.md``).
A file of the same name in the working directory wins over the embedded net.
"""

from __future__ import annotations

import os
from pathlib import Path

from kosumi.errors import KosumiError
from kosumi.nets.model_set import ModelSet, is_model_set, read_model_set

MODELS_DIR = Path(__file__).resolve().parent
DEFAULT_NAME = "default"
DEFAULT_MODEL = MODELS_DIR / "default.safetensors"
DEFAULT_SET = MODELS_DIR / "default.json"
DEFAULT_9_NAME = "default-9"
DEFAULT_9_MODEL = MODELS_DIR / "default-9.safetensors"
DEFAULT_19_NAME = "default-19"
DEFAULT_19_MODEL = MODELS_DIR / "default-19.safetensors"
TINY_NAME = "tiny"
TINY_MODEL = MODELS_DIR / "tiny.kpk"
#: name -> (file, what it is)
EMBEDDED = {DEFAULT_NAME: (DEFAULT_MODEL, "the embedded default net"),
            DEFAULT_9_NAME: (DEFAULT_9_MODEL, "the embedded default's 9x9 net"),
            DEFAULT_19_NAME: (DEFAULT_19_MODEL, "the embedded default's 19x19 net"),
            TINY_NAME: (TINY_MODEL, "the embedded tiny pack")}


def embedded_name(path: str | os.PathLike[str]) -> str | None:
    """The embedded net's name when ``path`` is one of its files, else None."""
    p = Path(path).resolve()
    return next((name for name, (file, _) in EMBEDDED.items() if p == file), None)


def resolve_model(path: str | os.PathLike[str]) -> Path:
    """A model argument -> one net's file: ``default`` (the set's base), ``default-9``,
    ``default-19`` and ``tiny`` are the embedded nets; a model set stands for its base net."""
    name = os.fspath(path)
    if name in EMBEDDED and not Path(name).exists():
        file, what = EMBEDDED[name]
        if not file.exists():
            raise KosumiError(f"{name}: {what} is missing from this install ({file})")
        return file
    if is_model_set(name):
        return read_model_set(name).base
    return Path(path)


def resolve_model_for_sizes(path: str | os.PathLike[str], sizes: list[int]) -> Path:
    """One net's file for games of ``sizes``: for a model set the member that plays them (one
    member must play them all), for anything else ``resolve_model``."""
    model_set = resolve_model_set(path)
    if model_set is None:
        return resolve_model(path)
    files = {model_set.net_for(size) for size in sizes} or {model_set.base}
    if len(files) > 1:
        raise KosumiError(f"{os.fspath(path)}: a model set with a net per board size "
                          f"({model_set.describe()}): run one board size at a time, or name "
                          f"one of its nets")
    return files.pop()


def resolve_model_set(path: str | os.PathLike[str]) -> ModelSet | None:
    """The model set a model argument names (``default``, or a manifest file), else None."""
    name = os.fspath(path)
    if name == DEFAULT_NAME and not Path(name).exists():
        return read_model_set(DEFAULT_SET) if DEFAULT_SET.exists() else None
    return read_model_set(name) if is_model_set(name) else None
