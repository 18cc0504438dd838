"""Openings for matches: short move lists that games start from, each played with both colours.

Two deterministic engines replay the same game again and again (at low temperatures the move
choice hardly varies), so a match of N games can hold far fewer than N different games. Like
cutechess-cli's opening books, a match can start its games from different balanced openings:
``kosumi match --openings FILE`` (and ``play_match(openings=...)``) gives game pair i opening i.

The file format is text, one opening per line: GTP vertices separated by spaces, Black first,
colours alternating (``pass`` allowed); empty lines and lines starting with ``#`` are skipped.
``balanced_openings`` makes such a book from a network: moves sampled from its raw policy, kept
when the net still sees the position as balanced.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write
from kosumi.go.board import GameState, IllegalMove
from kosumi.go.coords import PASS, point_to_vertex, vertex_to_point
from kosumi.runtime.evaluator import Evaluator

Opening = tuple[int, ...]


def check_openings(openings: Sequence[Sequence[int]], size: int, komi: float) -> list[Opening]:
    """The openings as tuples, each replayed from the empty board (KosumiError naming the
    opening and move that is illegal or ends the game)."""
    book: list[Opening] = []
    for n, opening in enumerate(openings, 1):
        state = GameState(size, komi)
        for k, p in enumerate(opening, 1):
            try:
                state.play(int(p))
            except (IllegalMove, ValueError) as e:
                raise KosumiError(f"opening {n}, move {k}: {e}") from None
            if state.passes >= 2:
                raise KosumiError(f"opening {n}, move {k}: two passes end the game")
        book.append(tuple(int(p) for p in opening))
    return book


def read_openings(path: str | os.PathLike[str], size: int) -> list[Opening]:
    """The openings of a book file (see the module docstring); KosumiError names the file and
    line of a bad vertex."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise KosumiError(f"{path}: cannot read the openings: {getattr(e, 'strerror', e)}") \
            from None
    book: list[Opening] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        moves = []
        for token in line.split():
            try:
                p = vertex_to_point(token, size)
            except ValueError:
                raise KosumiError(f"{path}:{lineno}: {token!r} is not a vertex on a "
                                  f"{size}x{size} board") from None
            if p < PASS:
                raise KosumiError(f"{path}:{lineno}: {token!r} is not a move")
            moves.append(p)
        book.append(tuple(moves))
    if not book:
        raise KosumiError(f"{path}: no openings in the file")
    return book


def format_openings(book: Sequence[Sequence[int]], size: int) -> str:
    return "".join(" ".join(point_to_vertex(p, size) for p in o) + "\n" for o in book)


def write_openings(path: str | os.PathLike[str], book: Sequence[Sequence[int]],
                   size: int, header: str = "") -> None:
    lines = "".join(f"# {h}\n" for h in header.splitlines() if h)
    atomic_write(path, (lines + format_openings(book, size)).encode())


def balanced_openings(evaluator: Evaluator, size: int, komi: float, count: int, moves: int,
                      seed: int = 0, max_gap: float = 0.15, temperature: float = 1.0,
                      max_tries: int = 100) -> list[Opening]:
    """``count`` different openings of ``moves`` moves: each move sampled from the net's raw
    policy (pass excluded) at ``temperature``, an opening kept when the net's win rate for the
    side to move after it is within ``max_gap`` of 0.5. KosumiError when ``max_tries`` times
    ``count`` attempts do not find enough."""
    rng = np.random.default_rng(seed)
    book: list[Opening] = []
    seen: set[tuple[bytes, int]] = set()
    for _ in range(max_tries * count):
        if len(book) == count:
            break
        state = GameState(size, komi)
        opening: list[int] = []
        for _ in range(moves):
            ev = evaluator.evaluate([state])[0]
            pol = np.asarray(ev.policy[:-1], dtype=np.float64)
            if pol.sum() <= 0:
                break
            if temperature != 1.0:
                pol = np.where(pol > 0, pol ** (1.0 / temperature), 0.0)
            p = int(rng.choice(len(pol), p=pol / pol.sum()))
            state.play(p)
            opening.append(p)
        if len(opening) < moves:
            continue
        key = (bytes(state.board), state.to_move)
        if key in seen:
            continue
        value = evaluator.evaluate([state])[0].value
        if abs(float(value) - 0.5) > max_gap:
            continue
        seen.add(key)
        book.append(tuple(opening))
    if len(book) < count:
        raise KosumiError(f"found {len(book)} balanced openings of {moves} moves, not {count} "
                          f"(max_gap {max_gap})")
    return book
