"""Quantized nets against their float self on positions of your own (a larger sample than the
300 reference positions): top-1, tie-aware top-1, policy KL and value MAE per board size.

    python benchmarks/int8_agreement.py --float default --positions dev9,dev19 Q1.safetensors ...
                                        [--backend onnxruntime|numpy] [--out agreement.json]

The float net runs on ONNX Runtime fp32, each quantized net on ``--backend`` (its own
precision), 1 thread, batches of 32; the figures are ``kosumi.runtime.agreement``'s.
``--positions`` takes any positions or label folders kosumi reads, comma-separated (e.g. the
development sets of ``kosumi selfplay``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from emit import emit

from kosumi.distill.positions import read_positions
from kosumi.runtime import load_evaluator
from kosumi.runtime.agreement import agreement, evaluate_all


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="quantized nets to judge")
    ap.add_argument("--float", dest="float_model", required=True, help="their float net")
    ap.add_argument("--positions", required=True, help="positions folders, comma-separated")
    ap.add_argument("--backend", default="onnxruntime", help="of the quantized nets")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    states = [p.to_state() for folder in args.positions.split(",")
              for p in read_positions(folder)]
    sizes = [s.size for s in states]
    ref = evaluate_all(load_evaluator(args.float_model, backend="onnxruntime", cache=False,
                                      threads=1), states)
    report = {"float": args.float_model, "positions": args.positions, "backend": args.backend,
              "nets": {}}
    for model in args.models:
        got = evaluate_all(load_evaluator(model, backend=args.backend, cache=False, threads=1),
                           states)
        report["nets"][model] = agreement(ref, got, sizes)
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
