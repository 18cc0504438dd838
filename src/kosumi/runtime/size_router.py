"""``SizeRouter``: one Evaluator over a model set, each board size played by its own net.

The search, GTP and analysis see one evaluator; a batch is split by board size and each part
goes to the net the set names for that size (``nets.model_set``). Members are opened on first
use, so a 9x9 game never loads the 19x19 net.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from kosumi.go.board import GameState
from kosumi.nets.model_set import ModelSet
from kosumi.runtime.evaluator import Evaluation, Evaluator, map_same_size


class SizeRouter(Evaluator):
    """The evaluator of a model set: ``open_net(file)`` opens a member when a size first needs
    it; every member is closed with the router."""

    def __init__(self, model_set: ModelSet, open_net: Callable[[Path], Evaluator], name: str):
        self.model_set = model_set
        self.name = name
        self._open_net = open_net
        self._open: dict[Path, Evaluator] = {}
        self._lock = threading.Lock()

    def member(self, size: int) -> Evaluator:
        """The (opened) net that plays ``size`` x ``size``."""
        file = self.model_set.net_for(size)
        with self._lock:
            if file not in self._open:
                self._open[file] = self._open_net(file)
            return self._open[file]

    @property
    def backend(self) -> object | None:
        """The backend of the member opened last (what summaries name), None before any."""
        with self._lock:
            opened = list(self._open.values())
        return getattr(opened[-1], "backend", None) if opened else None

    def evaluate(self, states: Sequence[GameState]) -> list[Evaluation]:
        return map_same_size(states, len(states) or 1,
                             lambda chunk: self.member(chunk[0].size).evaluate(chunk))

    def supports_size(self, size: int) -> bool:
        return self.member(size).supports_size(size)

    def close(self) -> None:
        with self._lock:
            for evaluator in self._open.values():
                evaluator.close()
            self._open.clear()
