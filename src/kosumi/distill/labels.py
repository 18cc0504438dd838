"""Teacher labels: the teacher's full outputs on every position, in resumable shards.

``label_positions(teacher, positions_dir, out_dir)`` runs the teacher on every position of a
positions folder and stores, for each: the full policy distribution, the value as
(win, loss, noResult) for the side to move, the score lead and the ownership where the teacher
has them. ``LabelStore(out_dir)`` reads them back as ``LabelRecord`` objects (the trainer's
door) or as whole arrays per shard (``LabelStore.shards``).

Work units and resuming: each positions shard (identified by the SHA-256 of its bytes) is cut
into chunks of ``chunk_size`` positions in storage order; one chunk -> one label shard, named
``labels-<first 16 hex of the positions shard's SHA-256>-<chunk>.npz.zst``. The manifest lists
the finished units, so a run killed at any moment and run again labels exactly the missing
units: no label is lost or duplicated, and the labels are those of an uninterrupted run (the
same chunks in the same batches). Label shards are self-contained (they carry the positions),
so a label folder can be used without its positions folder.

Value conventions: ``value`` = [win, loss, noResult] for the side to move. A WDL teacher gives
its three probabilities (``Evaluation.wdl``: KataGo, kosumi nets with a wdl head); a
win-probability teacher (tanh value, ``Evaluation.value`` only) gives
[p, 1 - p, 0]. ``score_lead`` in points and ``ownership`` (+1 = side to move) as in
``Evaluation``.

Label folder layout (see ``kosumi.distill.shards``)::

    DIR/manifest.json   {"format": "kosumi-labels", "version": 1, "chunk_size": 4096,
                         "teachers": [{"name", "format", "sha256", "symmetries"}, ...],
                         "allow_mixed_teachers": false,
                         "shards": [{"file", "sha256", "count", "board_size", "teacher",
                                     "positions_sha256", "positions_file", "chunk",
                                     "has_score_lead", "has_ownership"}]}
    DIR/labels-<sha16>-<chunk>.npz.zst     one .npz (allow_pickle=False) in a zstd frame:
        keys       uint64 [M]        canonical position keys
        positions  uint8 [bytes]     the positions as JSON lines (kosumi.distill.positions)
        policy     float32 [M, N*N+1]
        value      float32 [M, 3]
        score_lead float32 [M]       (only when the teacher has it)
        ownership  float32 [M, N*N]  (only when the teacher has it)

Search targets (``visits`` > 0, ``kosumi label --visits N``): the policy stored is the teacher's
own short search instead of its raw policy -- kosumi's MCTS with the teacher's net, N root
visits, a fresh tree, no noise -- as its root's child visits over the N*N+1 moves (KataGo trains
its policy head on such visit distributions, which is how a student can come to play better than
its teacher's raw policy). Value, score lead and ownership stay the raw net's. The visits are part
of the teacher's identity (``"visits": N``), so a folder holds one kind of policy; train on both
kinds with ``kosumi distill --data RAW --data SEARCH``.

A second teacher (another file, format, symmetry count or visits) may add labels to a folder only
with ``allow_mixed_teachers=True``; the manifest then says so, and each shard names its teacher.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kosumi.distill.positions import Position, PositionStore, jsonl_to_positions, positions_to_jsonl
from kosumi.distill.shards import (
    ShardDir,
    arrays_to_bytes,
    bytes_to_arrays,
    manifest_content_hash,
)
from kosumi.distill.teacher_jobs import TeacherJobs, uncached
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.runtime.evaluator import Evaluator

LABELS_FORMAT = "kosumi-labels"
DEFAULT_CHUNK_SIZE = 4096
DEFAULT_BATCH = 256
#: the fields of a teacher's identity that decide whether two teachers are the same
IDENTITY_FIELDS = ("format", "sha256", "symmetries", "visits")  # no "visits": the raw policy


# ---------------------------------------------------------------------------- records
@dataclass
class LabelRecord:
    """One position and the teacher's outputs on it (side to move's view)."""

    position: Position
    policy: np.ndarray  # float32 [N*N+1], kosumi order, sums to 1
    value: np.ndarray  # float32 [3]: win, loss, noResult
    score_lead: float | None  # points
    ownership: np.ndarray | None  # float32 [N*N], +1 = side to move
    teacher: int = 0  # index into LabelStore.teachers
    key: int = 0  # canonical position key (kosumi.distill.positions.canonical_key)


@dataclass
class LabelShard:
    """The arrays of one label shard (all one board size), for bulk loading."""

    board_size: int
    positions: list[Position]
    keys: np.ndarray  # uint64 [M]
    policy: np.ndarray  # float32 [M, N*N+1]
    value: np.ndarray  # float32 [M, 3]
    score_lead: np.ndarray | None  # float32 [M] (NaN where missing)
    ownership: np.ndarray | None  # float32 [M, N*N]
    teacher: int = 0

    def __len__(self) -> int:
        return len(self.positions)

    def records(self) -> Iterator[LabelRecord]:
        for i, pos in enumerate(self.positions):
            lead = None if self.score_lead is None else float(self.score_lead[i])
            if lead is not None and math.isnan(lead):
                lead = None
            own = None if self.ownership is None else self.ownership[i]
            if own is not None and np.isnan(own).any():
                own = None
            yield LabelRecord(position=pos, policy=self.policy[i], value=self.value[i],
                              score_lead=lead, ownership=own, teacher=self.teacher,
                              key=int(self.keys[i]))


# ---------------------------------------------------------------------------- teacher outputs
@dataclass
class TeacherBatch:
    """A teacher's outputs for a batch of positions (the arrays of a label shard)."""

    policy: np.ndarray  # float32 [B, N*N+1]
    value: np.ndarray  # float32 [B, 3]
    score_lead: np.ndarray | None  # float32 [B]
    ownership: np.ndarray | None  # float32 [B, N*N]


