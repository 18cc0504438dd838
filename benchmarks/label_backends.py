"""Labelling with KataGo's teacher on each backend: labels/s side by side, and how the labels agree.

    python benchmarks/label_backends.py [--backends torch,onnxruntime] [--games 12] [--repeat 2]
                                        [--extra MODEL:BACKEND ...]

The positions are every position of the first ``--games`` games of each board size in KataGo's
reference file (replayed from their move lists). Each backend labels them with ``kosumi.distill.
labels.label_positions`` (1 thread, 1 worker, batch 64, fresh folder), ``--repeat`` times in
alternation, best time kept; ``--extra MODEL:BACKEND`` adds another model (an int8 quantized
copy of the teacher, say) to the same run. Then the label sets are compared with the first
run's: policy KL (mean, max), and the largest value and ownership differences. One JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kosumi.distill.labels import LabelStore, label_positions
from kosumi.distill.positions import Position, write_positions
from kosumi.go.board import GameState
from kosumi.go.coords import parse_color, vertex_to_point
from kosumi.runtime.agreement import kl

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REFERENCE = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"
KATAGO = SHARED / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"


def positions(reference: Path, games: int) -> list[Position]:
    records = [json.loads(x) for x in reference.read_text().splitlines() if x.strip()]
    out = []
    for n in (9, 19):
        for r in [r for r in records if r["board_size"] == n][:games]:
            s = GameState(n, r["komi"], r["rules"])
            out.append(Position.from_state(s, r["id"]))
            for color, vertex in r["moves"]:
                s.play(vertex_to_point(vertex, n), parse_color(color))
                out.append(Position.from_state(s, r["id"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=KATAGO)
    ap.add_argument("--backends", default="torch,onnxruntime")
    ap.add_argument("--games", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--extra", action="append", default=[], help="MODEL:BACKEND")
    args = ap.parse_args()
    if not args.model.exists():
        sys.exit(f"{args.model} is absent (the shared models folder)")
    runs = {b: (args.model, b) for b in args.backends.split(",")}
    for spec in args.extra:
        model, _, backend = spec.rpartition(":")
        runs[f"{Path(model).name} on {backend}"] = (Path(model), backend)
    backends = list(runs)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_positions(root / "pos", positions(REFERENCE, args.games))
        best = {b: float("inf") for b in backends}
        count = 0
        for _ in range(args.repeat):
            for b in backends:
                out = root / b.replace(" ", "_")
                shutil.rmtree(out, ignore_errors=True)
                t = time.perf_counter()
                model, backend = runs[b]
                stats = label_positions(model, root / "pos", out, backend=backend, batch=64,
                                        allow_mixed_teachers=True)
                best[b] = min(best[b], time.perf_counter() - t)
                count = stats.labelled
        first = {r.key: r for r in LabelStore(root / backends[0].replace(" ", "_")).records()}
        report: dict = {"model": args.model.name, "positions": count, "threads": 1,
                        "batch": 64, "backends": {}}
        for b in backends:
            other = {r.key: r for r in LabelStore(root / b.replace(" ", "_")).records()}
            kls = [kl(a.policy, other[k].policy) for k, a in first.items()]
            report["backends"][b] = {
                "labels_per_s": round(count / best[b], 1),
                f"x_{backends[0]}": round(best[backends[0]] / best[b], 3),
                f"policy_kl_vs_{backends[0]}_mean": float(f"{np.mean(kls):.3g}"),
                f"policy_kl_vs_{backends[0]}_max": float(f"{np.max(kls):.3g}"),
                "max_value_diff": float(format(
                    max(float(np.abs(a.value - other[k].value).max()) for k, a in first.items()),
                    ".3g")),
                "max_ownership_diff": float(format(
                    max(float(np.abs(a.ownership - other[k].ownership).max())
                        for k, a in first.items()), ".3g")),
            }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
