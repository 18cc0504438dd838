"""Running networks: the ``Evaluator`` interface, backends, and ``load_evaluator``.

Importing this package never imports torch (or any other heavy backend): backends are loaded
when a model asks for them.
"""

from kosumi.runtime.backend import BACKENDS, Backend, BackendInfo, register_backend
from kosumi.runtime.evaluator import CachedEvaluator, Evaluation, Evaluator, UniformEvaluator
from kosumi.runtime.loader import detect_format, load_evaluator, open_evaluator
from kosumi.runtime.net_evaluator import NetEvaluator
from kosumi.runtime.options import LoadOptions

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendInfo",
    "CachedEvaluator",
    "Evaluation",
    "Evaluator",
    "LoadOptions",
    "NetEvaluator",
    "UniformEvaluator",
    "detect_format",
    "load_evaluator",
    "open_evaluator",
    "register_backend",
]
