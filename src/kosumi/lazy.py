"""Registries whose entries are imported on first use (``"module:function"`` strings), so that
importing kosumi never imports torch, onnxruntime or tensorrt."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kosumi.errors import KosumiError


def resolve(target: str | Callable[..., Any], what: str) -> Callable[..., Any]:
    """A callable, or the function named by ``"module:function"`` (imported now). ``what``
    names the entry in the error when its module cannot be imported."""
    if callable(target):
        return target
    module, _, func = target.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise KosumiError(f"{what} is not available: {e}") from None
    return getattr(mod, func)
