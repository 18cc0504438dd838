"""Labels -> training arrays for one student feature set: replay, encode, cache, split, sample.

``load_dataset(store, feature_set)`` turns a ``LabelStore`` (teacher-labelled positions) into a
``DistillDataset``: for each board size, the encoded input planes/globals of the student's
feature set and the teacher's targets (policy, win/loss/noResult, score lead, ownership).

Replay, once per group. Labelled positions are move sequences from a root (size, komi, rules,
setup, first player); positions of one game share prefixes, and so do games with a common
opening. Positions are grouped by root and sorted by their move sequences, then walked like a
trie: a stack of immutable snapshots holds the states along the current path, and each position
continues from the deepest snapshot that is a prefix of it. Each move of the union of the games
is played about once; states are encoded in chunks with the feature set's batch encoder.

Streaming. ``load_dataset`` encodes a board size's records in groups of GROUP_ROWS (4096, one
default label shard) in storage order, where the positions of a game are neighbours, so a group
keeps most of the prefix sharing; each group's rows are appended to the cache entry on disk.
Memory while encoding is one group (its records, replay states and encoded rows) plus the game
table, whatever the folder's size; the entry is then memory-mapped for training. Games stay
whole across groups: a source names its game in every group, and a position without one joins
the previous group's last prefix chain when it continues it. ``encode_records`` encodes records
in memory, as one group.

Cache. Encoding costs far more than reading arrays, so the result for one (label content hash,
feature set, board size) is stored as an uncompressed ``.npz`` (no pickle; read with
``allow_pickle=False``) under ``cache_dir`` (default ``$KOSUMI_CACHE_DIR`` or
``~/.cache/kosumi/distill``), written atomically, and reused by later runs; an entry that does
not match its key, is damaged or half-written is rebuilt (``kosumi.distill.dataset_cache``).

Array layout of one size (``SizeData``), M positions, N x N board, C planes, G globals::

    planes         uint8 [M, C, N, N] (every kosumi feature plane is 0/1; float32 otherwise)
    globals        float32 [M, G] or None
    policy         float32 [M, N*N+1]   teacher distribution, points row-major then pass
    value          float32 [M, 3]       win, loss, noResult of the side to move
    score          float32 [M] / has_score bool [M]          (0 where the label has none)
    ownership      float32 [M, N*N] / has_ownership bool [M] (+1 = side to move; 0 where none)
    game           int32 [M] index into ``games`` (str): the game a position belongs to

Held-out split: ``split_by_game`` puts whole games (``Position.source`` with any ``#...``
position suffix removed; positions without a source are grouped by replay prefix chains) on one
side, chosen per board size by a seeded permutation, so that positions of one game never leak
between train and validation (a position that several games reach is stored once, under one
of them, by the positions folder).

Augmentation: ``augment`` applies one of the 8 board symmetries per sample to the planes and,
consistently, to the policy (the pass entry is unchanged) and ownership targets, with
``kosumi.go.coords`` conventions (``transformed[perm[p]] = original[p]``).

Order: ``BatchPlan`` makes the content of global batch ``step`` (board size, sample indices,
symmetries) a pure function of (seed, step), so a resumed run sees exactly the batches an
uninterrupted one would, and ``torchrun`` ranks can each take their slice of the same batch.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.distill import dataset_cache as _cache
from kosumi.distill.dataset_cache import (
    cache_meta,
    cache_path,
    default_cache_dir,
    label_content_hash,
)
from kosumi.errors import KosumiError
from kosumi.go.board import GameState, IllegalMove
from kosumi.go.coords import symmetry_permutation
from kosumi.nets.features import get_feature_set

ENCODE_CHUNK = 512  # positions per call of the feature set's batch encoder
GROUP_ROWS = 4096  # records encoded together when streaming: one default label shard

ProgressFn = Callable[[int, int], None]  # (done, total)


# ---------------------------------------------------------------------------- data classes
@dataclass
class SizeData:
    """The encoded positions of one board size (see the module docstring for the layout)."""

    board_size: int
    planes: np.ndarray
    globals: np.ndarray | None
    policy: np.ndarray
    value: np.ndarray
    score: np.ndarray
    has_score: np.ndarray
    ownership: np.ndarray
    has_ownership: np.ndarray
    game: np.ndarray
    games: np.ndarray

    def __len__(self) -> int:
        return int(self.policy.shape[0])

    @property
    def game_keys(self) -> np.ndarray:
        """The game key (str) of every position."""
        return self.games[self.game] if len(self.games) else np.array([], dtype=str)

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {k: getattr(self, k) for k in _ARRAY_FIELDS}
        if self.globals is not None:
            out["globals"] = self.globals
        return out

    @classmethod
    def from_arrays(cls, size: int, arrays: dict[str, np.ndarray]) -> SizeData:
        return cls(board_size=size, globals=arrays.get("globals"),
                   **{k: arrays[k] for k in _ARRAY_FIELDS})


_ARRAY_FIELDS = ("planes", "policy", "value", "score", "has_score", "ownership", "has_ownership",
                 "game", "games")


@dataclass
class DistillDataset:
    """Encoded positions for one feature set, per board size, from one label store."""

    feature_set: str
    content_hash: str
    sizes: dict[int, SizeData] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(len(d) for d in self.sizes.values())

    def counts(self) -> dict[int, int]:
        return {n: len(d) for n, d in sorted(self.sizes.items())}

    @property
    def has_score(self) -> bool:
        return any(bool(d.has_score.any()) for d in self.sizes.values())

    @property
    def has_ownership(self) -> bool:
        return any(bool(d.has_ownership.any()) for d in self.sizes.values())


# ---------------------------------------------------------------------------- cache
def load_cached(path: Path, meta: dict[str, Any]) -> SizeData | None:
    """The cached arrays of one size (memory-mapped, read-only) if ``path`` is an intact entry
    matching ``meta``; else None (see ``kosumi.distill.dataset_cache``)."""
    arrays = _cache.load_cached(path, meta, _ARRAY_FIELDS)
    return None if arrays is None else SizeData.from_arrays(meta["board_size"], arrays)


def save_cached(path: Path, data: SizeData, meta: dict[str, Any]) -> None:
    """Write in-memory ``data`` as the cache entry ``path`` with its ``meta``, atomically."""
    _cache.save_cached(path, data.to_arrays(), meta)


# ---------------------------------------------------------------------------- replay
def _root_key(position: Any) -> tuple:
    return (position.board_size, float(position.komi), position.rules, tuple(position.setup),
            position.to_move_at_start)


def _lcp(a: Sequence, b: Sequence) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def replay_positions(positions: Sequence[Any]) -> Iterator[tuple[int, GameState]]:
    """Yield ``(index, state)`` for every position, replaying shared move prefixes once.

    ``positions[i].to_state()`` equals the yielded state (same setup, moves and history); the
    order is by root, then by move sequence. Yielded states must not be mutated by the caller.
    Raises KosumiError naming the position's source for an illegal move.
    """
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(positions):
        groups.setdefault(_root_key(p), []).append(i)
    for idxs in groups.values():
        idxs.sort(key=lambda i: positions[i].moves)
        first = positions[idxs[0]]
        root = replace(first, moves=()).to_state()
        stack: list[tuple[int, GameState]] = [(0, root)]  # immutable snapshots along the path
        prev: Sequence = ()
        for j, i in enumerate(idxs):
            moves = positions[i].moves
            common = _lcp(prev, moves)
            while stack[-1][0] > common:
                stack.pop()
            depth, snap = stack[-1]
            if depth == len(moves):
                yield i, snap
            else:
                following = positions[idxs[j + 1]].moves if j + 1 < len(idxs) else ()
                branch = _lcp(moves, following)  # where the next position leaves this path
                state = snap.copy()
                try:
                    for t in range(depth, len(moves)):
                        if t == branch and t > depth:
                            stack.append((t, state.copy()))
                        color, p = moves[t]
                        state.play(p, color)
                except IllegalMove as e:
                    where = positions[i].source or f"position {i}"
                    raise KosumiError(f"{where}: move {t + 1} cannot be replayed ({e})") from None
                stack.append((len(moves), state))
                yield i, state
            prev = moves


# ---------------------------------------------------------------------------- encoding
def _game_key(position: Any, size: int) -> str:
    """The game a position belongs to: its source ('' if none). Sources name one game each:
    ``selfplay:seed0-game000012``, ``sgf:a.sgf``, ``sgf:collection.sgf#3`` (the third game of
    a collection file)."""
    source = str(getattr(position, "source", "") or "")
    return f"{size}:{source}" if source else ""


def _check_record(rec: Any, n: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated, normalised (policy, value) of one label record."""
    policy = np.asarray(rec.policy, dtype=np.float32).reshape(-1)
    if policy.shape[0] != n * n + 1:
        raise KosumiError(f"{where}: policy has {policy.shape[0]} entries, a {n}x{n} board needs "
                          f"{n * n + 1} (points + pass)")
    total = float(policy.sum(dtype=np.float64))
    if not np.isfinite(policy).all() or (policy < 0).any() or not total > 0:
        raise KosumiError(f"{where}: policy is not a probability distribution")
    value = np.asarray(rec.value, dtype=np.float32).reshape(-1)
    vt = float(value.sum(dtype=np.float64))
    if value.shape[0] != 3 or not np.isfinite(value).all() or (value < 0).any() or not vt > 0:
        raise KosumiError(f"{where}: value must be 3 probabilities (win, loss, noResult)")
    return policy / np.float32(total), value / np.float32(vt)


