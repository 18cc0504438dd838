"""Which of the search's rules win games: each variant of the search against the defaults.

    python benchmarks/search_ablation.py --out runs/ablation/g170-9x9-v100
        [--model PATH] [--size 9] [--komi 7] [--visits 100] [--games 100] [--concurrency 2]
        [--variants no-lcb,no-score-utility,...] [--kosumi-path SNAPSHOT] [--openings FILE]
        [--sprt elo0,elo1]

Every variant is ``kosumi gtp`` with some search settings changed (``--set name=value``, see
``VARIANTS``) playing ``kosumi gtp`` with the defaults, same net, same visits, colours swapped,
from balanced openings (``kosumi.engine.openings``; made with the net unless ``--openings``
names a book), both with KataGo's move-choice temperature. A negative Elo for a variant is what
the rule it turns off is worth. ``--kosumi-path`` runs a frozen copy of the package (a snapshot
of src/ with its built extensions) so that a long run plays one code. Resumable: one JSON per
finished variant in the run folder; ``report.json`` and stdout hold the table.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from kosumi.engine.match import play_match
from kosumi.engine.openings import balanced_openings, read_openings, write_openings
from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write

ROOT = Path(__file__).resolve().parents[1]
G170 = ROOT.parent / "shared" / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"
TEMPERATURE = "--temperature 0.5 --temperature-late 0.1 --temperature-halflife 19"

#: variant -> kosumi gtp options that turn one rule (or a group) off
VARIANTS: dict[str, str] = {
    "no-lcb": "--set lcb_stdevs=0",
    "no-score-utility": "--set static_score_utility=0 --set dynamic_score_utility=0",
    "no-value-weighting": "--set value_weight_exponent=0",
    "no-noise-pruning": "--set noise_pruning=false",
    "flat-cpuct": "--set c_puct_log=0 --set stdev_scale=0",
    "fpu-average": "--set fpu_parent_pow=-1",
    "batch-8": "--batch 8",
    # the search before KataGo's rules, as near as the settings get: plain PUCT with
    # c = 1.5 on [0, 1] values (3.0 on [-1, 1]), a first-play urgency of 0.25 (0.5) below the
    # node's own evaluation, plain averages, the most visited move
    "plain-puct": ("--set c_puct=3.0 --set c_puct_log=0 --set stdev_scale=0 "
                   "--set fpu_reduction=0.5 --set root_fpu_reduction=0.5 "
                   "--set fpu_parent_pow=1000 --set static_score_utility=0 "
                   "--set dynamic_score_utility=0 --set value_weight_exponent=0 "
                   "--set noise_pruning=false --set lcb_stdevs=0"),
}


def command(args: argparse.Namespace, extra: str) -> list[str]:
    prefix = ["env", f"PYTHONPATH={args.kosumi_path.resolve()}"] if args.kosumi_path else []
    return [*prefix, sys.executable, "-m", "kosumi", "gtp", "--model", str(args.model),
            "--visits", str(args.visits), "--batch", "1", "--threads", "1",
            *shlex.split(TEMPERATURE), "--seed", "{lane}", *shlex.split(args.common_args),
            *shlex.split(extra)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default=str(G170))
    ap.add_argument("--size", type=int, default=9)
    ap.add_argument("--komi", type=float, default=None)
    ap.add_argument("--visits", type=int, default=100)
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--common-args", default="", help="kosumi gtp options for both sides")
    ap.add_argument("--kosumi-path", type=Path, default=None)
    ap.add_argument("--openings", type=Path, default=None, help="an openings book file")
    ap.add_argument("--opening-moves", type=int, default=None)
    ap.add_argument("--sprt", default=None)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    komi = args.komi if args.komi is not None else (7.0 if args.size == 9 else 7.5)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        print(f"search_ablation: error: unknown variant(s) {', '.join(unknown)} (known: "
              f"{', '.join(VARIANTS)})", file=sys.stderr)
        return 2
    folder = args.out
    folder.mkdir(parents=True, exist_ok=True)
    book_path = folder / "openings.txt"
    try:
        if args.openings is not None:
            book = read_openings(args.openings, args.size)
        elif book_path.exists():
            book = read_openings(book_path, args.size)
        else:
            from kosumi.runtime import load_evaluator

            moves = args.opening_moves or (4 if args.size <= 9 else 8)
            ev = load_evaluator(str(args.model), threads=1)
            book = balanced_openings(ev, args.size, komi, (args.games + 1) // 2, moves,
                                     seed=args.seed)
            write_openings(book_path, book, args.size,
                           f"{len(book)} balanced openings of {moves} moves, seed {args.seed}")
        sprt = None
        if args.sprt:
            from kosumi.engine.elo import parse_sprt

            sprt = parse_sprt(args.sprt)
        rows = []
        for name in names:
            path = folder / f"{name}.json"
            if not path.exists():
                res = play_match(command(args, VARIANTS[name]), command(args, ""), args.games,
                                 size=args.size, komi=komi, swap_colors=True,
                                 sgf_dir=folder / "sgf" / name, sprt=sprt,
                                 concurrency=args.concurrency, openings=book)
                data = res.to_dict()
                data["variant"] = {"name": name, "options": VARIANTS[name]}
                atomic_write(path, json.dumps(data, indent=2).encode())
            data = json.loads(path.read_text())
            e = data["elo"]
            rows.append({"variant": name, "options": VARIANTS[name], "games": e["games"],
                         "w": e["wins"], "d": e["draws"], "l": e["losses"],
                         "score": round(e["score"], 3), "elo": round(e["elo"], 1),
                         "low": round(e["low"], 1), "high": round(e["high"], 1)})
    except KosumiError as e:
        print(f"search_ablation: error: {e}", file=sys.stderr)
        return 2
    report = {"model": str(args.model), "size": args.size, "komi": komi,
              "visits": args.visits, "variants": rows}
    atomic_write(folder / "report.json", json.dumps(report, indent=2).encode())
    print(f"\n{'variant':22} {'W-D-L':>10} {'score':>6} {'Elo (vs defaults)':>24}")
    for r in rows:
        print(f"{r['variant']:22} {r['w']}-{r['d']}-{r['l']:<4} {r['score']:6.3f} "
              f"{r['elo']:+7.0f} [{r['low']:+.0f}, {r['high']:+.0f}]")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
