"""Positions for distillation: move histories in compact, deduplicated, atomically written shards.

A ``Position`` is a game prefix -- board size, komi, rules, setup stones, the first player and
the moves played -- so any feature set (with any history depth) can be computed from it later
(``Position.to_state``). Positions come from SGF collections
(``kosumi.distill.sgf_import.import_sgf``), from self-play
(``kosumi.distill.selfplay``) or from any list (``write_positions``).

Deduplication is up to symmetry: ``canonical_key(state)`` is the minimum, over the 8 board
symmetries, of a 64-bit BLAKE2b hash of (board size, komi, rules, side to move, transformed ko
point, transformed stones). The same stones with the same side to move (and ko point, komi and
rules) under any rotation or reflection give the same key; different history does not matter.
Every positions folder holds each key at most once.

Folder layout (see ``kosumi.distill.shards`` for the manifest and atomic writes)::

    DIR/manifest.json              {"format": "kosumi-positions", "version": 1,
                                    "shards": [{"file", "sha256", "count", "board_size",
                                                "groups"}],
                                    "games": {"<id prefix>": [[first, last], ...]}}
    DIR/positions-000000-9x9.jsonl.zst

Every shard holds positions of ONE board size, as zstd-compressed JSON lines. A line is a
*group*: one move history and the prefixes of it that are positions::

    {"size": 9, "komi": 7.0, "rules": "chinese", "setup": [[1, 40]], "first": 2,
     "moves": [[2, 20], [1, 21], [2, -1]], "source": "sgf:games/a.sgf",
     "at": [0, 1, 3], "keys": ["9c1f03a2b7e4d5f6", ...]}

``at[i]`` is the number of moves of position i (``moves[:at[i]]``) and ``keys[i]`` its canonical
key (16 hex digits). Colours are 1 (Black) and 2 (White); points are flat indices from the
top-left, -1 is a pass. ``games`` records which self-play games are stored (ranges of game
numbers per id prefix), so an interrupted run knows what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from kosumi.distill.shards import ShardDir
from kosumi.errors import KosumiError
from kosumi.go.board import GameState, IllegalMove, Rules
from kosumi.go.coords import BLACK, WHITE, point_to_vertex, symmetry_permutation

POSITIONS_FORMAT = "kosumi-positions"
DEFAULT_SHARD_SIZE = 4096
RULES_NAMES = ("chinese", "tromp-taylor", "positional")


# ---------------------------------------------------------------------------- rules names
def rules_name(rules: Rules | str) -> str:
    """The preset name of a ``Rules`` object ('chinese', 'tromp-taylor', 'positional')."""
    if isinstance(rules, str):
        Rules.named(rules)  # validates
        return rules
    for name in RULES_NAMES:
        if Rules.named(name) == rules:
            return name
    raise ValueError(f"rules {rules!r} match no preset ({', '.join(RULES_NAMES)})")


# ---------------------------------------------------------------------------- canonical keys
@cache
def _gathers(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(gather [8, N*N], perms [8, N*N]): ``board[gather[s]]`` is the board under symmetry s
    (``transformed[perm[p]] = board[p]``); ``perms[s][p]`` is where point p goes."""
    perms = np.stack([symmetry_permutation(size, s) for s in range(8)])
    gather = np.argsort(perms, axis=1)
    return gather, perms


def canonical_key(state: GameState) -> int:
    """The position's identity up to the 8 symmetries (a 64-bit int; see the module docstring)."""
    n = state.size
    gather, perms = _gathers(n)
    board = np.frombuffer(state.board, dtype=np.uint8)
    boards = board[gather]  # [8, N*N]
    ko = state.ko if (state.ko >= 0 and state.ko_color == state.to_move) else -1
    head = f"{n}|{state.komi!r}|{rules_name(state.rules)}|{state.to_move}|".encode()
    best = None
    for s in range(8):
        h = hashlib.blake2b(head, digest_size=8)
        h.update(b"%d|" % (int(perms[s][ko]) if ko >= 0 else -1))
        h.update(boards[s].tobytes())
        v = int.from_bytes(h.digest(), "big")
        if best is None or v < best:
            best = v
    return best  # type: ignore[return-value]


def key_hex(key: int) -> str:
    return f"{key:016x}"


