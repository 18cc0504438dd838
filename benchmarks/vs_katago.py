"""kosumi against the real KataGo, at equal visits or at equal time, resumable.

    python benchmarks/vs_katago.py --out runs/vs-katago/g170-9x9-v100 [--model PATH]
        [--katago-model PATH] [--size 9] [--komi 7] [--games 100] [--concurrency 2]
        [--visits 100] [--equal-time] [--kosumi-args "--backend onnxruntime ..."]
        [--openings 50] [--opening-moves 4] [--sprt elo0,elo1] [--json]

kosumi (``kosumi gtp``) plays KataGo (``../shared/engines/katago-v1.17.2-eigen`` with its GTP
config, ``maxVisits`` set per run) through kosumi's match arena, colours swapped, GNU Go scoring
finished games. KataGo needs ``apt-get install -y libzip4``.

- **Equal visits** (default): both engines get ``--visits``.
- **Equal time** (``--equal-time``): KataGo gets ``--visits``; kosumi gets the visits that fill
  the same time, from each engine's visits per second measured in this run (``genmove`` through
  GTP, one engine at a time, on ``--speed-positions`` positions: KataGo's reference positions of
  this board size, else the openings).

Both engines play by the same rules: both resign when their win rate stays under 5% for 3 of
their moves (``--no-resign``: neither does); kosumi gets KataGo's GTP move-choice temperature
(0.5, decaying to 0.1 with a halflife of 19 moves on 19x19), and games start from ``--openings``
balanced openings (``kosumi.engine.openings``: ``--opening-moves`` moves sampled from kosumi's
net's raw policy), each played once with each colour: two deterministic engines would otherwise
replay the same few games.

Resumable: the run folder keeps the openings, the speed figures and one JSON per finished chunk
of games (``--chunk``); run the same command again to go on. The report (``report.json`` in the
folder, and stdout) gives W-D-L, the score and Elo with its 95% interval, both engines' visits
and visits per second.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path

from kosumi.engine.elo import elo_estimate, parse_sprt, sprt
from kosumi.engine.gtp_client import EngineError, GTPProcess
from kosumi.engine.match import play_match
from kosumi.engine.openings import balanced_openings, read_openings, write_openings
from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write
from kosumi.go.coords import point_to_vertex, vertex_to_point

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
KATAGO = SHARED / "engines" / "katago-v1.17.2-eigen"
KATAGO_CFG = SHARED / "engines" / "katago-gtp.cfg"
G170 = SHARED / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"
REFERENCE = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"
KATAGO_TEMPERATURE = ["--temperature", "0.5", "--temperature-late", "0.1",
                      "--temperature-halflife", "19"]


def fail(message: str) -> None:
    print(f"vs_katago: error: {message}", file=sys.stderr)
    raise SystemExit(2)


#: KataGo resigning as kosumi does: its win rate under 5% for 3 of its moves in a row
KATAGO_RESIGN = "allowResignation=true,resignThreshold=-0.90,resignConsecTurns=3"


def katago_command(args: argparse.Namespace, visits: int) -> list[str]:
    resign = "allowResignation=false" if args.no_resign else KATAGO_RESIGN
    return [str(args.katago), "gtp", "-model", str(args.katago_model), "-config",
            str(args.config), "-override-config", f"maxVisits={visits},{resign}"]


def kosumi_command(args: argparse.Namespace, visits: int) -> list[str]:
    if args.baseline is not None:  # KataGo in kosumi's place, with these overrides
        base = katago_command(args, visits)
        return [*base[:-1], base[-1] + ("," + args.baseline if args.baseline else "")]
    # --kosumi-path: a frozen copy of the package (a snapshot of src/ with its built
    # extensions), so that a long match keeps playing the code it started with
    prefix = ["env", f"PYTHONPATH={args.kosumi_path.resolve()}"] if args.kosumi_path else []
    resign = ["--resign-threshold", "0"] if args.no_resign else []
    return [*prefix, sys.executable, "-m", "kosumi", "gtp", "--model", str(args.model),
            "--visits", str(visits), "--threads", "1", *KATAGO_TEMPERATURE, "--seed", "{lane}",
            *resign, *shlex.split(args.kosumi_args)]


def check_katago(args: argparse.Namespace) -> str:
    """KataGo's version line; exits 2 with one line when it cannot run."""
    if not args.katago.exists():
        fail(f"KataGo not found at {args.katago} (see ../shared/engines/README.md)")
    if not args.config.exists():
        fail(f"KataGo's GTP config not found at {args.config}")
    try:
        with GTPProcess([str(args.katago), "gtp", "-model", str(args.katago_model), "-config",
                         str(args.config)], name="katago") as proc:
            return proc.send("version", timeout=120).strip()
    except (EngineError, OSError) as e:
        tail = getattr(e, "stderr_tail", "") or str(e)
        hint = " (apt-get install -y libzip4)" if "libzip" in str(tail) else ""
        fail(f"KataGo cannot start{hint}: {str(e).splitlines()[0]}")
    return ""


