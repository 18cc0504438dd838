"""Visit for visit: kosumi's search and KataGo's, deterministic, same net, through a game.

    python benchmarks/search_parity.py [--visits 100] [--games 4] [--moves 40] [--no-reuse]
        [--size 9] [--komi K] [--kosumi-set NAME=VALUE ...] [--katago-override KEY=VALUE,...]
        [--out report.json]

Both engines play both colours of the same games from the balanced openings of
``kosumi.engine.openings`` (made once with the g170 net), ``kata-genmove_analyze`` for every
move, with nothing random: KataGo with ``nnRandomize=false`` (the identity symmetry, as kosumi's
default), no root symmetry pruning and no move-choice temperature; kosumi at batch 1. After each
move the root moves' visit counts are compared (and, as ``identical_lines``, every root move's
principal variation with the visits of each node and edge along it: where the trees part below
the root); a game stops where the engines choose different
moves. Identical algorithms give identical counts (up to floating-point ties). ``--no-reuse``
starts every search afresh (KataGo's ``clear_cache``, kosumi's ``reuse_tree=false``), which
isolates what tree reuse and KataGo's situation-keyed evaluation cache add. Settings for both
sides, e.g. ``--kosumi-set subtree_bias_factor=0 --katago-override subtreeValueBiasFactor=0``.
Prints one JSON object. KataGo (``../shared/engines``) needs ``apt-get install -y libzip4``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from emit import emit
from root_parity import G170, KATAGO, KATAGO_CFG, last_info

from kosumi.engine.gtp_client import EngineError, GTPProcess
from kosumi.engine.openings import balanced_openings
from kosumi.go.coords import point_to_vertex
from kosumi.runtime import load_evaluator

KATAGO_FIXED = "nnRandomize=false,rootSymmetryPruning=false,chosenMoveTemperatureEarly=0," \
               "chosenMoveTemperature=0"


def genmove(proc: GTPProcess, color: str) -> tuple[str, dict[str, int], dict[str, str]]:
    """The move played, each root move's visits, and each root move's line below it (its pv
    with the visits of every node and edge along it: where the trees differ below the root)."""
    reply = proc.send(f"kata-genmove_analyze {color} 100000 pvVisits true pvEdgeVisits true",
                      timeout=600)
    move = reply.strip().splitlines()[-1].split()[-1].upper()
    lines = [ln for ln in reply.splitlines() if ln.startswith("info ")]
    deep = {}
    for chunk in (lines[-1].split("info ")[1:] if lines else []):
        tok = chunk.split()
        deep[tok[1].upper()] = " ".join(tok[tok.index("pv"):]).upper()
    return move, {m["move"].upper(): int(m["visits"]) for m in last_info(reply)}, deep


def play_game(kos: GTPProcess, kata: GTPProcess, opening: tuple[int, ...], moves: int,
              reuse: bool, size: int = 9, komi: float = 7.0) -> dict:
    """One game from ``opening``: per move, whether the visit counts agree."""
    for proc in (kos, kata):
        for cmd in (f"boardsize {size}", f"komi {komi:g}", "clear_board"):
            proc.send(cmd, timeout=60)
        for i, p in enumerate(opening):
            proc.send(f"play {'BW'[i % 2]} {point_to_vertex(p, size)}", timeout=60)
    same, deep_same, first_diff, first_deep, played = 0, 0, None, None, 0
    for k in range(len(opening), moves):
        color = "BW"[k % 2]
        move_a, visits_a, deep_a = genmove(kos, color)
        if not reuse:
            kata.send("clear_cache", timeout=60)
        move_b, visits_b, deep_b = genmove(kata, color)
        played += 1
        same += visits_a == visits_b
        deep_same += visits_a == visits_b and deep_a == deep_b
        if visits_a != visits_b and first_diff is None:
            first_diff = {"move": k, "kosumi": visits_a, "katago": visits_b}
        if deep_a != deep_b and first_deep is None:
            first_deep = {"move": k, **{m: {"kosumi": deep_a.get(m), "katago": deep_b.get(m)}
                                        for m in sorted(set(deep_a) | set(deep_b))
                                        if deep_a.get(m) != deep_b.get(m)}}
        if move_a != move_b or move_a in ("PASS", "RESIGN"):
            break
    return {"searches": played, "identical": same, "identical_lines": deep_same,
            "first_difference": first_diff, "first_line_difference": first_deep}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--visits", type=int, default=100)
    ap.add_argument("--games", type=int, default=4)
    ap.add_argument("--moves", type=int, default=40, help="stop each game at this move")
    ap.add_argument("--no-reuse", action="store_true", help="every search starts afresh")
    ap.add_argument("--kosumi-set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--katago-override", default="", metavar="KEY=VALUE,...")
    ap.add_argument("--size", type=int, default=9)
    ap.add_argument("--komi", type=float, default=None, help="default: 7 (9x9), 7.5 (19x19)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    komi = args.komi if args.komi is not None else (7.0 if args.size < 19 else 7.5)
    if not KATAGO.exists() or not G170.exists():
        print(f"search_parity: error: needs {KATAGO} and {G170}", file=sys.stderr)
        return 2
    sets = [*args.kosumi_set, *(["reuse_tree=false"] if args.no_reuse else [])]
    kosumi_cmd = [sys.executable, "-m", "kosumi", "gtp", "--model", str(G170), "--visits",
                  str(args.visits), "--batch", "1", "--threads", "1", "--resign-threshold", "0",
                  "--set", "ladder_escape_prior=1",  # KataGo has no such rule
                  *[a for s in sets for a in ("--set", s)]]
    override = ",".join(x for x in (f"maxVisits={args.visits}", KATAGO_FIXED,
                                    args.katago_override) if x)
    katago_cmd = [str(KATAGO), "gtp", "-model", str(G170), "-config", str(KATAGO_CFG),
                  "-override-config", override]
    book = balanced_openings(load_evaluator(str(G170), threads=1), args.size, komi, args.games,
                             4, seed=1)
    games = []
    try:
        with GTPProcess(kosumi_cmd, name="kosumi") as kos, \
                GTPProcess(katago_cmd, name="katago") as kata:
            for opening in book:
                games.append(play_game(kos, kata, opening, args.moves, not args.no_reuse,
                                       args.size, komi))
    except EngineError as e:
        print(f"search_parity: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    report = {"size": args.size, "komi": komi, "visits": args.visits,
              "reuse": not args.no_reuse, "kosumi_set": sets,
              "katago_override": args.katago_override,
              "searches": sum(g["searches"] for g in games),
              "identical": sum(g["identical"] for g in games),
              "identical_lines": sum(g["identical_lines"] for g in games), "games": games}
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