def _check_label(rec: Any, n: int, label: str
                 ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None]:
    """Validated (policy, value, score lead or NaN, clipped ownership or None) of a record."""
    pos = rec.position
    if pos.board_size != n:
        raise KosumiError(f"{label}: board size {pos.board_size}, expected {n}")
    pol, val = _check_record(rec, n, label)
    score = rec.score_lead
    if score is not None and not math.isfinite(float(score)):
        raise KosumiError(f"{label}: score_lead is not finite")
    own = rec.ownership
    if own is not None:
        own = np.asarray(own, dtype=np.float32).reshape(-1)
        if own.shape[0] != n * n or not np.isfinite(own).all():
            raise KosumiError(f"{label}: ownership must be {n * n} finite values")
        own = np.clip(own, -1.0, 1.0)
    return pol, val, float("nan") if score is None else float(score), own


def _encode_positions(fs: Any, positions: list[Any], n: int, on_chunk: Callable[[int], None]
                      ) -> tuple[np.ndarray, np.ndarray | None, list[int]]:
    """The input planes and globals of ``positions`` (replayed in prefix order, encoded in
    chunks of ENCODE_CHUNK, ``on_chunk(count)`` after each) and the replay order."""
    m = len(positions)
    planes = np.zeros((m, fs.num_planes, n, n), dtype=np.uint8)
    glob = np.zeros((m, fs.num_globals), dtype=np.float32) if fs.num_globals else None
    order: list[int] = []
    chunk_states: list[GameState] = []

    def flush() -> None:
        nonlocal planes
        if not chunk_states:
            return
        idx = order[len(order) - len(chunk_states):]
        p, g = fs.encode(chunk_states)
        if planes.dtype == np.uint8 and not np.isin(p, (0.0, 1.0)).all():
            planes = planes.astype(np.float32)  # a feature set with non-binary planes
        planes[idx] = p
        if glob is not None and g is not None:
            glob[idx] = g
        on_chunk(len(idx))
        chunk_states.clear()

    for i, state in replay_positions(positions):
        order.append(i)
        chunk_states.append(state)
        if len(chunk_states) >= ENCODE_CHUNK:
            flush()
    flush()
    return planes, glob, order


