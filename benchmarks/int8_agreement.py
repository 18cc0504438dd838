"""Quantized nets against their float self on positions of your own (a larger sample than the
300 reference positions): top-1, tie-aware top-1, policy KL and value MAE per board size.

    python benchmarks/int8_agreement.py --float default --positions dev9,dev19 Q1.safetensors ...
                                        [--backend onnxruntime|numpy] [--symmetries K]
                                        [--out agreement.json]

The float net runs on ONNX Runtime fp32, each quantized net on ``--backend`` (its own
precision), 1 thread, batches of 32; the figures are ``kosumi.runtime.agreement``'s.
``--positions`` takes any positions or label folders or JSON Lines files of positions kosumi
reads, comma-separated (e.g. the development sets of ``kosumi selfplay``, or
``../shared/reference/katago-g170-b6c96/raw_nn.jsonl``). ``--symmetries K`` evaluates both nets
averaged over the first K of the 8 board symmetries (as ``kosumi gtp --symmetries K`` does);
``--self-symmetry`` adds, as a yardstick, how the float net agrees with itself on the board
transposed (one symmetry each: the identity against symmetry 4 mapped back). ``misses`` counts
the positions whose top move differs and gives the smallest share of its best move's
probability the float net gives the quantized net's choice there (1.0: an exact tie).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from emit import emit

from kosumi.quantize.calibration import read_calibration
from kosumi.runtime import NetEvaluator, load_evaluator
from kosumi.runtime.agreement import agreement, evaluate_all


def misses(ref, got, sizes) -> dict:
    """Per board size: the positions whose top move differs, and the smallest share of its best
    move's probability that the float net gives the quantized net's choice there."""
    out = {}
    for n in sorted(set(sizes), reverse=True):
        shares = [float(r.policy[int(np.argmax(g.policy))] / r.policy.max())
                  for r, g, s in zip(ref, got, sizes, strict=True)
                  if s == n and np.argmax(g.policy) != np.argmax(r.policy)]
        out[f"{n}x{n}"] = {"count": len(shares),
                           "smallest_share_of_best": round(min(shares), 3) if shares else None}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="quantized nets to judge")
    ap.add_argument("--float", dest="float_model", required=True, help="their float net")
    ap.add_argument("--positions", required=True,
                    help="positions or label folders or JSON Lines files, comma-separated")
    ap.add_argument("--backend", default="onnxruntime", help="of the quantized nets")
    ap.add_argument("--symmetries", type=int, default=1, help="of both nets (1..8)")
    ap.add_argument("--self-symmetry", action="store_true",
                    help="also the float net against itself on the transposed board")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    states = [s for folder in args.positions.split(",")
              for s in read_calibration(folder, limit=None)]
    sizes = [s.size for s in states]
    k = args.symmetries
    floats = load_evaluator(args.float_model, backend="onnxruntime", cache=False, threads=1,
                            symmetries=k)
    ref = evaluate_all(floats, states)
    report = {"float": args.float_model, "positions": args.positions, "backend": args.backend,
              "symmetries": k, "nets": {}}
    if args.self_symmetry:
        one = [NetEvaluator(floats.backend, floats.config, symmetries=syms) for syms in [1, (4,)]]
        report["float_vs_itself_transposed"] = agreement(*(evaluate_all(e, states) for e in one),
                                                         sizes)
    for model in args.models:
        got = evaluate_all(load_evaluator(model, backend=args.backend, cache=False, threads=1,
                                          symmetries=k), states)
        report["nets"][model] = agreement(ref, got, sizes)
        report["nets"][model]["misses"] = misses(ref, got, sizes)
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
