"""Ladders of a whole board: ``ladder_features``, the reading behind KataGo's V7 ladder planes.

``cached_ladder_features(board, size, ko)``: a cached reading or None (a cheap ``hint``).

``dead_ladder_escapes(board, size, color, ko)``: the moves that would run a dead ladder (the
search's prior for them, ``SearchConfig.ladder_escape_prior``).

``ladder_features(board, size, ko)`` reads a whole board the way the V7 planes (14-17) need it:
every chain with 1 or 2 liberties, once, with the ladder search of ``kosumi.go.ladders``. Given
the result for a nearby board (``hint``), a chain's verdict is reused when none of the points its
reading looked at (and their neighbours) changed; results are also cached by position (boards
repeat across the history planes of consecutive positions).

Both readings are C (``kosumi.go._ladders``, the same search move for move, 16-32x faster)
when it is built; ``py_ladder_features`` and ``py_dead_ladder_escapes`` are the Python versions,
which the C one is checked against (``KOSUMI_NO_SPEEDUPS=1`` before the first import forces
them). The C reading is fast enough to need no ``hint``: it ignores it.

Boards are N*N buffers (bytes/bytearray/uint8 numpy) row-major from the top-left, 0 empty,
1 black, 2 white; points are flat indices; ``ko`` is the simple-ko point or -1.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from types import ModuleType
from typing import TypeVar

import numpy as np

from kosumi.accel import extension
from kosumi.go import board_kernels
from kosumi.go.ladders import LadderBoard, captured_defender_first, working_moves

_CACHE_SIZE = 2048  # boards
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class _ChainRecord:
    """One chain's ladder verdict and what it depended on."""

    captured: bool
    working: tuple[int, ...]  # flat points
    libs: tuple[int, ...]  # padded locations of its liberties (the root ko matters only there)
    reads: bytes  # the padded locations the reading looked around (packed uint16)


@dataclass(frozen=True)
class LadderFeatures:
    """Ladder status of a whole board.

    captured   bool [N*N]: stones of chains with 1 or 2 liberties that are ladder-captured (a
               1-liberty chain with its owner to move; a 2-liberty chain with the attacker to move)
    working    uint8 [3, N*N]: ``working[c]`` marks the attacker's moves that ladder-capture a
               2-liberty chain of colour ``c`` (row 0 unused)
    """

    captured: np.ndarray
    working: np.ndarray
    size: int = 0
    board: bytes = b""
    ko: int = 0  # padded location of the ko point, 0 for none
    records: dict[tuple[int, ...], _ChainRecord] = field(default_factory=dict, repr=False)


_c: ModuleType | None = extension("kosumi.go._ladders")
#: the readings are the C extension's (else the ``py_`` versions)
HAVE_C: bool = _c is not None

_cache: OrderedDict[tuple[int, int, bytes], LadderFeatures] = OrderedDict()
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget cached ``ladder_features`` and ``dead_ladder_escapes`` results."""
    with _cache_lock:
        _cache.clear()
        _escapes.clear()


def _lru_get(cache: OrderedDict[K, V], key: K) -> V | None:
    with _cache_lock:
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
        return hit


def _lru_put(cache: OrderedDict[K, V], key: K, value: V) -> None:
    with _cache_lock:
        cache[key] = value
        if len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)


def _reusable(rec: _ChainRecord, diff: list[int], w: int, ko_old: int, ko_new: int) -> bool:
    """Does ``rec`` still hold on a board that differs from its own only at ``diff``?

    Every verdict is a function of the contents of the locations the reading looked at and of
    their neighbours, plus -- for the attacker's first move -- whether the root ko point is one
    of the chain's liberties."""
    reads = set(array("H", rec.reads))
    for d in diff:
        if d in reads or d - 1 in reads or d + 1 in reads or d - w in reads or d + w in reads:
            return False
    return ko_old == ko_new or (ko_old not in rec.libs and ko_new not in rec.libs)