def _target_rows(checked: list[tuple], nn: int) -> dict[str, np.ndarray]:
    """The target arrays of validated records (``_check_label``), in their order."""
    m = len(checked)
    score = np.array([c[2] for c in checked], dtype=np.float32)
    has_score = np.isfinite(score)
    ownership = np.zeros((m, nn), dtype=np.float32)
    for i, c in enumerate(checked):
        if c[3] is not None:
            ownership[i] = c[3]
    return {
        "policy": np.stack([c[0] for c in checked]) if m else np.zeros((0, nn + 1), np.float32),
        "value": np.stack([c[1] for c in checked]) if m else np.zeros((0, 3), np.float32),
        "score": np.where(has_score, score, 0.0).astype(np.float32),
        "has_score": has_score,
        "ownership": ownership,
        "has_ownership": np.array([c[3] is not None for c in checked], dtype=bool),
    }


class _SizeEncoder:
    """Encodes the label records of one board size, a group of records at a time.

    Every group is validated, replayed (prefixes shared within the group) and encoded on its
    own, so memory is bounded by one group; what carries over between groups is small: the
    record count (error messages name ``record K`` of the whole size), the progress, the game
    table (key -> index, in order of first sight) and the prefix chain of the group's last
    record. ``group(records)`` -> the rows of that group, in record order, with provisional
    game indices; ``game_table()`` -> (sorted game keys, provisional -> final index): the
    keys and indices ``numpy.unique`` would give for the whole size.
    """

    def __init__(self, feature_set: str, n: int, where: str, progress: ProgressFn | None,
                 total: int | None):
        self.fs, self.n, self.where = get_feature_set(feature_set), n, where
        self.progress, self.total = progress, total
        self.seen = 0  # records validated
        self.done = 0  # positions encoded
        self.games: dict[str, int] = {}
        self.chains = 0
        self.tail: tuple[tuple, tuple, int] | None = None  # (root, moves, chain)

    def group(self, records: Iterable[Any]) -> dict[str, np.ndarray]:
        positions: list[Any] = []
        checked = []
        for rec in records:
            pos = rec.position
            src = getattr(pos, "source", "")
            label = f"{self.where}: record {self.seen}" + (f" ({pos.source})" if src else "")
            checked.append(_check_label(rec, self.n, label))
            positions.append(pos)
            self.seen += 1
        planes, glob, order = _encode_positions(self.fs, positions, self.n, self._advance)
        rows = _target_rows(checked, self.n * self.n)
        rows.update(planes=planes, game=self._games(positions, order))
        if glob is not None:
            rows["globals"] = glob
        return rows

    def _advance(self, count: int) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(self.done, self.seen if self.total is None else self.total)

    def _games(self, positions: list[Any], order: list[int]) -> np.ndarray:
        """Each position's game index: by its source; positions without one by the prefix
        chain they were replayed in (a chain: each position continues the one replayed just
        before it). The chain of a group's first record continues the chain of the previous
        group's last record when that is a prefix of it: a game cut by a shard boundary."""
        n = self.n
        keys = [_game_key(p, n) for p in positions]
        chain = [0] * len(positions)
        prev: Any = None
        for i in order:
            pos = positions[i]
            if keys[i]:
                prev = None
                continue
            if prev is None or _root_key(pos) != _root_key(prev) or not _extends(pos, prev.moves):
                self.chains += 1
            chain[i], prev = self.chains, pos
        if positions and not keys[0] and self.tail is not None:
            root, moves, old = self.tail
            if _root_key(positions[0]) == root and _extends(positions[0], moves):
                first = chain[0]
                chain = [old if c == first else c for c in chain]
        last = positions[-1] if positions else None
        self.tail = None if last is None or keys[-1] else (
            _root_key(last), tuple(last.moves), chain[-1])
        out = np.empty(len(positions), dtype=np.int32)
        for i, key in enumerate(keys):
            out[i] = self.games.setdefault(key or f"{n}:#chain{chain[i]}", len(self.games))
        return out

    def game_table(self) -> tuple[np.ndarray, np.ndarray]:
        keys = np.array(list(self.games), dtype=str)
        order = np.argsort(keys, kind="stable")
        remap = np.empty(len(keys), dtype=np.int32)
        remap[order] = np.arange(len(keys), dtype=np.int32)
        return keys[order], remap


