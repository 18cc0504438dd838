"""Which pip extra installs an optional package: what a command on the core install says when
it needs one (``pip install 'kosumi[EXTRA]'``), instead of a ``ModuleNotFoundError``."""

from __future__ import annotations

#: top-level module -> the extra of ``pyproject.toml`` that installs it
EXTRA_OF = {
    "torch": "train",
    "safetensors": "train",
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "matplotlib": "viz",
    "tensorrt": "tensorrt",
    "ray": "cluster",
}


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """One line for a missing optional package (None: not one of kosumi's extras)."""
    name = (error.name or "").split(".")[0]
    extra = EXTRA_OF.get(name)
    if extra is None:
        return None
    return f"this needs {name}, which is not installed: pip install 'kosumi[{extra}]'"