def speed_positions(args: argparse.Namespace, book: list[tuple[int, ...]]) -> list[list[int]]:
    """Move lists to time the engines on: KataGo's reference positions of this size, else the
    openings."""
    out: list[list[int]] = []
    if REFERENCE.exists():
        for line in REFERENCE.read_text().splitlines():
            r = json.loads(line)
            if r["board_size"] == args.size and r.get("selected_as") != "constructed":
                moves = [vertex_to_point(v, args.size) for _, v in r["moves"]]
                if not moves or (r["moves"][0][0] == "B" and all(
                        c == "BW"[i % 2] for i, (c, _) in enumerate(r["moves"]))):
                    out.append(moves)
            if len(out) >= args.speed_positions:
                return out
    return out + [list(o) for o in book][: args.speed_positions - len(out)]


def visits_per_second(command: list[str], name: str, positions: list[list[int]], size: int,
                      komi: float, visits: int) -> dict:
    """Time ``genmove`` on each position; visits per second over the whole set (median too)."""
    times = []
    with GTPProcess([c.replace("{lane}", "1") for c in command], name=name) as proc:
        for cmd in (f"boardsize {size}", f"komi {komi:g}", "clear_board"):
            proc.send(cmd, timeout=300)
        proc.send("genmove b", timeout=300)  # warm-up: model load, caches, kernels
        for moves in positions:
            proc.send("clear_board", timeout=60)
            for i, p in enumerate(moves):
                proc.send(f"play {'BW'[i % 2]} {point_to_vertex(p, size)}", timeout=60)
            t0 = time.perf_counter()
            proc.send(f"genmove {'BW'[len(moves) % 2]}", timeout=600)
            times.append(time.perf_counter() - t0)
    return {"visits": visits, "positions": len(times), "seconds": round(sum(times), 3),
            "visits_per_s": round(visits * len(times) / sum(times), 1),
            "median_visits_per_s": round(visits / statistics.median(times), 1)}


def load_chunks(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("chunk-*.json"))]