# ---------------------------------------------------------------------------- Position
@dataclass(frozen=True)
class Position:
    """A position as a game prefix (see the module docstring)."""

    board_size: int
    komi: float
    rules: str  # a ``Rules.named`` preset: "chinese", "tromp-taylor", "positional"
    setup: tuple[tuple[int, int], ...]  # (color, point) setup stones
    to_move_at_start: int  # who moves first after the setup
    moves: tuple[tuple[int, int], ...]  # (color, point or PASS=-1)
    source: str = ""  # e.g. "selfplay:seed0-game000012", "sgf:games/a.sgf"

    @classmethod
    def from_state(cls, state: GameState, source: str = "") -> Position:
        """The position ``state`` is in (its setup and every move played so far)."""
        return cls(
            board_size=state.size, komi=float(state.komi), rules=rules_name(state.rules),
            setup=tuple((int(c), int(p)) for c, p in state.setup),
            to_move_at_start=int(state.start_to_move),
            moves=tuple((int(c), int(p)) for c, p in state.moves), source=source,
        )

    @property
    def to_move(self) -> int:
        """The side to move (the colour after the last move; the first player if none)."""
        return (3 - self.moves[-1][0]) if self.moves else self.to_move_at_start

    def start_state(self) -> GameState:
        """The position before the first move (setup stones placed)."""
        where = self.source or "position"
        try:
            state = GameState(self.board_size, self.komi, self.rules)
        except ValueError as e:
            raise KosumiError(f"{where}: {e}") from None
        if self.to_move_at_start not in (BLACK, WHITE):
            raise KosumiError(f"{where}: bad first player {self.to_move_at_start!r}")
        try:
            for color, p in self.setup:
                if color not in (BLACK, WHITE):
                    raise IllegalMove(f"bad setup colour {color!r}")
                state.place_setup(color, [p], to_move=self.to_move_at_start)
        except IllegalMove as e:
            raise KosumiError(f"{where}: bad setup stones: {e}") from None
        state.to_move = state.start_to_move = self.to_move_at_start
        return state

    def to_state(self) -> GameState:
        """Replay the position with kosumi's rules; KosumiError naming the source and move."""
        state = self.start_state()
        for number, (color, p) in enumerate(self.moves, start=1):
            _play(state, color, p, number, self.source)
        return state

    def key(self) -> int:
        """``canonical_key`` of the position."""
        return canonical_key(self.to_state())


def _play(state: GameState, color: int, p: int, number: int, source: str) -> None:
    try:
        if color not in (BLACK, WHITE):
            raise IllegalMove(f"bad colour {color!r}")
        state.play(p, color)
    except IllegalMove as e:
        where = point_to_vertex(p, state.size) if -1 <= p < state.size ** 2 else str(p)
        raise KosumiError(f"{source or 'position'}: move {number} ({where}) is illegal: "
                          f"{e}") from None


# ---------------------------------------------------------------------------- groups (JSON lines)
@dataclass
class _Group:
    """One JSON line: a move history and the prefixes of it that are stored positions."""

    size: int
    komi: float
    rules: str
    setup: tuple[tuple[int, int], ...]
    first: int
    moves: tuple[tuple[int, int], ...]
    source: str
    at: list[int] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)

    def header(self) -> tuple:
        return (self.size, self.komi, self.rules, self.setup, self.first, self.source)

    def to_json(self) -> str:
        return json.dumps({
            "size": self.size, "komi": self.komi, "rules": self.rules,
            "setup": [list(m) for m in self.setup], "first": self.first,
            "moves": [list(m) for m in self.moves], "source": self.source,
            "at": self.at, "keys": [key_hex(k) for k in self.keys],
        }, separators=(",", ":"))

    def positions(self) -> list[Position]:
        return [Position(self.size, self.komi, self.rules, self.setup, self.first,
                         self.moves[:k], self.source) for k in self.at]


def _pairs(value: Any) -> tuple[tuple[int, int], ...]:
    out = []
    for m in value:
        if not (isinstance(m, list) and len(m) == 2 and all(type(x) is int for x in m)):
            raise ValueError(f"bad move {m!r}")
        out.append((m[0], m[1]))
    return tuple(out)