def teacher_outputs(evaluator: Evaluator, states: Sequence[GameState]) -> TeacherBatch:
    """Run the teacher on a batch of same-size positions; see the module docstring for the
    value conventions."""
    n = states[0].size
    nn = n * n
    bsz = len(states)
    evals = uncached(evaluator).evaluate(states)
    policy = np.stack([e.policy for e in evals])
    if all(e.wdl is not None for e in evals):  # KataGo, kosumi wdl nets: win/loss/noResult
        wdl = np.stack([e.wdl for e in evals]).astype(np.float64)  # type: ignore[misc]
    else:  # a single win probability p: (p, 1 - p, 0)
        p = np.array([e.value for e in evals], dtype=np.float64)
        wdl = np.stack([p, 1.0 - p, np.zeros_like(p)], axis=1)
    leads = [e.score_lead for e in evals]
    owns = [e.ownership for e in evals]
    policy = policy.astype(np.float64).reshape(bsz, nn + 1)
    policy /= policy.sum(axis=1, keepdims=True)
    wdl = np.clip(wdl, 0.0, 1.0)
    wdl /= wdl.sum(axis=1, keepdims=True)
    score = None
    if any(x is not None for x in leads):
        score = np.array([np.nan if x is None else x for x in leads], dtype=np.float32)
    own = None
    if any(o is not None for o in owns):
        own = np.full((bsz, nn), np.nan, dtype=np.float32)
        for i, o in enumerate(owns):
            if o is not None:
                own[i] = o
    return TeacherBatch(policy=policy.astype(np.float32), value=wdl.astype(np.float32),
                        score_lead=score, ownership=own)