def summary(chunks: list[dict]) -> dict:
    w = sum(c["counts"]["first"]["wins"] for c in chunks)
    d = sum(c["counts"]["first"]["draws"] for c in chunks)
    losses = sum(c["counts"]["first"]["losses"] for c in chunks)
    ends: dict[str, int] = {}
    for c in chunks:
        for g in c["games"]:
            ends[g["end"]] = ends.get(g["end"], 0) + 1
    return {"games": w + d + losses, "wins": w, "draws": d, "losses": losses, "ends": ends,
            "elo": elo_estimate(w, d, losses).to_dict() if w + d + losses else None}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="run folder (resumable)")
    ap.add_argument("--model", default=str(G170), help="kosumi's model")
    ap.add_argument("--katago-model", type=Path, default=None,
                    help="KataGo's model (default: --model, which must then be a KataGo net)")
    ap.add_argument("--katago", type=Path, default=KATAGO)
    ap.add_argument("--config", type=Path, default=KATAGO_CFG)
    ap.add_argument("--size", type=int, default=9)
    ap.add_argument("--komi", type=float, default=None)
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=10, help="games per saved chunk (even)")
    ap.add_argument("--visits", type=int, default=100,
                    help="both engines' visits (KataGo's with --equal-time)")
    ap.add_argument("--equal-time", action="store_true")
    ap.add_argument("--kosumi-visits", type=int, default=None,
                    help="kosumi's visits with --equal-time, instead of the measured ratio")
    ap.add_argument("--kosumi-args", default="", help="more kosumi gtp options")
    ap.add_argument("--kosumi-path", type=Path, default=None,
                    help="run kosumi from this folder (it holds a kosumi package: a snapshot)")
    ap.add_argument("--openings", type=int, default=50, help="balanced openings (0: none)")
    ap.add_argument("--opening-moves", type=int, default=None,
                    help="moves per opening (default 4 on 9x9, 8 on 19x19)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--speed-positions", type=int, default=12)
    ap.add_argument("--sprt", default=None, help="'elo0,elo1': stop when the SPRT decides")
    ap.add_argument("--move-timeout", type=float, default=600.0)
    ap.add_argument("--no-resign", action="store_true",
                    help="neither engine resigns (default: both, under 5%% for 3 moves)")
    ap.add_argument("--json", action="store_true", help="print only the JSON report")
    ap.add_argument("--baseline", default=None, metavar="OVERRIDES",
                    help="KataGo in kosumi's place, with these config overrides (e.g. "
                    "'nnRandomize=false'; '' for none): what KataGo scores against itself")
    args = ap.parse_args()
    args.komi = args.komi if args.komi is not None else (7.0 if args.size == 9 else 7.5)
    if args.katago_model is None:
        if not str(args.model).endswith((".bin.gz", ".bin", ".txt.gz")):
            fail("--katago-model is needed when --model is not a KataGo net")
        args.katago_model = Path(args.model)
    if not args.katago_model.exists():
        fail(f"KataGo's model not found: {args.katago_model}")
    if args.chunk < 2 or args.chunk % 2:
        fail("--chunk must be even and >= 2")
    if shutil.which("gnugo") is None and not Path("/usr/games/gnugo").exists():
        fail("GNU Go (the referee) is not installed: apt-get install -y gnugo")
    return args


def check_settings(args: argparse.Namespace) -> dict:
    """The run's settings, written once: a resumed run must be the same run."""
    settings = {"model": str(args.model), "katago_model": str(args.katago_model),
                "size": args.size, "komi": args.komi, "visits": args.visits,
                "equal_time": args.equal_time, "kosumi_visits": args.kosumi_visits,
                "kosumi_args": args.kosumi_args, "openings": args.openings,
                "kosumi_path": str(args.kosumi_path) if args.kosumi_path else None,
                "opening_moves": args.opening_moves, "seed": args.seed,
                "resign": not args.no_resign}
    if args.baseline is not None:
        settings["baseline"] = args.baseline
    path = args.out / "settings.json"
    if path.exists():
        old = json.loads(path.read_text())
        if old != settings:
            diff = sorted(k for k in settings if old.get(k) != settings[k])
            fail(f"{args.out} holds a run with other settings ({', '.join(diff)}); use another "
                 "--out")
    else:
        atomic_write(path, json.dumps(settings, indent=2).encode())
    return settings


def opening_book(args: argparse.Namespace) -> list[tuple[int, ...]]:
    """The run's openings (made once with kosumi's net, then read back)."""
    path = args.out / "openings.txt"
    if not args.openings:
        return []
    if path.exists():
        return read_openings(path, args.size)
    from kosumi.runtime import load_evaluator

    moves = args.opening_moves or (4 if args.size <= 9 else 8)
    ev = load_evaluator(str(args.model), threads=1)
    book = balanced_openings(ev, args.size, args.komi, args.openings, moves, seed=args.seed)
    write_openings(path, book, args.size, f"{len(book)} balanced openings of {moves} moves "
                   f"from {Path(args.model).name}, seed {args.seed}")
    return book


