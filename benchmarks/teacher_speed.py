"""Teacher speed: KataGo V7 feature positions/s against the KataGo net's evals/s (1 thread).

    python benchmarks/teacher_speed.py [--model PATH] [--backend torch,onnxruntime]
                                       [--reference PATH] [--repeat 3]

Prints one JSON object (rates per CPU second of this process, best of ``--repeat`` runs). For
19x19 and 9x9, on the positions of KataGo's reference file:

- ``features_cold_pos_per_s``: V7 features one position at a time with the ladder cache
  emptied before each (every board read from scratch: the worst case);
- ``features_game_order_pos_per_s``: V7 features of every position of the games of the first
  ``--games`` reference records in move order (how labelling walks a game: boards repeat across
  the history planes of consecutive positions);
- ``net_evals_per_s``: the backend's forward pass alone at batch 32 on 1 thread;
- ``evaluator_pos_per_s``: the whole evaluator (features + net + KataGo's postprocessing) at
  batch 32 -- the rate labelling runs at;
- ``ratio_cold`` = features_cold / net (the goal is >= 2: labelling is limited by the net);
- ``katago_nn_evals_per_s``: KataGo's own figure with this net on 1 thread (Eigen backend, from
  the reference README), for comparison.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from kosumi.go import ladder_planes
from kosumi.go.board import GameState
from kosumi.go.coords import parse_color, vertex_to_point
from kosumi.nets.katago_features import KataGoV7
from kosumi.runtime import load_evaluator

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MODEL = SHARED / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"
REFERENCE = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"
KATAGO_NN_EVALS = {19: 63.0, 9: 164.6}  # katago benchmark, 1 search thread (reference README)
BATCH = 32


def replay(record: dict) -> list[GameState]:
    """Every position of a reference record's game, from the empty board to the record's."""
    n = record["board_size"]
    s = GameState(n, record["komi"], "chinese")
    out = [s.copy()]
    for color, vertex in record["moves"]:
        s.play(vertex_to_point(vertex, n), parse_color(color))
        out.append(s.copy())
    return out


def best_rate(fn, count: int, repeat: int) -> float:
    """Items per CPU second of the fastest of ``repeat`` runs of ``fn`` (which does ``count``).

    Process CPU time, not wall time: everything here runs on one thread, and CPU time is far
    less disturbed by other programs sharing the machine."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return count / best


def bench_size(records: list[dict], size: int, evaluator, features: KataGoV7, repeat: int,
               games: int) -> dict:
    """The figures of one board size (see the module docstring)."""
    recs = [r for r in records if r["board_size"] == size]
    replays = [replay(r) for r in recs]
    finals = [g[-1] for g in replays]
    everything = [s for g in replays[:games] for s in g]

    def cold() -> None:
        for s in finals:
            ladder_planes.clear_cache()
            features.encode([s])

    def game_order() -> None:
        ladder_planes.clear_cache()
        for s in everything:
            features.encode([s])

    batch = (finals * (BATCH // len(finals) + 1))[:BATCH]
    planes, glob = features.encode(batch)

    def net() -> None:
        evaluator.backend.forward(planes, glob)

    chunks = [finals[i : i + BATCH] for i in range(0, len(finals), BATCH)]

    def whole() -> None:
        ladder_planes.clear_cache()
        for c in chunks:
            evaluator.evaluate(c)

    net()  # warm up
    f_cold = best_rate(cold, len(finals), repeat)
    f_game = best_rate(game_order, len(everything), max(1, repeat - 1))
    n_rate = best_rate(net, BATCH, repeat + 2)
    e_rate = best_rate(whole, len(finals), repeat)
    return {
        "positions": len(finals),
        "game_positions": len(everything),
        "features_cold_pos_per_s": round(f_cold, 1),
        "features_game_order_pos_per_s": round(f_game, 1),
        "net_evals_per_s": round(n_rate, 1),
        "evaluator_pos_per_s": round(e_rate, 1),
        "ratio_cold": round(f_cold / n_rate, 2),
        "ratio_game_order": round(f_game / n_rate, 2),
        "katago_nn_evals_per_s": KATAGO_NN_EVALS[size],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--reference", default=str(REFERENCE))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--games", type=int, default=20)
    ap.add_argument("--backend", default="torch", help="comma-separated backends, side by side")
    args = ap.parse_args()
    torch.set_num_threads(1)

    with open(args.reference) as f:
        records = [json.loads(line) for line in f if line.strip()]
    report: dict = {
        "model": Path(args.model).name,
        "machine": {"python": sys.version.split()[0], "torch": torch.__version__,
                    "cpu": platform.processor() or platform.machine(), "threads": 1},
        "batch": BATCH,
    }
    for backend in args.backend.split(","):
        evaluator = load_evaluator(args.model, backend=backend, threads=1, cache=False)
        for size in (19, 9):
            report[f"{backend} {size}x{size}"] = bench_size(records, size, evaluator, KataGoV7(),
                                                            args.repeat, args.games)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    if not MODEL.exists() and "--model" not in sys.argv:
        sys.exit(f"{MODEL} is absent (the shared models folder beside the repository)")
    main()