def _parse_group(line: bytes, where: str) -> _Group:
    try:
        d = json.loads(line)
        g = _Group(
            size=int(d["size"]), komi=float(d["komi"]), rules=str(d["rules"]),
            setup=_pairs(d["setup"]), first=int(d["first"]), moves=_pairs(d["moves"]),
            source=str(d["source"]), at=[int(k) for k in d["at"]],
            keys=[int(k, 16) for k in d["keys"]],
        )
    except (ValueError, KeyError, TypeError) as e:
        raise KosumiError(f"{where}: bad position record ({e})") from None
    if len(g.at) != len(g.keys) or any(not 0 <= k <= len(g.moves) for k in g.at):
        raise KosumiError(f"{where}: bad position record (field 'at' or 'keys')")
    return g


def groups_to_jsonl(groups: Iterable[_Group]) -> bytes:
    return "".join(g.to_json() + "\n" for g in groups).encode("utf-8")


def jsonl_to_groups(data: bytes, where: str) -> list[_Group]:
    return [_parse_group(line, f"{where} line {i}")
            for i, line in enumerate(data.splitlines(), start=1) if line.strip()]


def positions_to_jsonl(items: Sequence[tuple[int, Position]]) -> bytes:
    """(key, Position) pairs -> JSON lines, consecutive prefixes of one game in one group."""
    return groups_to_jsonl(_group_positions(items))


def jsonl_to_positions(data: bytes, where: str) -> list[tuple[int, Position]]:
    """The inverse of ``positions_to_jsonl``: (key, Position) pairs in order."""
    out: list[tuple[int, Position]] = []
    for g in jsonl_to_groups(data, where):
        out.extend(zip(g.keys, g.positions(), strict=True))
    return out


def _append_position(groups: list[_Group], key: int, pos: Position) -> None:
    """Append a position to ``groups``: to the last group when it has the same game header and
    its moves and the group's are prefixes of one another, else as a new group."""
    header = (pos.board_size, float(pos.komi), pos.rules, tuple(pos.setup),
              pos.to_move_at_start, pos.source)
    g = groups[-1] if groups else None
    if g is not None and g.header() == header:
        short, long_ = sorted((g.moves, tuple(pos.moves)), key=len)
        if long_[: len(short)] == short:
            g.moves = long_
            g.at.append(len(pos.moves))
            g.keys.append(key)
            return
    groups.append(_Group(*header[:5], moves=tuple(pos.moves), source=pos.source,
                         at=[len(pos.moves)], keys=[key]))


def _group_positions(items: Sequence[tuple[int, Position]]) -> list[_Group]:
    """Pack (key, Position) pairs into groups, keeping their order."""
    groups: list[_Group] = []
    for key, pos in items:
        _append_position(groups, key, pos)
    return groups


# ---------------------------------------------------------------------------- reading
class PositionStore:
    """A positions folder, read-only: ``len``, ``board_sizes()``, ``positions()``."""

    def __init__(self, path: str | os.PathLike[str] | ShardDir):
        self.dir = path if isinstance(path, ShardDir) else ShardDir(path, POSITIONS_FORMAT)
        self.path = self.dir.path
        where = self.dir.manifest_path
        for i, s in enumerate(self.dir.shards):
            if not isinstance(s.get("board_size"), int):
                raise KosumiError(f"{where}: shards[{i}] field 'board_size' is missing")

    def __len__(self) -> int:
        return len(self.dir)

    @property
    def shards(self) -> list[dict[str, Any]]:
        return self.dir.shards

    def board_sizes(self) -> list[int]:
        return sorted({s["board_size"] for s in self.dir.shards})

    def read_shard(self, entry: dict[str, Any]) -> list[tuple[int, Position]]:
        """The (key, Position) pairs of one listed shard, checked against its manifest entry."""
        where = self.path / entry["file"]
        items = jsonl_to_positions(self.dir.read_shard(entry), str(where))
        if len(items) != entry["count"]:
            raise KosumiError(f"{where}: holds {len(items)} positions, the manifest says "
                              f"{entry['count']}")
        if any(p.board_size != entry["board_size"] for _, p in items):
            raise KosumiError(f"{where}: holds a board size other than the manifest's "
                              f"{entry['board_size']}")
        return items

    def items(self, board_size: int | None = None) -> Iterator[tuple[int, Position]]:
        """(key, Position) pairs in storage order."""
        for entry in self.dir.shards:
            if board_size is None or entry["board_size"] == board_size:
                yield from self.read_shard(entry)

    def positions(self, board_size: int | None = None) -> Iterator[Position]:
        for _, pos in self.items(board_size):
            yield pos

    def keys(self) -> set[int]:
        return {k for k, _ in self.items()}


