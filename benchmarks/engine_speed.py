"""Engine speed: rules moves/s, and MCTS playouts/s with b2c16 / b6c64 nets (torch backend,
1 thread) on 9x9 and 19x19, with the share of time spent outside the network's forward pass.

    python benchmarks/engine_speed.py [--visits 800] [--batch 8] [--repeat 3] [--out results.json]
        [--features basic_ladder] [--set NAME=VALUE]

The Leela Zero comparison (``--lz-archs``) times the same lz-head net three ways: ``leelaz
--cpu-only --benchmark -t 1``, kosumi's search in this process, and ``kosumi gtp`` itself
(``genmove b`` on the empty board, timed through its pipes: ``kosumi_gtp``).

Prints one JSON object; each engine figure is the best of ``--repeat`` searches (the machine's
noise only ever adds time). "overhead_us_per_playout" is everything the search does per playout
except the backend's forward pass: tree walk, board copies and moves, legal masks, feature
encoding, softmax and backup. The target for the foundation is <= 100 us on 19x19.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from emit import emit

from kosumi import accel
from kosumi.engine.mcts import MCTS, SearchConfig
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import PASS


def random_game(size: int, moves: int, seed: int) -> GameState:
    """A position after ``moves`` random legal moves (no eye-filling restriction)."""
    rng = random.Random(seed)
    s = GameState(size, 7.5)
    for _ in range(moves):
        legal = np.flatnonzero(s.legal_mask())
        s.play(int(rng.choice(legal)) if len(legal) else PASS)
    return s


def rules_speed(size: int, games: int = 20) -> dict:
    """Replay recorded random games: GameState.play() moves per second (legality checked)."""
    records = [random_game(size, int(size * size * 0.8), seed).moves for seed in range(games)]
    t0 = time.perf_counter()
    n = 0
    for moves in records:
        s = GameState(size, 7.5)
        for color, p in moves:
            s.play(p, color)
        n += len(moves)
    dt = time.perf_counter() - t0
    legal_t0 = time.perf_counter()
    s = random_game(size, size * size // 3, 99)
    for _ in range(2000):
        s.legal_mask()
    legal_us = (time.perf_counter() - legal_t0) / 2000 * 1e6
    return {"moves_per_s": round(n / dt), "legal_mask_us": round(legal_us, 1)}


class TimedBackend:
    """Wraps a backend and adds up the seconds spent in its forward pass."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def forward(self, planes, globals_):
        t0 = time.perf_counter()
        out = self.inner.forward(planes, globals_)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out

    def close(self):
        self.inner.close()


