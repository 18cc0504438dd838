"""Running networks: the ``Evaluator`` interface, backends, and ``load_evaluator``.

Importing this package never imports torch (or any other heavy backend): backends are loaded
when a model asks for them.
"""

from kosumi.runtime.backend import BACKENDS, Backend, register_backend
from kosumi.runtime.evaluator import CachedEvaluator, Evaluation, Evaluator, UniformEvaluator
from kosumi.runtime.loader import (
    MODEL_FORMATS,
    LoadOptions,
    ModelFormat,
    detect_format,
    load_evaluator,
    register_model_format,
)
from kosumi.runtime.net_evaluator import NetEvaluator

__all__ = [
    "BACKENDS",
    "MODEL_FORMATS",
    "Backend",
    "CachedEvaluator",
    "Evaluation",
    "Evaluator",
    "LoadOptions",
    "ModelFormat",
    "NetEvaluator",
    "UniformEvaluator",
    "detect_format",
    "load_evaluator",
    "register_backend",
    "register_model_format",
]