def _extends(position: Any, moves: Sequence) -> bool:
    return tuple(position.moves[: len(moves)]) == tuple(moves)


def encode_records(records: Iterable[Any], feature_set: str, board_size: int,
                   progress: ProgressFn | None = None, total: int | None = None,
                   where: str = "labels") -> SizeData:
    """Encode label records of one board size for ``feature_set``, in memory, as one group
    (see the module docstring; ``load_dataset`` streams into the cache instead).

    ``where`` names the label store in error messages; ``progress(done, total)`` is called as
    positions are encoded.
    """
    enc = _SizeEncoder(feature_set, board_size, where, progress, total)
    rows = enc.group(records)
    games, remap = enc.game_table()
    rows["game"] = remap[rows["game"]]
    return SizeData(board_size=board_size, globals=rows.pop("globals", None), games=games,
                    **rows)


def encode_to_cache(store: Any, feature_set: str, board_size: int, path: Path,
                    meta: dict[str, Any], where: str = "labels",
                    progress: ProgressFn | None = None) -> None:
    """Encode ``store.records(board_size)`` into the cache entry ``path``, streaming: groups
    of GROUP_ROWS records (one default label shard) are encoded in storage order and their
    rows appended to the entry's columns on disk, which is published atomically at the end.
    An error (a bad label: KosumiError, or OSError) leaves no entry and no temporary files.
    """
    fs = get_feature_set(feature_set)
    n, nn = board_size, board_size * board_size
    count = getattr(store, "count", None)
    enc = _SizeEncoder(feature_set, n, where, progress,
                       count(board_size=n) if callable(count) else None)
    with _cache.StreamedNpz(path) as out:
        out.column("planes", np.uint8, (fs.num_planes, n, n))  # widened if a plane is not 0/1
        if fs.num_globals:
            out.column("globals", np.float32, (fs.num_globals,))
        for name, dtype, shape in (("policy", np.float32, (nn + 1,)),
                                   ("value", np.float32, (3,)), ("score", np.float32, ()),
                                   ("has_score", bool, ()), ("ownership", np.float32, (nn,)),
                                   ("has_ownership", bool, ()), ("game", np.int32, ())):
            out.column(name, dtype, shape)
        records = iter(store.records(board_size=n))
        while group := list(islice(records, GROUP_ROWS)):
            for name, rows in enc.group(group).items():
                out.append(name, rows)
            del group, rows  # before the next group is read: one group in memory at a time
        games, remap = enc.game_table()
        out.publish({"games": games, "meta": np.array(json.dumps(meta, sort_keys=True))},
                    transform={"game": lambda g: remap[g]})


