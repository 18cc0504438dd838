"""The one door to every network: ``Evaluator.evaluate(states) -> list[Evaluation]``.

Everything that plays or labels (the MCTS engine, ``kosumi analyze``, labelling) talks to this
interface only. Backends (torch, onnxruntime, tensorrt, int8-numpy) run the raw forward pass;
encoding the features, masking illegal points, the softmax and the side-to-move perspective are
done once, above them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.coords import WHITE, symmetry_permutation

T = TypeVar("T")


def same_size_chunks(states: Sequence[GameState], max_batch: int | Callable[[int], int]
                     ) -> list[list[int]]:
    """Indices of ``states`` grouped by board size (in first-seen order) and cut into chunks of
    at most ``max_batch`` (a number, or a function of the board size): networks run one board
    size per forward pass."""
    by_size: dict[int, list[int]] = {}
    for i, s in enumerate(states):
        by_size.setdefault(s.size, []).append(i)
    out = []
    for size, idx in by_size.items():
        step = max(1, int(max_batch(size) if callable(max_batch) else max_batch))
        out += [idx[start : start + step] for start in range(0, len(idx), step)]
    return out


def map_same_size(states: Sequence[GameState], max_batch: int | Callable[[int], int],
                  fn: Callable[[list[GameState]], list[T]]) -> list[T]:
    """``fn`` over same-size chunks of ``states`` (see ``same_size_chunks``), results in the
    order of ``states``."""
    results: list[T | None] = [None] * len(states)
    for chunk in same_size_chunks(states, max_batch):
        for i, r in zip(chunk, fn([states[i] for i in chunk]), strict=True):
            results[i] = r
    return results  # type: ignore[return-value]


def symmetric_inputs(planes: np.ndarray, glob: np.ndarray | None,
                     symmetries: Sequence[int]) -> tuple[np.ndarray, np.ndarray | None]:
    """Every position of a batch under each of ``symmetries``, symmetry-major: planes
    [B, C, N, N] -> [k*B, C, N, N] (row j*B + i = position i under symmetries[j]); globals
    tiled alike. The identity alone returns the inputs as they are."""
    if len(symmetries) == 1 and symmetries[0] == 0:
        return planes, glob
    bsz, c, n, _ = planes.shape
    flat = planes.reshape(bsz, c, n * n)
    stacked = np.empty((len(symmetries), bsz, c, n * n), dtype=np.float32)
    for j, sym in enumerate(symmetries):
        stacked[j][..., symmetry_permutation(n, sym)] = flat
    return (stacked.reshape(len(symmetries) * bsz, c, n, n),
            None if glob is None else np.tile(glob, (len(symmetries), 1)))


def to_original_frame(n: int, symmetries: Sequence[int], *arrays: np.ndarray | None) -> None:
    """In place: outputs [k, B, L] of ``symmetric_inputs`` (row j under ``symmetries[j]``) back
    to the original frame over their first N*N entries (a pass entry after them stays):
    original[p] = transformed[perm[p]]. ``None`` arrays are skipped."""
    nn = n * n
    for j, sym in enumerate(symmetries):
        if sym:
            perm = symmetry_permutation(n, sym)
            for a in arrays:
                if a is not None:
                    a[j, :, :nn] = a[j][:, perm]


def legal_with_pass(states: Sequence[GameState]) -> np.ndarray:
    """bool [B, N*N + 1]: each position's legal points for the side to move, then pass (always
    legal). Same-size states."""
    nn = states[0].size ** 2
    legal = np.empty((len(states), nn + 1), dtype=bool)
    legal[:, nn] = True
    for i, s in enumerate(states):
        s.legal_mask(out=legal[i, :nn])
    return legal


@dataclass
class Evaluation:
    """A network's verdict on one position, from the side to move's view.

    policy     float32 [N*N + 1]: probabilities over points (row-major from the top-left) then
               pass; 0 at illegal points; sums to 1.
    value      the side to move's win probability, in [0, 1].
    score_lead the side to move's expected lead in points (komi included), if the net has it.
    ownership  float32 [N*N] in [-1, 1], +1 = the side to move will own the point, if the net has
               it.
    wdl        float [3]: win, loss, noResult probabilities of the side to move, for nets with a
               three-way value head (KataGo, kosumi ``wdl``); None for a single win probability.
    score_mean, score_stdev  KataGo nets: the expected final score (points, komi included,
               times 1 - noResult) and its standard deviation; None for other nets.
    """

    policy: np.ndarray
    value: float
    score_lead: float | None = None
    ownership: np.ndarray | None = None
    wdl: np.ndarray | None = None
    score_mean: float | None = None
    score_stdev: float | None = None

    def white_view(self, to_move: int) -> dict[str, float | np.ndarray | None]:
        """The outputs as KataGo prints them (White's view) for a position with ``to_move`` to
        play: whiteWin, whiteLoss, noResult, whiteLead, whiteScoreSelfplay,
        whiteScoreSelfplaySq (mean^2 + stdev^2, times 1 - noResult), whiteOwnership."""
        white = to_move == WHITE
        sign = 1.0 if white else -1.0
        win, loss, nr = (float(x) for x in self.wdl) if self.wdl is not None \
            else (self.value, 1.0 - self.value, 0.0)
        keep = 1.0 - nr
        mean_sq = None
        if self.score_mean is not None and self.score_stdev is not None:
            raw_mean = self.score_mean / keep if keep > 0 else 0.0
            mean_sq = (raw_mean * raw_mean + self.score_stdev ** 2) * keep
        return {
            "whiteWin": win if white else loss,
            "whiteLoss": loss if white else win,
            "noResult": nr,
            "whiteLead": None if self.score_lead is None else sign * self.score_lead,
            "whiteScoreSelfplay": None if self.score_mean is None else sign * self.score_mean,
            "whiteScoreSelfplaySq": mean_sq,
            "whiteOwnership": None if self.ownership is None else sign * self.ownership,
        }


class Evaluator(ABC):
    """Batched evaluation of positions."""

    #: a short human name (file name, "uniform", ...)
    name: str = "evaluator"

    @abstractmethod
    def evaluate(self, states: Sequence[GameState]) -> list[Evaluation]:
        """Evaluate a batch of positions (any mix of board sizes the net supports)."""

    def evaluate_one(self, state: GameState) -> Evaluation:
        return self.evaluate([state])[0]

    def supports_size(self, size: int) -> bool:
        return True

    def close(self) -> None:
        """Release resources (sessions, threads)."""


class UniformEvaluator(Evaluator):
    """A network-free evaluator: uniform policy over legal moves (pass included, with weight
    ``pass_weight``) and, by default, a static value from the Tromp-Taylor area count of the
    position (``value="area"``: win probability = logistic(lead / scale) for the side to move),
    or a constant (``value=0.5``). An oracle for testing search, and a baseline player."""

    name = "uniform"

    def __init__(self, value: float | str = "area", pass_weight: float = 1.0, scale: float = 2.0):
        if isinstance(value, str) and value != "area":
            raise ValueError(f"UniformEvaluator value must be 'area' or a number, not {value!r}")
        self.value = value
        self.pass_weight = pass_weight
        self.scale = scale

    def _value(self, s: GameState) -> tuple[float, float | None]:
        if self.value != "area":
            return float(self.value), None
        lead = s.area_score()
        if s.to_move != 1:
            lead = -lead
        return 1.0 / (1.0 + math.exp(-lead / self.scale)), lead

    def evaluate(self, states: Sequence[GameState]) -> list[Evaluation]:
        out = []
        for s in states:
            mask = s.legal_mask()
            pol = np.zeros(s.num_points + 1, dtype=np.float32)
            pol[:-1] = mask
            pol[-1] = self.pass_weight
            pol /= pol.sum()
            value, lead = self._value(s)
            out.append(Evaluation(policy=pol, value=value, score_lead=lead))
        return out


# size, position hash, to move, ko point, komi, passes, the last moves (what the features see)
CacheKey = tuple[int, int, int, int, float, int, tuple[tuple[int, int], ...]]


class CachedEvaluator(Evaluator):
    """An LRU cache in front of another evaluator, keyed by the position's identity
    (stones, side to move, ko, recent history, komi): transpositions are evaluated once."""

    def __init__(self, inner: Evaluator, capacity: int = 100_000, history: int = 8):
        self.inner = inner
        self.capacity = capacity
        self.history = history
        self.name = inner.name
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[CacheKey, Evaluation] = OrderedDict()

    def key(self, s: GameState) -> CacheKey:
        return (
            s.size, s.hash, s.to_move, s.ko, s.komi, s.passes,
            tuple(s.moves[-self.history:]),
        )

    def evaluate(self, states: Sequence[GameState]) -> list[Evaluation]:
        keys = [self.key(s) for s in states]
        results: list[Evaluation | None] = []
        todo, todo_idx = [], []
        for i, (k, s) in enumerate(zip(keys, states, strict=True)):
            e = self._cache.get(k)
            if e is not None:
                self._cache.move_to_end(k)
                self.hits += 1
            else:
                self.misses += 1
                todo.append(s)
                todo_idx.append(i)
            results.append(e)
        if todo:
            for i, e in zip(todo_idx, self.inner.evaluate(todo), strict=True):
                results[i] = e
                self._cache[keys[i]] = e
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return results  # type: ignore[return-value]

    def supports_size(self, size: int) -> bool:
        return self.inner.supports_size(size)

    def close(self) -> None:
        self.inner.close()
