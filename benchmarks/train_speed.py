"""Training throughput of ``kosumi distill``: samples/s of each ``--precision``, side by side.

    python benchmarks/train_speed.py --data LABELS [--student b6c64] [--board-sizes 9]
        [--precisions fp32,bf16] [--steps 40] [--repeat 3] [--batch 128] [--threads 2]
        [--out FILE.json]

Runs the real trainer (``kosumi.distill.train.distill``) for ``--steps`` steps per segment, the
precisions interleaved (fp32, bf16, fp32, bf16, ...) ``--repeat`` times so that a machine's
changing load touches each alike, and reports each precision's median and best samples/s (the
trainer's own figure: optimiser steps and the final save, label loading excluded) and the ratio
of medians to the first precision. No held-out split (``--val-fraction 0``), so no evaluation.
The JSON also gives the CPU, torch's version and whether it has native bf16.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from emit import emit

from kosumi.distill.precision import cpu_has_bf16
from kosumi.distill.train import DistillOptions, distill
from kosumi.nets.config import parse_board_sizes
from kosumi.runtime.cpu import cpu_line


def segment(args: argparse.Namespace, precision: str, folder: Path, k: int) -> float:
    options = DistillOptions(
        data=args.data, out=folder / f"{precision}-{k}.safetensors", student=args.student,
        board_sizes=parse_board_sizes(args.board_sizes) if args.board_sizes else None,
        steps=args.steps, batch=args.batch, seed=k, val_fraction=0.0,
        eval_every=args.steps, threads=args.threads, device="cpu", precision=precision,
        progress=False, argv=["train_speed"])
    return distill(options).samples_per_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a label folder (kosumi label)")
    ap.add_argument("--student", default="b6c64")
    ap.add_argument("--board-sizes", default=None)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    rates: dict[str, list[float]] = {p: [] for p in precisions}
    with tempfile.TemporaryDirectory(prefix="kosumi-train-speed-") as tmp:
        for k in range(args.repeat):
            for p in precisions:
                rates[p].append(segment(args, p, Path(tmp), k))
                print(f"round {k + 1}: {p} {rates[p][-1]:.1f} samples/s", file=sys.stderr)
    base = statistics.median(rates[precisions[0]])
    report = {
        "benchmark": "train_speed", "cpu": cpu_line(), "torch": torch.__version__,
        "cpu_has_bf16": cpu_has_bf16(), "threads": args.threads, "student": args.student,
        "board_sizes": args.board_sizes, "batch": args.batch, "steps": args.steps,
        "repeat": args.repeat, "data": str(args.data),
        "samples_per_s": {p: {"median": round(statistics.median(r), 1),
                              "best": round(max(r), 1), "all": [round(x, 1) for x in r]}
                          for p, r in rates.items()},
        "ratio_to_first": {p: round(statistics.median(r) / base, 3) for p, r in rates.items()},
    }
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
