"""Labels -> training arrays for one student feature set: replay, encode, cache, split, sample.

``load_dataset(store, feature_set)`` turns a ``LabelStore`` (teacher-labelled positions) into a
``DistillDataset``: for each board size, the encoded input planes/globals of the student's
feature set and the teacher's targets (policy, win/loss/noResult, score lead, ownership).

Replay, once. Labelled positions are move sequences from a root (size, komi, rules, setup, first
player); positions of one game share prefixes, and so do games with a common opening. Positions
are grouped by root and sorted by their move sequences, then walked like a trie: a stack of
immutable snapshots holds the states along the current path, and each position continues from
the deepest snapshot that is a prefix of it. Each move of the union of all games is played about
once; states are encoded in chunks with the feature set's batch encoder.

Cache. Encoding costs far more than reading arrays, so the result for one (label content hash,
feature set, board size) is stored as an uncompressed ``.npz`` (no pickle; read with
``allow_pickle=False``) under ``cache_dir`` (default ``$KOSUMI_CACHE_DIR`` or
``~/.cache/kosumi/distill``), written atomically, and reused by later runs. The label content
hash is the SHA-256 of the label folder's ``manifest.json`` (which lists every shard with its own
SHA-256), or of every file of a folder without a manifest. A cache file that does not match its
key, or is damaged, is rebuilt.

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
import hashlib
import json
import math
import os
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.distill.shards import MANIFEST, manifest_content_hash
from kosumi.errors import KosumiError
from kosumi.fileio import atomic_writer
from kosumi.go.board import GameState, IllegalMove
from kosumi.go.coords import symmetry_permutation
from kosumi.nets.features import get_feature_set

DATASET_VERSION = 2  # 2: a collection file's games are separate games (sources keep "#i")
ENCODE_CHUNK = 512

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


# ---------------------------------------------------------------------------- identity / cache
def label_content_hash(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) identifying the content of a label folder (or file).

    A folder with a ``manifest.json``: the hash of the manifest bytes (the manifest lists every
    shard with its SHA-256, checked when shards are read). Otherwise: a hash over the sorted
    relative paths and contents of all regular files (hidden files excluded).
    """
    path = Path(path)
    h = hashlib.sha256()
    try:
        if path.is_dir() and (path / MANIFEST).is_file():
            return manifest_content_hash((path / MANIFEST).read_bytes())
        if path.is_file():
            files = [path]
            base = path.parent
        elif path.is_dir():
            base = path
            files = sorted(p for p in path.rglob("*") if p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
        else:
            raise KosumiError(f"{path}: no such label folder")
        for f in files:
            h.update(str(f.relative_to(base)).encode() + b"\0")
            with open(f, "rb") as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
            h.update(b"\0")
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    return h.hexdigest()


def default_cache_dir() -> Path:
    """``$KOSUMI_CACHE_DIR``, else ``$XDG_CACHE_HOME/kosumi/distill``, else ``~/.cache/...``."""
    env = os.environ.get("KOSUMI_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kosumi" / "distill"


def cache_path(cache_dir: str | os.PathLike[str], content_hash: str, feature_set: str,
               board_size: int) -> Path:
    """Where the encoded arrays of (labels, feature set, size) live (named by a digest of the
    whole content hash: one teacher's records of a folder get their own file)."""
    name = hashlib.sha256(content_hash.encode()).hexdigest()[:32]
    return Path(cache_dir) / f"{name}-{feature_set}-{board_size}x{board_size}.npz"


def _cache_meta(content_hash: str, feature_set: str, board_size: int) -> dict[str, Any]:
    fs = get_feature_set(feature_set)
    return {"version": DATASET_VERSION, "content_hash": content_hash,
            "feature_set": feature_set, "planes": fs.num_planes, "globals": fs.num_globals,
            "board_size": board_size}


def save_cached(path: Path, data: SizeData, meta: dict[str, Any]) -> None:
    """Write ``data`` as an uncompressed .npz with a JSON ``meta`` entry, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = data.to_arrays()
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    with atomic_writer(path) as f:
        np.savez(f, allow_pickle=True, **arrays)  # numpy's default, spelled out for mypy


def _mapped_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an uncompressed .npz, memory-mapped read-only (a member that is compressed,
    or holds objects, is read into memory instead)."""
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            name = info.filename.removesuffix(".npy")
            f.seek(info.header_offset)
            local = f.read(30)
            if info.compress_type != zipfile.ZIP_STORED or local[:4] != b"PK\x03\x04":
                out[name] = np.load(z.open(info), allow_pickle=False)
                continue
            skip = int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
            f.seek(info.header_offset + 30 + skip)
            version = np.lib.format.read_magic(f)
            header = {(1, 0): np.lib.format.read_array_header_1_0,
                      (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            shape, fortran, dtype = header(f) if header else ((0,), False, np.dtype(object))
            if dtype.hasobject or 0 in shape:
                f.seek(info.header_offset + 30 + skip)
                out[name] = np.lib.format.read_array(f, allow_pickle=False)
                continue
            out[name] = np.memmap(path, dtype=dtype, mode="r", offset=f.tell(), shape=shape,
                                  order="F" if fortran else "C")
    return out


def load_cached(path: Path, meta: dict[str, Any]) -> SizeData | None:
    """The cached arrays if ``path`` exists, is intact and matches ``meta``; else None. The
    arrays are memory-mapped from the file (read-only): training reads the positions it
    samples, the OS keeps what fits in memory, and processes on one machine (DDP ranks) share
    the pages."""
    if not path.is_file():
        return None
    try:
        arrays = _mapped_npz(path)
        stored = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if stored != meta or any(k not in arrays for k in _ARRAY_FIELDS):
        return None
    data = SizeData.from_arrays(meta["board_size"], arrays)
    m, n = len(data), meta["board_size"]
    if any(len(getattr(data, k)) != m for k in _ARRAY_FIELDS if k != "games"):
        return None
    if data.planes.shape[1:] != (meta["planes"], n, n) or data.policy.shape[1:] != (n * n + 1,):
        return None
    if (data.globals is None) != (meta["globals"] == 0):
        return None
    return data


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


def _encode_positions(fs: Any, positions: list[Any], n: int, progress: ProgressFn | None,
                      total: int) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """The input planes and globals of ``positions`` (replayed in prefix order, encoded in
    chunks of ENCODE_CHUNK) and each one's game: its source, or for positions without one
    the prefix chain it was replayed in."""
    m = len(positions)
    planes = np.zeros((m, fs.num_planes, n, n), dtype=np.uint8)
    glob = np.zeros((m, fs.num_globals), dtype=np.float32) if fs.num_globals else None
    chunk_idx: list[int] = []
    chunk_states: list[GameState] = []
    done = 0

    def flush() -> None:
        nonlocal planes, done
        if not chunk_idx:
            return
        p, g = fs.encode(chunk_states)
        if planes.dtype == np.uint8 and not np.isin(p, (0.0, 1.0)).all():
            planes = planes.astype(np.float32)  # a feature set with non-binary planes
        planes[chunk_idx] = p
        if glob is not None and g is not None:
            glob[chunk_idx] = g
        done += len(chunk_idx)
        chunk_idx.clear()
        chunk_states.clear()
        if progress is not None:
            progress(done, total)

    game_of = [_game_key(p, n) for p in positions]
    chain, prev_moves, prev_root = 0, None, None
    for i, state in replay_positions(positions):
        chunk_idx.append(i)
        chunk_states.append(state)
        if not game_of[i]:
            pos = positions[i]
            root = _root_key(pos)
            if (prev_moves is None or root != prev_root
                    or tuple(pos.moves[: len(prev_moves)]) != tuple(prev_moves)):
                chain += 1
            game_of[i] = f"{n}:#chain{chain}"
            prev_moves, prev_root = pos.moves, root
        else:
            prev_moves = None
        if len(chunk_idx) >= ENCODE_CHUNK:
            flush()
    flush()
    return planes, glob, game_of


def encode_records(records: Iterable[Any], feature_set: str, board_size: int,
                   progress: ProgressFn | None = None, total: int | None = None,
                   where: str = "labels") -> SizeData:
    """Encode label records of one board size for ``feature_set`` (see the module docstring).

    ``where`` names the label store in error messages; ``progress(done, total)`` is called as
    positions are encoded.
    """
    n = board_size
    nn = n * n
    positions: list[Any] = []
    checked = []
    for k, rec in enumerate(records):
        pos = rec.position
        label = f"{where}: record {k}" + (f" ({pos.source})" if getattr(pos, "source", "") else "")
        checked.append(_check_label(rec, n, label))
        positions.append(pos)
    m = len(positions)
    planes, glob, game_of = _encode_positions(get_feature_set(feature_set), positions, n,
                                              progress, m if total is None else total)
    keys, game = np.unique(np.array(game_of, dtype=str), return_inverse=True) if m else (
        np.array([], dtype=str), np.zeros(0, dtype=np.int64))
    score_arr = np.array([c[2] for c in checked], dtype=np.float32)
    has_score = np.isfinite(score_arr)
    has_own = np.array([c[3] is not None for c in checked], dtype=bool)
    ownership = np.zeros((m, nn), dtype=np.float32)
    for i, c in enumerate(checked):
        if c[3] is not None:
            ownership[i] = c[3]
    return SizeData(
        board_size=n,
        planes=planes,
        globals=glob,
        policy=np.stack([c[0] for c in checked]) if m else np.zeros((0, nn + 1), np.float32),
        value=np.stack([c[1] for c in checked]) if m else np.zeros((0, 3), np.float32),
        score=np.where(has_score, score_arr, 0.0).astype(np.float32),
        has_score=has_score,
        ownership=ownership,
        has_ownership=has_own,
        game=game.astype(np.int32).reshape(-1),
        games=keys,
    )


def load_dataset(store: Any, feature_set: str, board_sizes: Sequence[int] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, use_cache: bool = True,
                 progress: ProgressFn | None = None,
                 content_hash: str | None = None) -> DistillDataset:
    """Encoded training arrays of ``store`` for ``feature_set`` and the given board sizes.

    ``store`` is a ``LabelStore`` (anything with ``path``, ``board_sizes()`` and
    ``records(board_size)``). Sizes default to all sizes in the store. With ``use_cache`` the
    arrays are read from / written to ``cache_dir`` (see the module docstring).
    ``content_hash`` overrides the label folder hash (for stores without files).
    """
    get_feature_set(feature_set)
    where = str(getattr(store, "path", "labels"))
    chash = content_hash or label_content_hash(store.path)
    sizes = sorted(store.board_sizes()) if board_sizes is None else sorted(set(board_sizes))
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    out = DistillDataset(feature_set=feature_set, content_hash=chash)
    for n in sizes:
        meta = _cache_meta(chash, feature_set, n)
        path = cache_path(folder, chash, feature_set, n)
        data = load_cached(path, meta) if use_cache else None
        if data is None:
            data = encode_records(store.records(board_size=n), feature_set, n,
                                  progress=progress, where=where)
            if use_cache:
                # a read-only cache folder only costs the next run the encoding
                with contextlib.suppress(OSError):
                    save_cached(path, data, meta)
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
    ``batch(step)`` -> (board size, sample indices into that size's training list, symmetries).
    """

    def __init__(self, counts: dict[int, int], batch_size: int, seed: int):
        if batch_size < 1:
            raise KosumiError(f"--batch must be at least 1, not {batch_size}")
        self.counts = {n: c for n, c in sorted(counts.items()) if c > 0}
        if not self.counts:
            raise KosumiError("no training positions (all positions went to the validation split)")
        self.batch_size = batch_size
        self.seed = int(seed) & 0xFFFFFFFF
        self.per_size = {n: -(-c // batch_size) for n, c in self.counts.items()}
        self.batches_per_epoch = sum(self.per_size.values())
        self._epoch: int | None = None
        self._layout: list[tuple[int, np.ndarray]] = []

    def _make_epoch(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        rng = np.random.default_rng([self.seed, epoch, 0x65706F6368])
        batches: list[tuple[int, np.ndarray]] = []
        for n, count in self.counts.items():
            order = rng.permutation(count)
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
