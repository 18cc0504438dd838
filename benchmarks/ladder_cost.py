"""What the ladder readings cost per position, C against Python, on the positions of real games.

    python benchmarks/ladder_cost.py FOLDER_OR_SGF [...] [--games 20] [--repeat 2] [--out F.json]

Replays the games (``*.sgf`` under the folders given, the first ``--games`` in name order) and
times, position by position in game order as the engine meets them (each position's
predecessor read just before):

- ``basic``: the ``basic`` feature set's encoder, the scale (what a position costs without
  ladders);
- ``planes``: the whole-board ladder reading of the ``basic_ladder`` planes: the C reading
  (``kosumi.go._ladders``, uncached) against the Python one with its hint (the previous
  position's reading, as ``basic_ladder`` gives it);
- ``escapes``: ``dead_ladder_escapes`` for the side to move (the search's dead-ladder rule), C
  against Python.

Each figure is the mean in microseconds per position; the implementations alternate within each
repeat, so the ratios compare in one run. Both readings must agree on every position, or the
benchmark stops with a one-line error (exit 2). JSON on stdout (and in ``--out``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from emit import emit

from kosumi.accel import extension
from kosumi.errors import KosumiError
from kosumi.go import ladder_planes
from kosumi.go.board import GameState
from kosumi.go.sgf import load_game
from kosumi.nets.features import get_feature_set


def positions(files: list[Path]) -> list[GameState]:
    """Every position of the games (before each move, and the last), in game order."""
    out: list[GameState] = []
    for path in files:
        try:
            game = load_game(path)
            game.to_state()  # every move legal, or a one-line error naming it
        except (KosumiError, ValueError, OSError) as e:
            raise KosumiError(str(e) if str(path) in str(e) else f"{path}: {e}") from None
        state = game.to_state(0)
        for color, p in game.moves:
            out.append(state.copy())
            state.play(p, color)
        out.append(state)
    return out


def _time(fn, states: list[GameState]) -> float:
    t0 = time.perf_counter()
    for s in states:
        fn(s)
    return (time.perf_counter() - t0) / len(states) * 1e6


def measure(states: list[GameState], repeat: int) -> dict[str, float]:
    c = extension("kosumi.go._ladders")
    if c is None:
        raise KosumiError("kosumi.go._ladders is not built (or KOSUMI_NO_SPEEDUPS): nothing "
                          "to compare")
    basic = get_feature_set("basic")
    prev: list[ladder_planes.LadderFeatures | None] = [None]

    def py_planes(s: GameState) -> None:
        prev[0] = ladder_planes.py_ladder_features(s.board, s.size, s.ko, hint=prev[0])

    def c_planes(s: GameState) -> None:
        c.ladder_planes(s.board, s.size, s.ko)

    def py_escapes(s: GameState) -> None:
        ladder_planes.py_dead_ladder_escapes(s.board, s.size, s.to_move, s.ko)

    def c_escapes(s: GameState) -> None:
        c.dead_ladder_escapes(s.board, s.size, s.to_move, s.ko)

    for s in states:  # the two readings agree, or nothing is measured
        py = ladder_planes.py_ladder_features(s.board, s.size, s.ko)
        captured, working = c.ladder_planes(s.board, s.size, s.ko)
        esc = np.flatnonzero(np.frombuffer(c.dead_ladder_escapes(s.board, s.size, s.to_move,
                                                                 s.ko), np.uint8))
        if (captured != py.captured.tobytes() or working != py.working.tobytes()
                or tuple(esc.tolist()) != ladder_planes.py_dead_ladder_escapes(
                    s.board, s.size, s.to_move, s.ko)):
            raise KosumiError(f"the C and Python readings differ on board {bytes(s.board).hex()}")
    runs: dict[str, list[float]] = {k: [] for k in
                                    ("basic", "planes_py", "planes_c", "escapes_py", "escapes_c")}
    for _ in range(repeat):
        runs["basic"].append(_time(lambda s: basic.encode([s]), states))
        prev[0] = None
        runs["planes_py"].append(_time(py_planes, states))
        runs["planes_c"].append(_time(c_planes, states))
        runs["escapes_py"].append(_time(py_escapes, states))
        runs["escapes_c"].append(_time(c_escapes, states))
    best = {k: round(min(v), 1) for k, v in runs.items()}
    return {**{f"{k}_us": v for k, v in best.items()},
            "planes_speedup": round(best["planes_py"] / best["planes_c"], 1),
            "escapes_speedup": round(best["escapes_py"] / best["escapes_c"], 1),
            "planes_c_over_basic": round(best["planes_c"] / best["basic"], 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, help="SGF files or folders of them")
    ap.add_argument("--games", type=int, default=20, help="the first N games (name order)")
    ap.add_argument("--repeat", type=int, default=2, help="alternations (the best is kept)")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    files: list[Path] = []
    for p in args.paths:
        files.extend(sorted(p.rglob("*.sgf")) if p.is_dir() else [p])
    files = files[:args.games]
    try:
        if not files:
            raise KosumiError(f"no .sgf file under {', '.join(map(str, args.paths))}")
        states = positions(files)
        report = {"games": len(files), "positions": len(states),
                  "sizes": sorted({s.size for s in states}),
                  **measure(states, args.repeat)}
    except KosumiError as e:
        print(f"ladder_cost: {e}", file=sys.stderr)
        return 2
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
