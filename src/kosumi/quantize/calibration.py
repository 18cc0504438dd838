"""Calibration: the positions a net is quantized on, and the activation ranges they give.

``read_calibration(path)`` takes any positions kosumi reads -- a positions folder (``kosumi
positions`` / ``kosumi selfplay``), a label folder (``kosumi label``) or a JSON Lines file in
``kosumi analyze``'s format -- with any mix of board sizes, and returns up to ``limit``
positions, spread evenly over the set (the same ones every run). They are encoded with the net's
own feature set, so a calibration set can never be of another feature set; a board size the net
does not play is an error.

``collect_stats(backend, states)`` runs the float inference graph (``runtime.numpy_backend``)
and keeps, for every value of the graph, its min, max and a seeded sample of its magnitudes;
``activation_range(stats, method)`` turns them into the clipping range of one activation:

- ``minmax``: the largest magnitude seen;
- ``percentile``: the ``percentile``-th percentile of the magnitudes (99.99 by default);
- ``mse``: the clip c that minimises the mean squared error of quantizing the sample to the
  act's grid (scale c/255 for uint8, c/127 for int8), searched over 100 candidates.

The graph's inputs (binary feature planes, global inputs) are always ``minmax``: a clipped input
plane is a wrong board.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from kosumi.errors import KosumiError
from kosumi.go.board import GameState

T = TypeVar("T")

METHODS = ("minmax", "percentile", "mse")
SAMPLE = 400_000  # magnitudes kept per value (seeded sub-sample)
INPUTS = ("planes", "globals")


def read_calibration(path: str | os.PathLike[str], limit: int | None = 512) -> list[GameState]:
    """Up to ``limit`` positions of a positions folder, a label folder or a JSON Lines file,
    evenly spread over it (see the module docstring). KosumiError for a missing, unreadable or
    empty set."""
    return [_state_of(i) for i in spread(_calibration_items(Path(path)), limit)]


def read_calibration_for(path: str | os.PathLike[str], board_sizes: Sequence[int],
                         limit: int | None = 512) -> tuple[list[GameState], int]:
    """(Up to ``limit`` positions of the set at ``path`` evenly spread over those of the net's
    ``board_sizes``, how many of other sizes were left out). Positions are chosen before they
    are replayed, so a set of 660k positions costs what its chosen 512 do (replaying them all
    took minutes). KosumiError as ``read_calibration``, and for a set of other sizes only."""
    keep, skipped = check_sizes(_calibration_items(Path(path)), list(board_sizes), str(path))
    return [_state_of(i) for i in spread(keep, limit)], skipped


def _calibration_items(path: Path) -> list[Any]:
    """A set's positions (``Position`` of a folder, ``GameState`` of a JSON Lines file), not
    yet replayed; KosumiError for a missing, unreadable or empty set."""
    if not path.exists():
        raise KosumiError(f"{path}: no such calibration set (a positions or label folder, or a "
                          "JSON Lines file of positions)")
    items = _read_items(path)
    if not items:
        raise KosumiError(f"{path}: the calibration set is empty")
    return items


def _read_items(path: Path) -> list[Any]:
    if not path.is_dir():
        from kosumi.runtime.analyze import read_queries

        return [p.state for p in read_queries(path)]
    manifest = path / "manifest.json"
    try:
        fmt = json.loads(manifest.read_text()).get("format")
    except (OSError, ValueError):
        raise KosumiError(f"{path}: not a positions or label folder (no readable "
                          "manifest.json)") from None
    if fmt == "kosumi-labels":
        from kosumi.distill.labels import LabelStore

        return [pos for shard in LabelStore(path).shards() for pos in shard.positions]
    from kosumi.distill.positions import PositionStore

    return list(PositionStore(path).positions())


def _size_of(item: Any) -> int:
    return int(item.size if isinstance(item, GameState) else item.board_size)


def _state_of(item: Any) -> GameState:
    return item if isinstance(item, GameState) else item.to_state()


def spread(states: list[T], limit: int | None) -> list[T]:
    """At most ``limit`` of ``states`` (or positions), evenly spread over them (never a fixed
    stride, which could keep the positions of one side to move only)."""
    if limit is None or len(states) <= limit:
        return states
    idx = np.unique(np.linspace(0, len(states) - 1, limit).round().astype(int))
    return [states[i] for i in idx]


def check_sizes(states: list[T], board_sizes: list[int], source: str) -> tuple[list[T], int]:
    """The positions (``GameState`` or ``Position``) of the board sizes the net plays, and how
    many others were left out; KosumiError when none is of a size it plays."""
    keep = [s for s in states if _size_of(s) in board_sizes]
    if not keep:
        sizes = sorted({_size_of(s) for s in states})
        raise KosumiError(f"{source}: calibration positions of "
                          f"{','.join(f'{n}x{n}' for n in sizes)}"
                          f", which the net does not play (it plays "
                          f"{','.join(map(str, board_sizes))})")
    return keep, len(states) - len(keep)


@dataclass
class ValueStats:
    """What calibration saw of one value of the graph."""

    lo: float = float("inf")
    hi: float = float("-inf")
    samples: list[np.ndarray] = field(default_factory=list)
    count: int = 0
    chan_max: np.ndarray | None = None  # per channel (the last axis): max |x|
    chan_sum: np.ndarray | None = None  # per channel: sum of x (for means)
    chan_count: int = 0

    def add(self, x: np.ndarray, rng: np.random.Generator) -> None:
        x = np.asarray(x, dtype=np.float32)
        flat = np.abs(x.ravel())
        self.lo = min(self.lo, float(np.min(x)))
        self.hi = max(self.hi, float(np.max(x)))
        self.count += flat.size
        per = x.reshape(-1, x.shape[-1])
        cmax = np.abs(per).max(axis=0)
        csum = per.sum(axis=0, dtype=np.float64)
        if self.chan_max is None or self.chan_max.shape != cmax.shape:
            self.chan_max, self.chan_sum, self.chan_count = cmax, csum, 0
        else:
            self.chan_max = np.maximum(self.chan_max, cmax)
            self.chan_sum = self.chan_sum + csum
        self.chan_count += per.shape[0]
        keep = min(flat.size, SAMPLE // 8)
        self.samples.append(flat if keep == flat.size else rng.choice(flat, keep, replace=False))

    def magnitudes(self) -> np.ndarray:
        m = np.concatenate(self.samples) if self.samples else np.zeros(1, np.float32)
        if m.size > SAMPLE:
            m = np.random.default_rng(0).choice(m, SAMPLE, replace=False)
        return m

    @property
    def nonnegative(self) -> bool:
        return self.lo >= 0.0

    @property
    def chan_mean(self) -> np.ndarray:
        assert self.chan_sum is not None
        return self.chan_sum / max(1, self.chan_count)


def collect_stats(backend: Any, feature_set: Any, states: list[GameState],
                  batch: int = 64) -> dict[str, ValueStats]:
    """Every value's statistics over the calibration positions (float graph, numpy)."""
    from kosumi.runtime.evaluator import same_size_chunks

    rng = np.random.default_rng(0)
    stats: dict[str, ValueStats] = {}
    for chunk in same_size_chunks(states, batch):
        planes, glob = feature_set.encode([states[i] for i in chunk])
        for name, value in backend.values(planes, glob).items():
            stats.setdefault(name, ValueStats()).add(value, rng)
    return stats


