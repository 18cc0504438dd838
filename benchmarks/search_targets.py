"""Are search targets (``kosumi label --visits N``) a better policy than the teacher's raw one?

The g170 teacher's raw policy and its N-visit search targets, on the 300 dev positions, against a
far stronger net's raw policy: KataGo's b10c384 (the real engine's ``kata-raw-nn 0`` in
../shared/reference). For each board and target: how often its top move is b10c384's, b10c384's
mean probability of that move, and, position by position against the raw policy, in how many
positions only this target's top move (or only the raw one's) is b10c384's.

    python benchmarks/search_targets.py --visits 32,128
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agreement import ROOT, state_of

from kosumi.distill.labels import search_policies, teacher_outputs
from kosumi.distill.teacher_jobs import open_teacher
from kosumi.runtime.agreement import raw_nn_policy

STRONG = ROOT.parent / "shared" / "reference" / "katago-b10c384h6nbttflrs" / "raw_nn.jsonl"
G170 = ROOT.parent / "shared" / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--visits", default="32,128", help="search targets to compare, e.g. 32,128")
    ap.add_argument("--backend", default="onnxruntime")
    args = ap.parse_args()
    refs = [json.loads(x) for x in STRONG.read_text().splitlines() if x.strip()]
    teacher = open_teacher(G170, backend=args.backend)
    print("| board | positions | g170's target | top move = b10c384's | b10c384's probability "
          "of it | only this one right / only raw right | s |")
    print("|---|---|---|---|---|---|---|")
    for n in (9, 19):
        sel = [r for r in refs if r["board_size"] == n]
        states = [state_of(r) for r in sel]
        strong = np.nan_to_num(np.stack([raw_nn_policy(r["katago_raw_nn"]) for r in sel]))
        best = strong.argmax(axis=1)
        t0 = time.perf_counter()
        raw = teacher_outputs(teacher, states).policy
        raw_right = raw.argmax(axis=1) == best
        targets = [("raw policy", raw, time.perf_counter() - t0)]
        for v in (int(x) for x in args.visits.split(",") if x.strip()):
            t0 = time.perf_counter()
            targets.append((f"search, {v} visits", search_policies(teacher, states, v),
                            time.perf_counter() - t0))
        for name, policy, seconds in targets:
            top = policy.argmax(axis=1)
            right = top == best
            prob = float(strong[np.arange(len(top)), top].mean())
            paired = ("-" if policy is raw
                      else f"{int((right & ~raw_right).sum())} / {int((raw_right & ~right).sum())}")
            print(f"| {n}x{n} | {len(sel)} | {name} | {right.mean():.3f} | {prob:.3f} | {paired} "
                  f"| {seconds:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