def load_dataset(store: Any, feature_set: str, board_sizes: Sequence[int] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, use_cache: bool = True,
                 progress: ProgressFn | None = None,
                 content_hash: str | None = None) -> DistillDataset:
    """Encoded training arrays of ``store`` for ``feature_set`` and the given board sizes.

    ``store`` is a ``LabelStore`` (anything with ``path``, ``board_sizes()`` and
    ``records(board_size)``; ``count(board_size)`` for progress totals). Sizes default to all
    sizes in the store. With ``use_cache`` the arrays are read from, or streamed into,
    ``cache_dir`` and memory-mapped (see the module docstring); without it, or where the cache
    cannot be written, they are encoded in memory.
    ``content_hash`` overrides the label folder hash (for stores without files).
    """
    get_feature_set(feature_set)
    where = str(getattr(store, "path", "labels"))
    chash = content_hash or label_content_hash(store.path)
    sizes = sorted(store.board_sizes()) if board_sizes is None else sorted(set(board_sizes))
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    out = DistillDataset(feature_set=feature_set, content_hash=chash)
    for n in sizes:
        meta = cache_meta(chash, feature_set, n)
        path = cache_path(folder, chash, feature_set, n)
        data = load_cached(path, meta) if use_cache else None
        if data is None and use_cache:
            # a read-only or full cache folder only costs memory and the next run the encoding
            with contextlib.suppress(OSError):
                encode_to_cache(store, feature_set, n, path, meta, where, progress)
                data = load_cached(path, meta)
        if data is None:
            data = encode_records(store.records(board_size=n), feature_set, n,
                                  progress=progress, where=where)
        out.sizes[n] = data
    return out