def ladder_features(board: bytes | bytearray, size: int, ko: int = -1, cache: bool = True,
                    hint: LadderFeatures | None = None) -> LadderFeatures:
    """Ladder-captured stones and ladder-working moves of every 1-2 liberty chain on ``board``.

    ``hint``: the result for another board of the same size (typically one move apart); the
    Python reading reuses the verdict of a chain with the same stones when nothing it read has
    changed, so nearby boards cost little (the C reading needs no hint). Results are also
    cached by (size, board, ko) in an LRU of 2048 boards. The returned arrays are read-only."""
    b = bytes(board)
    key = (size, ko, b)
    if cache:
        hit = _lru_get(_cache, key)
        if hit is not None:
            return hit
    if _c is not None:
        captured, working = _c.ladder_planes(b, size, ko)
        nn = size * size
        w = size + 2
        result = LadderFeatures(np.frombuffer(captured, dtype=bool),
                                np.frombuffer(working, dtype=np.uint8).reshape(3, nn), size, b,
                                (ko // size + 1) * w + ko % size + 1 if ko >= 0 else 0)
    else:
        result = py_ladder_features(b, size, ko, hint)
    if cache:
        _lru_put(_cache, key, result)
    return result


def py_ladder_features(board: bytes | bytearray, size: int, ko: int = -1,
                       hint: LadderFeatures | None = None) -> LadderFeatures:
    """``ladder_features``'s Python reading (uncached), with the ``hint``'s reuse."""
    b = bytes(board)
    nn = size * size
    libs = board_kernels.chain_liberties(b, size)  # bytes: liberties of each stone's chain
    captured = bytearray(nn)
    working = bytearray(3 * nn)
    records: dict[tuple[int, ...], _ChainRecord] = {}
    lb = LadderBoard(b, size, ko)
    cand = [p for p in range(nn) if 0 < libs[p] <= 2] if libs.count(1) + libs.count(2) else []
    if cand:
        to_loc, to_pt, w = lb.to_loc, lb.to_pt, lb.w
        diff: list[int] = []
        old_records: dict[tuple[int, ...], _ChainRecord] = {}
        old_ko = 0
        if hint is not None and hint.size == size and len(hint.board) == nn:
            old_records, old_ko = hint.records, hint.ko
            hb = hint.board
            diff = [to_loc[p] for p in range(nn) if hb[p] != b[p]]
        done = bytearray(nn)
        for p in cand:
            if done[p]:
                continue
            loc = to_loc[p]
            lb.reads = set()
            stones, chain_libs = lb.chain(loc)
            pts = sorted(to_pt[s] for s in stones)
            for q in pts:
                done[q] = 1
            rkey = tuple(pts)
            rec = old_records.get(rkey)
            if rec is None or not _reusable(rec, diff, w, old_ko, lb.ko):
                if libs[p] == 1:
                    taken = captured_defender_first(lb, loc)
                    moves: tuple[int, ...] = ()
                else:
                    moves = tuple(sorted(to_pt[m] for m in working_moves(lb, loc)))
                    taken = bool(moves)
                rec = _ChainRecord(taken, moves, tuple(chain_libs),
                                   array("H", lb.reads).tobytes())
            records[rkey] = rec
            if rec.captured:
                for q in pts:
                    captured[q] = 1
                base = b[p] * nn
                for m in rec.working:
                    working[base + m] = 1
    result = LadderFeatures(np.frombuffer(bytes(captured), dtype=bool),
                            np.frombuffer(bytes(working), dtype=np.uint8).reshape(3, nn),
                            size, b, lb.ko, records)
    return result


def cached_ladder_features(board: bytes | bytearray, size: int,
                           ko: int = -1) -> LadderFeatures | None:
    """``ladder_features`` of a board read before and still in the cache, else None (a free
    ``hint`` for the next board: the previous position's reading when it was made)."""
    return _lru_get(_cache, (size, ko, bytes(board)))


_escapes: OrderedDict[tuple[int, int, int, bytes], tuple[int, ...]] = OrderedDict()


def dead_ladder_escapes(board: bytes | bytearray, size: int, color: int,
                        ko: int = -1) -> tuple[int, ...]:
    """The liberties of ``color``'s one-liberty chains that are captured in a ladder with
    ``color`` to move, where extending gives the chain exactly two liberties: playing there only
    runs the ladder (and loses more stones), sorted. Extensions into one liberty (self-atari,
    some of them sacrifices that gain) and captures that escape are not among them.

    Cheap when ``color`` has no chain in atari (one pass of the liberty kernel); results are
    cached by (size, color, ko, board) in an LRU of 2048 boards."""
    b = bytes(board)
    key = (size, color, ko, b)
    hit = _lru_get(_escapes, key)
    if hit is not None:
        return hit
    if _c is not None:
        result = tuple(np.flatnonzero(np.frombuffer(_c.dead_ladder_escapes(b, size, color, ko),
                                                    dtype=np.uint8)).tolist())
    else:
        result = py_dead_ladder_escapes(b, size, color, ko)
    _lru_put(_escapes, key, result)
    return result


def py_dead_ladder_escapes(board: bytes | bytearray, size: int, color: int,
                           ko: int = -1) -> tuple[int, ...]:
    """``dead_ladder_escapes``'s Python reading (uncached)."""
    b = bytes(board)
    libs = board_kernels.chain_liberties(b, size)
    out: set[int] = set()
    if libs.count(1):
        lb = LadderBoard(b, size, ko)
        done = bytearray(size * size)
        for p in range(size * size):
            if libs[p] != 1 or b[p] != color or done[p]:
                continue
            loc = lb.to_loc[p]
            stones, chain_libs = lb.chain(loc)
            for s in stones:
                done[lb.to_pt[s]] = 1
            lib = chain_libs[0]
            if not lb.is_legal(lib, color):
                continue
            record = lb.play(lib, color)
            runs = lb.libs_upto(lib, 3) == 2  # the extension itself gains no more than one
            lb.undo(lib, color, record)
            if runs and captured_defender_first(lb, loc):
                out.add(lb.to_pt[lib])
    return tuple(sorted(out))