def _mse_clip(m: np.ndarray, levels: int) -> float:
    hi = float(m.max())
    if hi <= 0:
        return 1.0
    best, best_err = hi, float("inf")
    sample = m if m.size <= 100_000 else np.random.default_rng(1).choice(m, 100_000, False)
    for c in np.linspace(hi / 100, hi, 100):
        s = c / levels
        q = np.minimum(np.rint(sample / s), levels) * s
        err = float(np.mean((sample - q) ** 2))
        if err < best_err:
            best, best_err = float(c), err
    return best


def activation_range(name: str, st: ValueStats, method: str, percentile: float = 99.99) -> float:
    """The clipping range c of a value (see the module docstring); > 0."""
    if method not in METHODS:
        raise KosumiError(f"--method {method!r}: use {', '.join(METHODS)}")
    m = st.magnitudes()
    hi = max(abs(st.lo), abs(st.hi))
    if name in INPUTS or method == "minmax":
        c = hi
    elif method == "percentile":
        c = float(np.percentile(m, percentile))
    else:
        c = _mse_clip(m, 255 if st.nonnegative else 127)
    if not np.isfinite(c):
        raise KosumiError(f"calibration: value {name!r} is not finite (NaN or infinite "
                          "activations: a broken net?)")
    return max(c, 1e-8)