# ---------------------------------------------------------------------------- split
def split_by_game(dataset: DistillDataset, val_fraction: float,
                  seed: int) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """(train, validation) position indices per board size; whole games go to one side.

    For each board size, ``round(val_fraction * games)`` of its games (at least 1, and leaving
    at least 1 for training, when ``val_fraction > 0`` and the size has 2+ games) are held out,
    chosen by a permutation seeded with (``seed``, size).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise KosumiError(f"--val-fraction must be in [0, 1), not {val_fraction}")
    train: dict[int, np.ndarray] = {}
    val: dict[int, np.ndarray] = {}
    for n, d in sorted(dataset.sizes.items()):
        games = len(d.games)
        n_val = 0
        if val_fraction > 0 and games >= 2:
            n_val = min(max(1, round(val_fraction * games)), games - 1)
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, n, 0x73706C6974])
        is_val = np.zeros(games, dtype=bool)
        is_val[rng.permutation(games)[:n_val]] = True
        pos_val = is_val[d.game] if len(d) else np.zeros(0, dtype=bool)
        train[n] = np.flatnonzero(~pos_val)
        val[n] = np.flatnonzero(pos_val)
    return train, val


# ---------------------------------------------------------------------------- batches
class BatchPlan:
    """The content of every global batch as a pure function of (seed, step).

    An epoch cuts each board size's training samples, in a seeded random order, into
    ``ceil(count / batch)`` batches of exactly ``batch`` samples (the last one is filled up by
    continuing the same order from its start), then shuffles all batches of all sizes together.
    A size weight w (``--size-weights``) makes that ``ceil(w * count / batch)`` batches, cut from
    ``ceil(w)`` independent orders laid end to end: w = 3 shows each sample of that size three
    times an epoch, w = 0.5 half of them; sizes without a weight have w = 1 (the plain plan).
    ``batch(step)`` -> (board size, sample indices into that size's training list, symmetries).
    """

    def __init__(self, counts: dict[int, int], batch_size: int, seed: int,
                 weights: dict[int, float] | None = None):
        if batch_size < 1:
            raise KosumiError(f"--batch must be at least 1, not {batch_size}")
        self.counts = {n: c for n, c in sorted(counts.items()) if c > 0}
        if not self.counts:
            raise KosumiError("no training positions (all positions went to the validation split)")
        self.batch_size = batch_size
        self.seed = int(seed) & 0xFFFFFFFF
        self.weights = {n: float((weights or {}).get(n, 1.0)) for n in self.counts}
        self.per_size = {n: max(1, math.ceil(self.weights[n] * c / batch_size))
                         for n, c in self.counts.items()}
        self.batches_per_epoch = sum(self.per_size.values())
        self._epoch: int | None = None
        self._layout: list[tuple[int, np.ndarray]] = []

    def _make_epoch(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        rng = np.random.default_rng([self.seed, epoch, 0x65706F6368])
        batches: list[tuple[int, np.ndarray]] = []
        for n, count in self.counts.items():
            copies = max(1, math.ceil(self.weights[n]))
            order = np.concatenate([rng.permutation(count) for _ in range(copies)])
            rows = np.resize(order, self.per_size[n] * self.batch_size)
            batches.extend((n, r) for r in rows.reshape(self.per_size[n], self.batch_size))
        shuffle = rng.permutation(len(batches))
        return [batches[i] for i in shuffle]

    def batch(self, step: int) -> tuple[int, np.ndarray, np.ndarray]:
        epoch, j = divmod(int(step), self.batches_per_epoch)
        if epoch != self._epoch:
            self._layout = self._make_epoch(epoch)
            self._epoch = epoch
        size, idx = self._layout[j]
        syms = np.random.default_rng([self.seed, int(step), 0x73796D]).integers(
            0, 8, size=self.batch_size)
        return size, idx, syms


# ---------------------------------------------------------------------------- augmentation
@cache
def symmetry_gather(size: int) -> np.ndarray:
    """[8, N*N] int64: ``transformed[:, q] = original[:, gather[sym, q]]`` for each symmetry."""
    out = np.empty((8, size * size), dtype=np.int64)
    for s in range(8):
        out[s] = np.argsort(symmetry_permutation(size, s))
    out.setflags(write=False)
    return out


_GATHER_TENSORS: dict[tuple[int, str], Any] = {}


def augment(planes: Any, policy: Any, ownership: Any | None, syms: Any,
            size: int) -> tuple[Any, Any, Any | None]:
    """Apply symmetry ``syms[i]`` (0..7) to sample i of torch tensors on any device.

    planes [B, C, N, N], policy [B, N*N+1] (pass unchanged), ownership [B, N*N] or None.
    """
    import torch

    nn = size * size
    key = (size, str(planes.device))
    table = _GATHER_TENSORS.get(key)
    if table is None:
        table = _GATHER_TENSORS[key] = torch.from_numpy(symmetry_gather(size).copy()).to(
            planes.device)
    gather = table[torch.as_tensor(np.asarray(syms, dtype=np.int64), device=planes.device)]
    b, c = planes.shape[:2]
    planes = planes.reshape(b, c, nn).gather(2, gather[:, None, :].expand(b, c, nn))
    planes = planes.reshape(b, c, size, size)
    policy = torch.cat((policy[:, :nn].gather(1, gather), policy[:, nn:]), dim=1)
    if ownership is not None:
        ownership = ownership.gather(1, gather)
    return planes, policy, ownership