def search_batch(visits: int) -> int:
    """Leaves a search target's MCTS evaluates together: 1 for a few visits, up to 8."""
    return max(1, min(8, visits // 8))


def search_policies(evaluator: Evaluator, states: Sequence[GameState],
                    visits: int) -> np.ndarray:
    """The teacher's short search at each of same-size ``states`` (see the module docstring):
    float32 [B, N*N+1], its root's child visits as a distribution (pass last). A state where
    the search visits no move (the game is over) gets all zeros: the caller keeps the raw
    policy there."""
    from kosumi.engine.mcts import MCTS, SearchConfig
    from kosumi.go.coords import PASS

    n = states[0].size
    out = np.zeros((len(states), n * n + 1), dtype=np.float64)
    mcts = MCTS(evaluator, SearchConfig(visits=visits, batch=search_batch(visits),
                                        reuse_tree=False, seed=0))
    for i, state in enumerate(states):
        mcts.clear()
        for m in mcts.search(state).moves:
            out[i, n * n if m.move == PASS else m.move] += m.visits
    total = out.sum(axis=1, keepdims=True)
    np.divide(out, total, out=out, where=total > 0)
    return out.astype(np.float32)


def label_states(evaluator: Evaluator, states: Sequence[GameState],
                 batch: int = DEFAULT_BATCH,
                 on_batch: Callable[[int], None] | None = None,
                 visits: int = 0) -> TeacherBatch:
    """``teacher_outputs`` over same-size ``states`` in batches of ``batch``, concatenated;
    with ``visits`` > 0 the policies are ``search_policies`` (the raw one where the search
    has none)."""
    parts = []
    for start in range(0, len(states), max(1, batch)):
        chunk = states[start : start + max(1, batch)]
        part = teacher_outputs(evaluator, chunk)
        if visits > 0:
            searched = search_policies(evaluator, chunk, visits)
            found = searched.sum(axis=1) > 0
            part.policy[found] = searched[found]
        parts.append(part)
        if on_batch is not None:
            on_batch(len(chunk))

    def cat(name: str) -> np.ndarray | None:
        arrays = [getattr(p, name) for p in parts]
        if all(a is None for a in arrays):
            return None
        if any(a is None for a in arrays):  # cannot happen with one teacher; keep it safe
            raise ValueError(f"teacher gave {name} for some batches only")
        return np.concatenate(arrays)

    return TeacherBatch(policy=cat("policy"), value=cat("value"),  # type: ignore[arg-type]
                        score_lead=cat("score_lead"), ownership=cat("ownership"))


# ---------------------------------------------------------------------------- teachers
def same_teacher(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(f) == b.get(f) for f in IDENTITY_FIELDS)


def _describe_teacher(t: dict[str, Any]) -> str:
    sha = str(t.get("sha256") or "")[:12]
    policy = f", search of {t['visits']} visits" if t.get("visits") else ""
    return (f"{t.get('name')} ({t.get('format')}, sha256 {sha}..., symmetries "
            f"{t.get('symmetries')}{policy})")


# ---------------------------------------------------------------------------- reading
def _check_label_manifest(d: ShardDir) -> None:
    where = d.manifest_path
    m = d.manifest
    teachers = m.get("teachers")
    if not isinstance(teachers, list) or not all(isinstance(t, dict) for t in teachers):
        raise KosumiError(f"{where}: field 'teachers' is missing or not a list of objects")
    if d.shards and not teachers:
        raise KosumiError(f"{where}: field 'teachers' is empty but there are shards")
    if not isinstance(m.get("chunk_size"), int) or m["chunk_size"] < 1:
        raise KosumiError(f"{where}: field 'chunk_size' is missing or not a positive integer")
    for i, s in enumerate(d.shards):
        for f in ("board_size", "teacher", "chunk"):
            if not isinstance(s.get(f), int):
                raise KosumiError(f"{where}: shards[{i}] field {f!r} is missing or not an int")
        if not isinstance(s.get("positions_sha256"), str):
            raise KosumiError(f"{where}: shards[{i}] field 'positions_sha256' is missing")
        if not 0 <= s["teacher"] < len(teachers):
            raise KosumiError(f"{where}: shards[{i}] field 'teacher' = {s['teacher']} names no "
                              "teacher")


class LabelStore:
    """A label folder, read-only (see the module docstring for the layout).

    ``teacher`` is the identity of the folder's (first) teacher; ``teachers`` lists them all
    (more than one only if mixing was explicitly allowed); ``LabelRecord.teacher`` indexes it.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.dir = ShardDir(path, LABELS_FORMAT)
        self.path = self.dir.path
        _check_label_manifest(self.dir)
        self.teachers: list[dict[str, Any]] = list(self.dir.manifest["teachers"])
        self.teacher: dict[str, Any] = self.teachers[0] if self.teachers else {}
        self.mixed_teachers = bool(self.dir.manifest.get("allow_mixed_teachers", False))

    def __len__(self) -> int:
        return len(self.dir)

    def board_sizes(self, teacher: int | None = None) -> list[int]:
        """The board sizes of the labels (of teacher number ``teacher`` only, if given)."""
        return sorted({s["board_size"] for s in self.dir.shards
                       if teacher is None or s["teacher"] == teacher})

    def content_hash(self) -> str:
        """``label_content_hash`` of the folder as this store read it."""
        return manifest_content_hash(self.dir.manifest_bytes)

    def count(self, board_size: int | None = None, teacher: int | None = None) -> int:
        """The number of labelled positions (of one board size, of one teacher, if given)."""
        return sum(s["count"] for s in self.dir.shards
                   if (board_size is None or s["board_size"] == board_size)
                   and (teacher is None or s["teacher"] == teacher))

    def read_shard(self, entry: dict[str, Any]) -> LabelShard:
        """One listed shard's arrays, checked (KosumiError naming the file and array)."""
        where = self.path / entry["file"]
        arrays = bytes_to_arrays(self.dir.read_shard(entry), where)
        n = entry["board_size"]
        m = entry["count"]
        expected = {"keys": (m,), "policy": (m, n * n + 1), "value": (m, 3),
                    "score_lead": (m,), "ownership": (m, n * n)}
        for name, shape in expected.items():
            a = arrays.get(name)
            if a is None:
                if name in ("score_lead", "ownership"):
                    continue
                raise KosumiError(f"{where}: corrupted shard (array {name!r} is missing)")
            if a.shape != shape:
                raise KosumiError(f"{where}: corrupted shard (array {name!r} has shape "
                                  f"{list(a.shape)}, expected {list(shape)})")
        if "positions" not in arrays or arrays["positions"].dtype != np.uint8:
            raise KosumiError(f"{where}: corrupted shard (array 'positions' is missing)")
        items = jsonl_to_positions(arrays["positions"].tobytes(), str(where))
        if len(items) != m or [k for k, _ in items] != arrays["keys"].tolist():
            raise KosumiError(f"{where}: corrupted shard (positions do not match 'keys')")
        return LabelShard(
            board_size=n, positions=[p for _, p in items],
            keys=arrays["keys"], policy=arrays["policy"].astype(np.float32, copy=False),
            value=arrays["value"].astype(np.float32, copy=False),
            score_lead=arrays.get("score_lead"), ownership=arrays.get("ownership"),
            teacher=entry["teacher"],
        )

    def shards(self, board_size: int | None = None) -> Iterator[LabelShard]:
        """Each shard's arrays in manifest order (one shard in memory at a time)."""
        for entry in self.dir.shards:
            if board_size is None or entry["board_size"] == board_size:
                yield self.read_shard(entry)

    def records(self, board_size: int | None = None) -> Iterator[LabelRecord]:
        """Every labelled position (of one board size, or all), in manifest order."""
        for shard in self.shards(board_size):
            yield from shard.records()

    def keys(self) -> list[int]:
        """The canonical keys of every labelled position, in order."""
        return [int(k) for shard in self.shards() for k in shard.keys]


class LabelUnion:
    """Several label folders read as one (``kosumi distill --data A --data B``), with
    ``LabelStore``'s reading interface: shards in folder order, a shard listed by two folders
    (the same SHA-256, e.g. hard-linked) read once, and a content hash of the folders' hashes.
    Every folder must record the same teachers, in the same order (records index them)."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]):
        if len({os.path.realpath(p) for p in paths}) != len(paths):
            raise KosumiError(f"--data: a folder is given twice ({', '.join(map(str, paths))})")
        self.stores = [LabelStore(p) for p in paths]
        first = self.stores[0]
        for other in self.stores[1:]:
            if _teacher_ids(other) != _teacher_ids(first):
                raise KosumiError(
                    f"{other.dir.manifest_path}: labelled by {_teacher_ids(other)}, but "
                    f"{first.path} by {_teacher_ids(first)}: every --data folder needs the "
                    "same teacher (or label them into one folder with --allow-mixed-teachers)")
        self.path = " + ".join(str(s.path) for s in self.stores)
        self.teachers = first.teachers
        self.teacher = first.teacher
        self.mixed_teachers = any(s.mixed_teachers for s in self.stores)
        seen: set[str] = set()
        self._entries: list[tuple[LabelStore, dict[str, Any]]] = []
        for store in self.stores:
            for entry in store.dir.shards:
                if entry["sha256"] not in seen:
                    seen.add(entry["sha256"])
                    self._entries.append((store, entry))

    def __len__(self) -> int:
        return sum(e["count"] for _, e in self._entries)

    def board_sizes(self, teacher: int | None = None) -> list[int]:
        return sorted({e["board_size"] for _, e in self._entries
                       if teacher is None or e["teacher"] == teacher})

    def content_hash(self) -> str:
        import hashlib

        joined = "\n".join(s.content_hash() for s in self.stores)
        return hashlib.sha256(joined.encode()).hexdigest()

    def count(self, board_size: int | None = None, teacher: int | None = None) -> int:
        return sum(e["count"] for _, e in self._entries
                   if (board_size is None or e["board_size"] == board_size)
                   and (teacher is None or e["teacher"] == teacher))

    def shards(self, board_size: int | None = None) -> Iterator[LabelShard]:
        for store, entry in self._entries:
            if board_size is None or entry["board_size"] == board_size:
                yield store.read_shard(entry)

    def records(self, board_size: int | None = None) -> Iterator[LabelRecord]:
        for shard in self.shards(board_size):
            yield from shard.records()


def _teacher_ids(store: LabelStore) -> list[str]:
    return [str(t.get("sha256", t.get("name", "?")))[:16] for t in store.teachers]


def open_labels(paths: Sequence[str | os.PathLike[str]]) -> LabelStore | LabelUnion:
    """One label folder as a ``LabelStore``; several as their ``LabelUnion``."""
    if not paths:
        raise KosumiError("--data: no label folder given")
    return LabelStore(paths[0]) if len(paths) == 1 else LabelUnion(paths)


# ---------------------------------------------------------------------------- labelling
@dataclass
class LabelStats:
    """What a labelling run did."""

    labelled: int = 0  # positions labelled by this run
    shards: int = 0  # label shards written by this run
    already: int = 0  # positions found labelled before the run
    total: int = 0  # positions in the positions folder
    backend: str = ""  # the backend the teacher ran on


@dataclass(frozen=True)
class _Unit:
    """One work unit: chunk ``chunk`` of the positions shard ``entry``."""

    entry_index: int
    board_size: int
    positions_sha256: str
    positions_file: str
    chunk: int
    start: int
    stop: int

    @property
    def name(self) -> str:
        return f"labels-{self.positions_sha256[:16]}-{self.chunk:05d}.npz.zst"


def _encode_label_shard(items: Sequence[tuple[int, Position]], out: TeacherBatch) -> bytes:
    arrays: dict[str, np.ndarray] = {
        "keys": np.array([k for k, _ in items], dtype=np.uint64),
        "positions": np.frombuffer(positions_to_jsonl(items), dtype=np.uint8),
        "policy": out.policy, "value": out.value,
    }
    if out.score_lead is not None:
        arrays["score_lead"] = out.score_lead
    if out.ownership is not None:
        arrays["ownership"] = out.ownership
    return arrays_to_bytes(arrays)


def _label_items(evaluator: Evaluator, items: Sequence[tuple[int, Position]], batch: int,
                 visits: int, on_batch: Callable[[int], None] | None = None
                 ) -> tuple[bytes, bool, bool]:
    from kosumi.distill.dataset import replay_positions

    # positions of one game share their move prefixes: replay each prefix once, not every
    # position from its root (the states are the ones Position.to_state gives)
    replayed: list[GameState | None] = [None] * len(items)
    for i, state in replay_positions([p for _, p in items]):
        replayed[i] = state
    states = [s for s in replayed if s is not None]
    out = label_states(evaluator, states, batch=batch, on_batch=on_batch, visits=visits)
    return (_encode_label_shard(items, out), out.score_lead is not None,
            out.ownership is not None)


def _unit_label(teacher: Evaluator, job: tuple[list[tuple[int, Position]], int, int]
                ) -> tuple[bytes, bool, bool]:
    """A unit on a worker (``TeacherJobs``): its positions, the batch size and the visits."""
    items, batch, visits = job
    return _label_items(teacher, items, batch, visits)


def label_positions(
    teacher: str | os.PathLike[str] | Evaluator,
    positions: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    teacher_info: dict[str, Any] | None = None,
    symmetries: int = 1,
    batch: int = DEFAULT_BATCH,
    chunk_size: int | None = None,
    workers: int | None = 1,
    threads: int = 1,
    backend: str = "auto",
    device: str | None = None,
    allow_mixed_teachers: bool = False,
    progress: bool = False,
    max_shards: int | None = None,
    ray: str | None = None,
    visits: int = 0,
) -> LabelStats:
    """Label every position of ``positions`` with ``teacher`` into the folder ``out``.

    teacher       a model file (opened with ``open_teacher``), or an Evaluator (then
                  ``teacher_info`` gives its identity, and ``workers`` must be 1)
    symmetries    1..8: the teacher averages this many board symmetries
    batch         positions per forward pass
    chunk_size    positions per label shard (fixed by the folder once it has a manifest)
    workers       processes, each with its own teacher (spawned); with ``ray``: actors
                  (None = the cluster's CPUs // threads)
    ray           run the units on Ray actors (``distill.cluster``): "local", "auto" or a
                  head's address; the folder is the one a single process writes
    threads, backend, device   how the teacher runs (``runtime.LoadOptions``); the labels do
                  not depend on them beyond float rounding, so a folder may be resumed on
                  another backend
    allow_mixed_teachers  allow adding labels from a teacher other than the folder's
    max_shards    stop after writing this many shards (tests; None = all)
    visits        > 0: the policy is the teacher's search of this many visits (module
                  docstring); 0: its raw policy

    Resumable (see the module docstring). KosumiError (one line) on a missing or corrupted
    input, a manifest mismatch, a teacher that does not play a board size, or a mixed teacher.
    """
    if batch < 1:
        raise KosumiError(f"--batch must be at least 1, not {batch}")
    if not 1 <= int(symmetries) <= 8:
        raise KosumiError(f"--symmetries must be 1..8, not {symmetries}")
    if visits < 0:
        raise KosumiError(f"--visits must be >= 0 (0: the raw policy), not {visits}")
    store = PositionStore(positions)
    with TeacherJobs.open(teacher, sizes=store.board_sizes(),
                          where=f"{store.dir.manifest_path} (positions of that board size)",
                          caller="label_positions", symmetries=symmetries, threads=threads,
                          backend=backend, device=device, workers=workers, ray=ray,
                          teacher_info=teacher_info) as jobs:
        labels = ShardDir(out, LABELS_FORMAT, create=True)
        stats = LabelStats(total=len(store), backend=jobs.backend_label)
        with labels.lock():
            chunk = _label_chunk_size(labels, chunk_size)
            identity = dict(jobs.identity, **({"visits": int(visits)} if visits else {}))
            writer = _LabelWriter(labels, identity, allow_mixed_teachers, stats)
            units = _pending_units(store, labels, chunk, stats)
            if max_shards is not None:
                units = units[:max_shards]
            _label_units(jobs, store, units, writer, batch, visits, progress)
    return stats


def _label_chunk_size(labels: ShardDir, chunk_size: int | None) -> int:
    """The folder's chunk size (set from ``chunk_size`` on a new folder)."""
    m = labels.manifest
    m.setdefault("chunk_size", chunk_size or DEFAULT_CHUNK_SIZE)
    m.setdefault("teachers", [])
    _check_label_manifest(labels)
    if chunk_size is not None and chunk_size != m["chunk_size"]:
        raise KosumiError(f"{labels.manifest_path}: field 'chunk_size' is "
                          f"{m['chunk_size']}, not the {chunk_size} asked for")
    return int(m["chunk_size"])


def _pending_units(store: PositionStore, labels: ShardDir, chunk: int, stats: LabelStats
                   ) -> list[_Unit]:
    """The units (chunks of the positions shards) the folder does not have yet, in order."""
    done = {(s["positions_sha256"], s["chunk"]) for s in labels.shards}
    units: list[_Unit] = []
    for i, entry in enumerate(store.shards):
        for c in range(math.ceil(entry["count"] / chunk)):
            u = _Unit(i, entry["board_size"], entry["sha256"], entry["file"], c,
                      c * chunk, min(entry["count"], (c + 1) * chunk))
            if (u.positions_sha256, u.chunk) in done:
                stats.already += u.stop - u.start
            else:
                units.append(u)
    return units


class _LabelWriter:
    """Adds finished units to the folder under the teacher's index in its manifest."""

    def __init__(self, labels: ShardDir, identity: dict[str, Any], allow_mixed: bool,
                 stats: LabelStats) -> None:
        self.labels, self.identity, self.stats = labels, identity, stats
        teachers = labels.manifest["teachers"]
        match = [i for i, t in enumerate(teachers) if same_teacher(t, identity)]
        if match:
            self.index = match[0]
        else:
            if teachers and not allow_mixed:
                raise KosumiError(
                    f"{labels.manifest_path}: labelled by teacher {_describe_teacher(teachers[0])}"
                    f", not {_describe_teacher(identity)}; use --allow-mixed-teachers to add "
                    "labels from a different teacher")
            self.index = len(teachers)

    def commit(self, u: _Unit, result: tuple[bytes, bool, bool]) -> None:
        payload, has_score, has_own = result
        m = self.labels.manifest
        if self.index == len(m["teachers"]):  # the first shard of a new teacher
            m["teachers"].append(self.identity)
            if self.index > 0:
                m["allow_mixed_teachers"] = True
        self.labels.add_shard(u.name, payload, {
            "count": u.stop - u.start, "board_size": u.board_size,
            "teacher": self.index, "positions_sha256": u.positions_sha256,
            "positions_file": u.positions_file, "chunk": u.chunk,
            "has_score_lead": has_score, "has_ownership": has_own,
        })
        self.stats.shards += 1
        self.stats.labelled += u.stop - u.start


def _label_units(jobs: TeacherJobs, store: PositionStore, units: list[_Unit],
                 writer: _LabelWriter, batch: int, visits: int, progress: bool) -> None:
    """Run the teacher on ``units`` wherever ``jobs`` says, committing them in order."""
    from kosumi.progress import progress_bar

    cache: dict[int, list[tuple[int, Position]]] = {}

    def job_of(u: _Unit) -> tuple[list[tuple[int, Position]], int, int]:
        if u.entry_index not in cache:  # one positions shard in memory at a time
            cache.clear()
            cache[u.entry_index] = store.read_shard(store.shards[u.entry_index])
        return cache[u.entry_index][u.start : u.stop], batch, visits

    todo = sum(u.stop - u.start for u in units)
    with progress_bar(todo, "labelling", unit="pos", enabled=progress) as bar:
        alive = {"text": ""}

        def on_workers(n: int, total: int) -> None:
            alive["text"] = f"{n}/{total} workers"
            bar.advance(0, info=alive["text"])

        def commit(u: _Unit, result: tuple[bytes, bool, bool]) -> None:
            writer.commit(u, result)
            if not jobs.in_process:  # in this process, the bar moves per batch
                bar.advance(u.stop - u.start, info=alive["text"])

        def local(teacher: Evaluator, job: tuple[list[tuple[int, Position]], int, int]
                  ) -> tuple[bytes, bool, bool]:
            return _label_items(teacher, job[0], job[1], job[2], on_batch=bar.advance)

        jobs.run(units, job_of, _unit_label, commit, local=local, on_workers=on_workers)
