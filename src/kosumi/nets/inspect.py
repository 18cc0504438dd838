"""``describe_model(path)``: what a model file is, whatever its format (``kosumi inspect``).

A description is a JSON-able dict with at least these keys:

    format          human name of the file format, e.g. "Leela Zero text weights (gzip)"
    version         the format's (or config's) version number
    arch            b<blocks>c<channels>
    blocks          residual blocks
    channels        trunk channels (an int), or a dict of widths (KataGo)
    parameters      learned values (BatchNorm running means/variances not counted)
    input_features  {"name", "spatial", "global"}
    heads           {head name: what it outputs}
    board_sizes     the board sizes the net plays

``describe_model`` adds ``file`` (the path) and ``file_bytes``. The format is detected and
described through the one model-format registry (``kosumi.nets.formats``); every problem --
unreadable file, unknown format, a corrupt file -- raises ``KosumiError`` with one line naming
the file. This module needs numpy only (no torch).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kosumi.errors import KosumiError


def describe_model(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe any supported model file (see the module docstring). Raises KosumiError."""
    from kosumi.models import resolve_model, resolve_model_set
    from kosumi.nets.formats import detect_file_format

    model_set = resolve_model_set(path)
    path = resolve_model(path)
    fmt = detect_file_format(path)
    try:
        size = Path(path).stat().st_size
    except OSError as e:
        raise KosumiError(f"{path}: cannot read model file ({e.strerror or e})") from None
    in_set = {} if model_set is None else {  # the set first; its base net is described
        "model_set": f"{model_set.path.name}: {model_set.describe()}; below, its base"}
    return {**in_set, "file": str(path), "file_bytes": size, **fmt.describe(path)}


# ---------------------------------------------------------------------------- text form
def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_inline(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(_inline(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_description(info: dict[str, Any]) -> str:
    """A description as aligned ``key: value`` lines (``heads`` one per line)."""
    lines = []
    for key, value in info.items():
        label = f"{key.replace('_', ' ')}:"
        if key == "heads" and isinstance(value, dict):
            lines.append(label)
            lines += [f"  {name + ':':<14} {_inline(what)}" for name, what in value.items()]
            continue
        if key == "quantization" and isinstance(value, dict):  # the scheme, a layer a line
            head = {k: v for k, v in value.items() if k != "layers"}
            lines.append(f"{label:<16} {_inline(head)}")
            width = max((len(n) for n in value.get("layers", {})), default=0) + 1
            lines += [f"  {name + ':':<{width}} {what}"
                      for name, what in value.get("layers", {}).items()]
            continue
        if key == "input_features" and isinstance(value, dict) and "name" in value:
            text = (f"{value['name']} ({value.get('spatial', '?')} planes, "
                    f"{value.get('global', 0)} global inputs)")
        elif key == "version":
            text = str(value)
        else:
            text = _inline(value)
        lines.append(f"{label:<16} {text}")
    return "\n".join(lines)
