"""Dead ladders run in finished games: how often each player extended a chain that a ladder takes.

    python benchmarks/dead_ladders.py FOLDER_OR_SGF [...] [--out report.json]

Replays every game (``*.sgf`` under the folders given) and counts, for each player (the SGF's
``PB`` / ``PW`` names), the moves in ``kosumi.go.ladder_planes.dead_ladder_escapes`` of the
position before them: the liberty of the mover's one-liberty chain, where extending gives exactly
two liberties and KataGo's ladder reading (``kosumi.go.ladders``) says the ladder still takes the
chain. A ladder run to its end counts once per extension. For each folder (or file) given, per
player: the games, the moves, the games with at least one, and how many of those the player
lost. A file that is not a game is a one-line error naming it (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from emit import emit

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE
from kosumi.go.ladder_planes import dead_ladder_escapes
from kosumi.go.sgf import GameRecord, load_game


def runs_in_game(game: GameRecord) -> dict[int, int]:
    """Dead-ladder extensions by colour in one game."""
    state = GameState(game.size, game.komi)
    for stone in (BLACK, WHITE):
        points = [p for color, p in game.setup if color == stone]
        if points:
            state.place_setup(stone, points, to_move=game.to_move)
    counts = {1: 0, 2: 0}
    for color, p in game.moves:
        if p != PASS and p in dead_ladder_escapes(state.board, state.size, color, state.ko):
            counts[color] += 1
        state.play(p, color)
    return counts


def count(files: list[Path]) -> dict[str, dict[str, int]]:
    """Per player name: games, dead-ladder moves, games with any, and those of them lost."""
    players: dict[str, dict[str, int]] = defaultdict(
        lambda: {"games": 0, "runs": 0, "games_with_runs": 0, "lost_with_runs": 0})
    for path in files:
        try:
            game = load_game(path)
            counts = runs_in_game(game)
        except (KosumiError, ValueError, OSError) as e:
            raise KosumiError(str(e) if str(path) in str(e) else f"{path}: {e}") from None
        winner = (game.result or "?")[:1].upper()
        for color, name in ((BLACK, game.black), (WHITE, game.white)):
            row = players[name or ("black" if color == BLACK else "white")]
            row["games"] += 1
            row["runs"] += counts[color]
            if counts[color]:
                row["games_with_runs"] += 1
                row["lost_with_runs"] += winner in "BW" and winner != "BW"[color - 1]
    return dict(players)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, metavar="FOLDER_OR_SGF")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    report: dict = {"benchmark": "dead_ladders", "sets": {}}
    for path in args.paths:
        files = sorted(path.rglob("*.sgf")) if path.is_dir() else [path]
        try:
            report["sets"][str(path)] = {"games": len(files), "players": count(files)}
        except KosumiError as e:
            print(f"dead_ladders: {e}", file=sys.stderr)
            return 2
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
