"""A strength ladder: any set of nets rated against the real KataGo and GNU Go, resumable.

    python benchmarks/strength_ladder.py NET [NET ...] --out runs/ladder
        [--size 9] [--games 40] [--concurrency 2] [--visits 100]
        [--rungs katago:1,katago:8,katago:100,equal-time:100,gnugo:10]
        [--katago-model PATH] [--kosumi-args "--backend onnxruntime"] [--openings 50]

Each NET (``default``, ``tiny`` or any model file kosumi reads; ``NAME=PATH`` names it) plays
``kosumi gtp`` at ``--visits`` against each rung, colours swapped, from balanced openings (made
once per run folder with KataGo's net's raw policy), kosumi with KataGo's GTP move-choice
temperature, both sides resigning under 5% for 3 moves:

- ``katago:V``: KataGo v1.17.2 (``../shared/engines``, its GTP config) running
  ``--katago-model`` (KataGo's g170 b6c96, the teacher of kosumi's nets, by default) at V
  visits (1: its raw policy);
- ``equal-time:V``: KataGo at V visits, and the net at the visits that fill KataGo's time per
  move, from both engines' visits per second measured in this run (``vs_katago``'s probe);
- ``gnugo:L``: GNU Go 3.8 at level L.

The games of each net and rung go in ``OUT/NET/RUNG/chunk-*.json`` (``kosumi match --json``'s
format) as they finish: run the same command again to go on, or with more ``--games``. Then
``OUT/ladder-RUNG.json`` is each rung's strength table (``kosumi.engine.strength``: W-D-L,
Elo with its 95% interval, parameters and bytes per net), which ``kosumi viz NET --strength
OUT/ladder-RUNG.json`` draws, and ``OUT/ladder.json`` the whole ladder; a Markdown table is
printed. Not part of CI: a ladder of a few nets takes hours. KataGo needs ``apt-get install -y
libzip4``; GNU Go is ``apt-get install -y gnugo``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path

from emit import emit
from vs_katago import (
    G170,
    KATAGO,
    KATAGO_CFG,
    KATAGO_RESIGN,
    KATAGO_TEMPERATURE,
    load_chunks,
    visits_per_second,
)

from kosumi.engine.match import play_match
from kosumi.engine.openings import balanced_openings, read_openings, write_openings
from kosumi.engine.strength import strength_row, write_strength_table
from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write

GNUGO = "/usr/games/gnugo"


def fail(message: str) -> None:
    print(f"strength_ladder: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_rungs(text: str) -> list[tuple[str, int]]:
    """``katago:1,equal-time:100,gnugo:10`` -> [(kind, number), ...]; exits 2 on a bad one."""
    rungs = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        kind, _, num = item.partition(":")
        if kind not in ("katago", "equal-time", "gnugo") or not num.isdigit() or int(num) < 1:
            fail(f"--rungs: {item!r} is not katago:VISITS, equal-time:VISITS or gnugo:LEVEL")
        rungs.append((kind, int(num)))
    if not rungs:
        fail("--rungs names no rung")
    return rungs


def parse_nets(specs: list[str]) -> list[tuple[str, str]]:
    """``NAME=PATH`` or a model (named by its file stem); exits 2 on a duplicate name."""
    nets: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, model = spec.partition("=")
        if not sep:
            name, model = Path(spec).name.split(".")[0], spec
        if any(n == name for n, _ in nets):
            fail(f"two nets are named {name!r}: give NAME=PATH")
        nets.append((name, model))
    return nets


def katago_command(args: argparse.Namespace, visits: int) -> list[str]:
    return [str(args.katago), "gtp", "-model", str(args.katago_model), "-config",
            str(args.config), "-override-config", f"maxVisits={visits},{KATAGO_RESIGN}"]


def kosumi_command(args: argparse.Namespace, model: str, visits: int) -> list[str]:
    return [sys.executable, "-m", "kosumi", "gtp", "--model", model, "--visits", str(visits),
            "--threads", "1", *KATAGO_TEMPERATURE, "--seed", "{lane}",
            *shlex.split(args.kosumi_args)]


def opponent(args: argparse.Namespace, kind: str, num: int) -> list[str]:
    if kind == "gnugo":
        return [GNUGO, "--mode", "gtp", "--level", str(num), "--chinese-rules"]
    return katago_command(args, num)


def net_visits(args: argparse.Namespace, folder: Path, model: str, kind: str, num: int,
               book: list[tuple[int, ...]]) -> int:
    """The net's visits on this rung: ``--visits``, or at equal time those that fill KataGo's
    time per move (measured once per folder, kept in speed.json)."""
    if kind != "equal-time":
        return int(args.visits)
    path = folder / "speed.json"
    if not path.exists():
        positions = [list(o) for o in book[:12]]
        kata = visits_per_second(katago_command(args, num), "katago", positions, args.size,
                                 args.komi, num)
        kos = visits_per_second(kosumi_command(args, model, num), "kosumi", positions,
                                args.size, args.komi, num)
        visits = max(1, round(num * kos["visits_per_s"] / kata["visits_per_s"]))
        atomic_write(path, json.dumps({"katago": kata, "kosumi_probe": kos,
                                       "kosumi_visits": visits}, indent=2).encode())
    return int(json.loads(path.read_text())["kosumi_visits"])


def play_rung(args: argparse.Namespace, name: str, model: str, kind: str, num: int,
              book: list[tuple[int, ...]]) -> list[Path]:
    """The games of one net on one rung, ``--chunk`` at a time; the chunk files."""
    folder = args.out / name / f"{kind}-{num}"
    folder.mkdir(parents=True, exist_ok=True)
    visits = net_visits(args, folder, model, kind, num, book)
    chunks = load_chunks(folder)
    pairs = sum(len(c["games"]) for c in chunks) // 2
    while pairs * 2 < args.games:
        n = min(args.chunk, args.games - pairs * 2)
        segment = [book[(pairs + j) % len(book)] for j in range(n // 2 + 1)]
        print(f"{name} vs {kind}:{num} ({visits} visits): games {pairs * 2 + 1}-"
              f"{pairs * 2 + n} of {args.games}", file=sys.stderr)
        try:
            res = play_match(kosumi_command(args, model, visits), opponent(args, kind, num), n,
                             size=args.size, komi=args.komi, swap_colors=True,
                             sgf_dir=folder / "sgf" / f"chunk-{len(chunks) + 1:03d}",
                             move_timeout=600.0, progress=False,
                             concurrency=min(args.concurrency, n), openings=segment)
        except KosumiError as e:
            fail(str(e))
        data = res.to_dict()
        atomic_write(folder / f"chunk-{len(chunks) + 1:03d}.json",
                     json.dumps(data, indent=2).encode())
        chunks.append(data)
        pairs += n // 2
    return sorted(folder.glob("chunk-*.json"))


def markdown(ladder: dict) -> str:
    rungs = ladder["rungs"]
    lines = ["| net | bytes | " + " | ".join(rungs) + " |",
             "|---|---|" + "---|" * len(rungs)]
    for net in ladder["nets"]:
        cells = []
        for rung in rungs:
            r = ladder["results"][rung].get(net)
            cells.append("" if r is None else f"{r['wins']}-{r['draws']}-{r['losses']}, "
                         f"{r['score']:.2f}, {r['elo']:+.0f} [{r['low']:+.0f}, {r['high']:+.0f}]")
        size = next((r["bytes"] for rr in ladder["results"].values() for n, r in rr.items()
                     if n == net), "")
        lines.append(f"| {net} | {size} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nets", nargs="+", metavar="NET", help="default, tiny, a file, NAME=PATH")
    ap.add_argument("--out", type=Path, required=True, help="run folder (resumable)")
    ap.add_argument("--size", type=int, default=9)
    ap.add_argument("--komi", type=float, default=None)
    ap.add_argument("--games", type=int, default=40, help="per net and rung (even)")
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--visits", type=int, default=100, help="the nets' visits")
    ap.add_argument("--rungs", default="katago:1,katago:8,katago:100,equal-time:100,gnugo:10")
    ap.add_argument("--katago", type=Path, default=KATAGO)
    ap.add_argument("--config", type=Path, default=KATAGO_CFG)
    ap.add_argument("--katago-model", type=Path, default=G170)
    ap.add_argument("--kosumi-args", default="", help="more kosumi gtp options")
    ap.add_argument("--openings", type=int, default=50)
    args = ap.parse_args()
    args.komi = args.komi if args.komi is not None else (7.0 if args.size <= 9 else 7.5)
    if args.games < 2 or args.games % 2 or args.chunk < 2 or args.chunk % 2:
        fail("--games and --chunk must be even and >= 2")
    args.rung_list = parse_rungs(args.rungs)
    args.net_list = parse_nets(args.nets)
    kinds = {k for k, _ in args.rung_list}
    if kinds - {"gnugo"} and not (args.katago.exists() and args.katago_model.exists()):
        fail(f"KataGo or its net not found ({args.katago}, {args.katago_model}; see "
             "../shared/engines/README.md)")
    if shutil.which(GNUGO) is None:
        fail("GNU Go (the referee, and a rung) is not installed: apt-get install -y gnugo")
    return args


def main() -> int:
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    book_path = args.out / "openings.txt"
    if book_path.exists():
        book = read_openings(book_path, args.size)
    else:
        from kosumi.runtime import load_evaluator

        ev = load_evaluator(str(args.katago_model), threads=1)
        moves = 4 if args.size <= 9 else 8
        book = balanced_openings(ev, args.size, args.komi, args.openings, moves, seed=1)
        write_openings(book_path, book, args.size, f"{len(book)} balanced openings of {moves} "
                       f"moves from {args.katago_model.name}, seed 1")
    ladder: dict = {"size": args.size, "komi": args.komi, "visits": args.visits,
                    "nets": [n for n, _ in args.net_list],
                    "rungs": [f"{k}:{v}" for k, v in args.rung_list], "results": {}}
    for kind, num in args.rung_list:
        rows = []
        for name, model in args.net_list:
            files = play_rung(args, name, model, kind, num, book)
            rows.append(strength_row(name, model, [str(f) for f in files]))
        rung = f"{kind}:{num}"
        write_strength_table(rows, args.out / f"ladder-{kind}-{num}.json")
        ladder["results"][rung] = {r["name"]: r for r in rows}
    atomic_write(args.out / "ladder.json", json.dumps(ladder, indent=1).encode())
    print(markdown(ladder), file=sys.stderr)
    return emit({"benchmark": "strength_ladder", **ladder}, None)


if __name__ == "__main__":
    sys.exit(main())