def iter_positions(path: str | os.PathLike[str], board_size: int | None = None
                   ) -> Iterator[Position]:
    """The positions of a folder, in storage order, one shard in memory at a time."""
    return PositionStore(path).positions(board_size)


def read_positions(path: str | os.PathLike[str], board_size: int | None = None) -> list[Position]:
    """Every position of a folder (KosumiError naming the file on a missing/corrupt one)."""
    return list(iter_positions(path, board_size))


# ---------------------------------------------------------------------------- writing
def _compact_ranges(numbers: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def _expand_ranges(ranges: Any, where: str) -> set[int]:
    try:
        return {n for a, b in ranges for n in range(int(a), int(b) + 1)}
    except (TypeError, ValueError):
        raise KosumiError(f"{where}: field 'games' is malformed") from None


@dataclass
class WriteStats:
    """What a writer did: positions added, duplicates skipped, shards written."""

    added: int = 0
    duplicates: int = 0
    shards: int = 0
    games: int = 0


class PositionWriter:
    """Adds positions to a folder (created if needed), deduplicating against what it holds.

    Use as a context manager: it takes the folder's lock, reads the existing keys, and flushes
    what is pending on exit (also on an exception, so finished work is kept). Positions are
    buffered per board size and written as a shard once ``shard_size`` are pending.
    """

    def __init__(self, path: str | os.PathLike[str], shard_size: int = DEFAULT_SHARD_SIZE):
        self.dir = ShardDir(path, POSITIONS_FORMAT, create=True)
        self.path = self.dir.path
        self.shard_size = max(1, int(shard_size))
        self.stats = WriteStats()
        self._keys: set[int] = set()
        self._pending: dict[int, list[_Group]] = {}
        self._pending_count: dict[int, int] = {}
        self._pending_games: dict[int, list[tuple[str, int]]] = {}
        self._done_games: dict[str, set[int]] = {}
        self._lock: AbstractContextManager[None] | None = None

    # ------------------------------------------------------------------ context
    def __enter__(self) -> PositionWriter:
        self._lock = self.dir.lock()
        self._lock.__enter__()
        try:
            self._keys = PositionStore(self.dir).keys()
            where = str(self.dir.manifest_path)
            games = self.dir.manifest.get("games", {})
            if not isinstance(games, dict):
                raise KosumiError(f"{where}: field 'games' is malformed")
            self._done_games = {p: _expand_ranges(r, where) for p, r in games.items()}
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.flush()
        finally:
            assert self._lock is not None
            self._lock.__exit__(None, None, None)

    # ------------------------------------------------------------------ queries
    def has_key(self, key: int) -> bool:
        return key in self._keys

    def game_done(self, prefix: str, number: int) -> bool:
        """Is game ``number`` of id ``prefix`` stored (or pending in this writer)?"""
        return number in self._done_games.get(prefix, ()) or any(
            (prefix, number) in ids for ids in self._pending_games.values())

    def done_games(self, prefix: str) -> set[int]:
        return set(self._done_games.get(prefix, ())) | {
            n for ids in self._pending_games.values() for p, n in ids if p == prefix}

    # ------------------------------------------------------------------ adding
    def add_game(self, start: GameState, moves: Sequence[tuple[int, int]], source: str,
                 keep: Iterable[int] | None = None, game_id: tuple[str, int] | None = None,
                 skip_game_over: bool = True) -> int:
        """Add the positions of one game: the state after ``k`` of ``moves`` for each k in
        ``keep`` (default: every k from 0 to len(moves)), skipping finished games (two passes)
        and positions already stored. ``start`` is the position before the first move.
        ``game_id`` = (prefix, number) marks the game as stored once its shard is written.
        Returns the number of positions added."""
        wanted = set(range(len(moves) + 1) if keep is None else keep)
        state = start.copy()
        group = _Group(size=state.size, komi=float(state.komi), rules=rules_name(state.rules),
                       setup=tuple((int(c), int(p)) for c, p in state.setup),
                       first=int(state.start_to_move),
                       moves=tuple((int(c), int(p)) for c, p in moves), source=source)
        new_keys: set[int] = set()
        duplicates = 0
        for k in range(len(moves) + 1):  # nothing is recorded before the whole game replays
            if k:
                color, p = moves[k - 1]
                _play(state, color, p, k, source)
            if k not in wanted or (skip_game_over and state.is_game_over()):
                continue
            key = canonical_key(state)
            if key in self._keys or key in new_keys:
                duplicates += 1
                continue
            new_keys.add(key)
            group.at.append(k)
            group.keys.append(key)
        self._keys |= new_keys
        self.stats.duplicates += duplicates
        size = state.size
        if group.at:
            group.moves = group.moves[: max(group.at)]
            self._pending.setdefault(size, []).append(group)
            self._pending_count[size] = self._pending_count.get(size, 0) + len(group.at)
            self.stats.added += len(group.at)
        if game_id is not None:
            self.stats.games += 1
            if group.at:
                self._pending_games.setdefault(size, []).append(game_id)
            else:  # nothing to store: record it with the next manifest write
                self._done_games.setdefault(game_id[0], set()).add(game_id[1])
        if self._pending_count.get(size, 0) >= self.shard_size:
            self.flush(size)
        return len(group.at)

    def add_positions(self, positions: Iterable[Position]) -> int:
        """Add positions one by one (deduplicated); returns how many were new."""
        added = 0
        for pos in positions:
            state = pos.to_state()
            key = canonical_key(state)
            if key in self._keys:
                self.stats.duplicates += 1
                continue
            self._keys.add(key)
            size = pos.board_size
            _append_position(self._pending.setdefault(size, []), key, pos)
            self._pending_count[size] = self._pending_count.get(size, 0) + 1
            self.stats.added += 1
            added += 1
            if self._pending_count[size] >= self.shard_size:
                self.flush(size)
        return added

    # ------------------------------------------------------------------ writing
    def flush(self, board_size: int | None = None) -> None:
        """Write the pending positions (of one board size, or all) as shards."""
        sizes = list(self._pending) if board_size is None else [board_size]
        for size in sizes:
            groups = self._pending.pop(size, [])
            count = self._pending_count.pop(size, 0)
            ids = self._pending_games.pop(size, [])
            if not groups:
                continue
            # the games of this shard become "stored" in the same manifest write as the shard
            done = {p: set(ns) for p, ns in self._done_games.items()}
            for prefix, number in ids:
                done.setdefault(prefix, set()).add(number)
            old = self.dir.manifest.get("games")
            self._set_games(done)
            index = len(self.dir.shards)
            name = f"positions-{index:06d}-{size}x{size}.jsonl.zst"
            try:
                self.dir.add_shard(name, groups_to_jsonl(groups),
                                   {"count": count, "board_size": size, "groups": len(groups)})
            except BaseException:
                self._set_games(old)
                raise
            self._done_games = done
            self.stats.shards += 1
        if board_size is None and self._done_games != self._stored_games():
            self._set_games(self._done_games)
            self.dir.save_manifest()

    def _stored_games(self) -> dict[str, set[int]]:
        where = str(self.dir.manifest_path)
        return {p: _expand_ranges(r, where)
                for p, r in self.dir.manifest.get("games", {}).items()}

    def _set_games(self, games: dict[str, set[int]] | dict[str, list] | None) -> None:
        """Put ``games`` (prefix -> numbers, or already-compacted ranges) into the manifest."""
        if not games:
            self.dir.manifest.pop("games", None)
            return
        self.dir.manifest["games"] = {
            p: ns if isinstance(ns, list) else _compact_ranges(ns)
            for p, ns in sorted(games.items())}


def write_positions(path: str | os.PathLike[str], positions: Iterable[Position],
                    shard_size: int = DEFAULT_SHARD_SIZE) -> WriteStats:
    """Add ``positions`` to the folder at ``path`` (created if needed), skipping positions it
    already holds up to symmetry; returns what was done."""
    with PositionWriter(path, shard_size=shard_size) as w:
        w.add_positions(positions)
    return w.stats