def measure_speed(args: argparse.Namespace, book: list[tuple[int, ...]]) -> dict:
    """Both engines' visits per second (once per run folder), and kosumi's visits."""
    path = args.out / "speed.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    positions = speed_positions(args, book)
    if not positions:
        fail("no positions to time the engines on (give --openings)")
    kata = visits_per_second(katago_command(args, args.visits), "katago", positions,
                             args.size, args.komi, args.visits)
    kos_visits = args.visits
    if args.equal_time and args.kosumi_visits is None:
        probe = visits_per_second(kosumi_command(args, args.visits), "kosumi", positions,
                                  args.size, args.komi, args.visits)
        kos_visits = max(1, round(args.visits * probe["visits_per_s"] / kata["visits_per_s"]))
    elif args.equal_time:
        kos_visits = args.kosumi_visits
    kos = visits_per_second(kosumi_command(args, kos_visits), "kosumi", positions, args.size,
                            args.komi, kos_visits)
    speed = {"katago": kata, "kosumi": kos, "kosumi_visits": kos_visits,
             "time_ratio": round(kos["seconds"] / kata["seconds"], 3)}
    atomic_write(path, json.dumps(speed, indent=2).encode())
    return speed


def play_chunks(args: argparse.Namespace, book: list[tuple[int, ...]], kos_visits: int,
                bounds: tuple[float, float] | None) -> list[dict]:
    """The games, ``--chunk`` at a time, each chunk saved as it finishes."""
    chunks = load_chunks(args.out)
    pairs_done = sum(len(c["games"]) for c in chunks) // 2
    while pairs_done * 2 < args.games:
        if bounds is not None and chunks:
            s = summary(chunks)
            if sprt(s["wins"], s["draws"], s["losses"], *bounds).verdict != "continue":
                break
        n = min(args.chunk, args.games - pairs_done * 2)
        segment = None
        if book:
            segment = [book[(pairs_done + j) % len(book)] for j in range(n // 2 + 1)]
        try:
            res = play_match(
                kosumi_command(args, kos_visits), katago_command(args, args.visits), n,
                size=args.size, komi=args.komi, swap_colors=True,
                sgf_dir=args.out / "sgf" / f"chunk-{len(chunks) + 1:03d}",
                move_timeout=args.move_timeout, progress=not args.json,
                concurrency=min(args.concurrency, n), openings=segment,
            )
        except KosumiError as e:
            fail(str(e))
        data = res.to_dict()
        atomic_write(args.out / f"chunk-{len(chunks) + 1:03d}.json",
                     json.dumps(data, indent=2).encode())
        chunks.append(data)
        pairs_done += n // 2
    return chunks


def main() -> int:
    args = parse_args()
    bounds = parse_sprt(args.sprt) if args.sprt else None
    version = check_katago(args)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = check_settings(args)
    book = opening_book(args)
    speed = measure_speed(args, book)
    kos_visits = int(speed["kosumi_visits"])
    chunks = play_chunks(args, book, kos_visits, bounds)
    report = {"katago": version, "settings": settings, "speed": speed,
              "kosumi_visits": kos_visits, "katago_visits": args.visits,
              "result": summary(chunks)}
    if bounds is not None:
        s = report["result"]
        report["sprt"] = sprt(s["wins"], s["draws"], s["losses"], *bounds).to_dict()
    atomic_write(args.out / "report.json", json.dumps(report, indent=2).encode())
    if not args.json:
        r = report["result"]
        e = r["elo"]
        print(f"\nkosumi ({kos_visits} visits, {speed['kosumi']['visits_per_s']} visits/s) vs "
              f"KataGo ({args.visits} visits, {speed['katago']['visits_per_s']} visits/s), "
              f"{args.size}x{args.size} komi {args.komi:g}")
        print(f"  W-D-L {r['wins']}-{r['draws']}-{r['losses']} of {r['games']}: score "
              f"{e['score']:.3f}, Elo {e['elo']:+.0f} [{e['low']:+.0f}, {e['high']:+.0f}]; "
              f"ends {r['ends']}")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