def engine_speed(model: Path, size: int, visits: int, batch: int,
                 state: GameState | None = None, repeat: int = 3, backend: str = "torch",
                 settings: list[str] | None = None) -> dict:
    """One engine's speed: the best (least overhead) of ``repeat`` searches from scratch."""
    from kosumi.runtime import load_evaluator

    evaluator = load_evaluator(model, threads=1, cache=False, backend=backend)
    form = getattr(evaluator.backend, "int8_weights", None)  # onnxruntime: how it holds int8
    timed = TimedBackend(evaluator.backend)
    evaluator.backend = timed
    if state is None:
        state = random_game(size, size * size // 3, 7)
    config = SearchConfig(visits=visits, batch=batch, reuse_tree=False, seed=1)
    mcts = MCTS(evaluator, config.with_settings(settings or []))
    mcts.search(state, visits=2 * batch)  # warm-up (allocations, torch kernels)
    best: dict | None = None
    for _ in range(max(1, repeat)):
        mcts.clear()
        timed.seconds, timed.calls = 0.0, 0
        t0 = time.perf_counter()
        result = mcts.search(state)
        total = time.perf_counter() - t0
        playouts = result.playouts
        outside = total - timed.seconds
        run = {
            "playouts_per_s": round(playouts / total, 1),
            "net_evals": timed.calls,
            "net_ms_per_batch": round(timed.seconds / max(timed.calls, 1) * 1e3, 3),
            "overhead_us_per_playout": round(outside / playouts * 1e6, 1),
            "share_outside_net": round(outside / total, 3),
        }
        if form and form != "int8":
            run["int8_weights"] = form
        if best is None or run["overhead_us_per_playout"] < best["overhead_us_per_playout"]:
            best = run
    return best


LEELAZ = "/usr/games/leelaz"


class ZeroBackend:
    """A backend that costs nothing: uniform logits, even value. Everything else still runs."""

    def forward(self, planes, globals_):
        b, _, n, _ = planes.shape
        return {"policy": np.zeros((b, n * n + 1), np.float32),
                "value": np.zeros((b, 3), np.float32), "score_lead": np.zeros(b, np.float32),
                "ownership": np.zeros((b, n * n), np.float32)}

    def close(self):
        pass


def search_only(size: int, visits: int, batch: int, repeat: int = 3,
                settings: list[str] | None = None, features: str = "basic") -> dict:
    """Search overhead per playout with a zero-cost network (best of ``repeat``)."""
    from kosumi.nets.config import NetConfig
    from kosumi.runtime.net_evaluator import NetEvaluator

    config = NetConfig(arch="b1c8", features=features, head="conv", board_sizes=[size])
    evaluator = NetEvaluator(ZeroBackend(), config)
    state = random_game(size, size * size // 3, 7)
    config = SearchConfig(visits=visits, batch=batch, reuse_tree=False, seed=1)
    mcts = MCTS(evaluator, config.with_settings(settings or []))
    best = float("inf")
    for _ in range(repeat):
        mcts.clear()
        t0 = time.perf_counter()
        result = mcts.search(state)
        best = min(best, (time.perf_counter() - t0) / result.playouts)
    return {"visits": visits, "overhead_us_per_playout": round(best * 1e6, 1)}


def quantized_copy(net: Path, tmp: Path, sizes: list[int]) -> Path:
    """``kosumi quantize NET --bits 8`` on positions of seeded random games of ``sizes``."""
    from kosumi.distill.positions import Position, write_positions
    from kosumi.quantize import QuantizeOptions, quantize_model
    from kosumi.runtime.bench import bench_states

    calib = tmp / f"calib-{'-'.join(map(str, sizes))}"
    if not calib.exists():
        states = [s for n in sizes for s in bench_states(n, 256, seed=3)]
        write_positions(calib, [Position.from_state(s, f"calib:{i}")
                                for i, s in enumerate(states)])
    out = net.with_name(net.stem + "-int8.safetensors")
    quantize_model(net, out, QuantizeOptions(sensitivity=False, keep_float="none"), calib=calib)
    return out


def gtp_speed(model: Path, size: int, visits: int, batch: int, backend: str,
              repeat: int = 3) -> dict:
    """Playouts/s of ``kosumi gtp`` itself: ``genmove b`` on an empty board after
    ``clear_board`` (a fresh tree), timed by the client (pipes included), best of ``repeat``
    after one warm-up move. Each search has a komi of its own: the engine's evaluation cache is
    keyed by it, so no search reuses another's evaluations (an lz-head net does not read komi)."""
    from kosumi.engine.gtp_client import GTPProcess

    command = [sys.executable, "-m", "kosumi", "gtp", "--model", str(model), "--backend",
               backend, "--threads", "1", "--visits", str(visits), "--batch", str(batch)]
    best = float("inf")
    with GTPProcess(command, name="kosumi") as engine:
        engine.send(f"boardsize {size}", timeout=60)
        engine.send("komi 0.5", timeout=60)
        engine.send("clear_board", timeout=60)
        engine.send("genmove b", timeout=600)
        for r in range(max(1, repeat)):
            engine.send(f"komi {7.5 + r}", timeout=60)
            engine.send("clear_board", timeout=60)
            t0 = time.perf_counter()
            engine.send("genmove b", timeout=600)
            best = min(best, time.perf_counter() - t0)
    return {"command": " ".join(["kosumi", *command[3:]]),
            "playouts_per_s": round(visits / best, 1)}


def leelaz_comparison(tmp: Path, visits: int, batch: int, arch: str = "b6c64",
                      repeat: int = 3, backend: str = "torch", int8: bool = False) -> dict:
    """The same lz-head net in Leela Zero's own engine (``leelaz --benchmark``, 1 thread,
    empty 19x19 board) and in kosumi's engine (``backend``, 1 thread, same position)."""
    from kosumi.export import export_model
    from kosumi.nets.checkpoint import save_checkpoint
    from kosumi.nets.config import NetConfig
    from kosumi.nets.resnet import KosumiNet

    config = NetConfig(arch=arch, features="lz18", head="lz", board_sizes=[19], value="tanh",
                       score_lead=False, ownership=False)
    net = tmp / f"{arch}-lz.safetensors"
    save_checkpoint(net, KosumiNet.random(config, seed=1))
    weights = tmp / f"{arch}-lz.txt"
    export_model(net, "leelaz", weights)
    out: dict = {"net": f"{arch} lz head (random weights), 19x19, empty board, 1 thread"}
    if Path(LEELAZ).exists():
        proc = subprocess.run(
            [LEELAZ, "--cpu-only", "-w", str(weights), "--benchmark", "-v", str(visits), "-t", "1"],
            capture_output=True, text=True, env={**os.environ, "HOME": str(tmp)}, timeout=1800,
            check=False,
        )
        m = re.search(r"(\d+) visits, \d+ nodes, (\d+) playouts, (\d+) n/s",
                      proc.stdout + proc.stderr)
        out["leelaz_playouts_per_s"] = float(m.group(3)) if m else None
    else:
        out["leelaz_playouts_per_s"] = None
    model = quantized_copy(net, tmp, [19]) if int8 else net
    out["kosumi_net"] = f"{'int8 (kosumi quantize) ' if int8 else ''}on {backend}"
    kosumi = engine_speed(model, 19, visits, batch, GameState(19, 7.5), repeat=repeat,
                          backend=backend)
    out["kosumi"] = kosumi
    out["kosumi_gtp"] = gtp_speed(model, 19, visits, batch, backend, repeat=repeat)
    lz = out["leelaz_playouts_per_s"]
    if lz:
        out["kosumi_over_leelaz"] = round(kosumi["playouts_per_s"] / lz, 2)
        out["kosumi_gtp_over_leelaz"] = round(out["kosumi_gtp"]["playouts_per_s"] / lz, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--visits", type=int, default=800)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--archs", default="b2c16,b6c64")
    ap.add_argument("--sizes", default="9,19")
    ap.add_argument("--repeat", type=int, default=3,
                    help="searches per engine measurement; the best is reported")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-leelaz", action="store_true", help="skip the Leela Zero comparison")
    ap.add_argument("--backend", default="torch", help="the backend kosumi's nets run on")
    ap.add_argument("--int8", action="store_true", help="quantize kosumi's nets to int8 first")
    ap.add_argument("--lz-archs", default="b6c64", help="nets of the Leela Zero comparison")
    ap.add_argument("--only-leelaz", action="store_true", help="only the Leela Zero comparison")
    ap.add_argument("--features", default="basic",
                    help="the feature set of kosumi's nets (basic_ladder: the ladder reading too)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a search setting for kosumi's searches (repeatable)")
    args = ap.parse_args(argv)
    try:
        SearchConfig().with_settings(args.set)
    except KosumiError as e:
        print(f"engine_speed: {e}", file=sys.stderr)
        return 2

    import torch

    torch.set_num_threads(1)
    from kosumi.nets.checkpoint import save_checkpoint
    from kosumi.nets.config import NetConfig
    from kosumi.nets.resnet import KosumiNet

    sizes = [int(s) for s in args.sizes.split(",")]
    report: dict = {
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "python": sys.version.split()[0], "torch": torch.__version__,
                    "c_speedups": accel.HAVE_C},
        "settings": {"visits": args.visits, "batch": args.batch, "threads": 1,
                     "features": args.features,
                     "backend": args.backend, "search_settings": args.set,
                     "position": "after N*N/3 random moves"},
        "engine": {},
    }
    if not args.only_leelaz:
        report["rules"] = {f"{n}x{n}": rules_speed(n) for n in sizes}
        report["search_only_zero_net"] = {f"{n}x{n}": search_only(n, 3000, args.batch,
                                                                  args.repeat, args.set,
                                                                  args.features)
                                          for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for arch in [] if args.only_leelaz else args.archs.split(","):
            config = NetConfig(arch=arch, features=args.features, head="conv",
                               board_sizes=sizes)
            path = Path(tmp) / f"{arch}.safetensors"
            save_checkpoint(path, KosumiNet.random(config, seed=1))
            if args.int8:
                path = quantized_copy(path, Path(tmp), sizes)
            for n in sizes:
                report["engine"][f"{arch} {n}x{n}"] = engine_speed(
                    path, n, args.visits, args.batch, repeat=args.repeat, backend=args.backend,
                    settings=args.set)
        if not args.no_leelaz:
            report["leelaz_same_net"] = {
                arch: leelaz_comparison(Path(tmp), args.visits, args.batch, arch=arch,
                                        repeat=args.repeat, backend=args.backend,
                                        int8=args.int8)
                for arch in args.lz_archs.split(",")}
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
