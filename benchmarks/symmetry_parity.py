"""kosumi's 8 board symmetries against KataGo's: each ``kata-raw-nn S`` policy (S = 0..7) of
KataGo v1.17.2 on the first 9x9 reference positions, matched to the closest of kosumi's eight
fixed-symmetry evaluations (numpy backend, same g170 net); prints the pairs and the largest
policy difference (KataGo prints 5-6 decimals).

    python benchmarks/symmetry_parity.py [--positions 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.coords import parse_color, vertex_to_point
from kosumi.runtime.loader import load_evaluator
from kosumi.runtime.net_evaluator import NetEvaluator

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
KATAGO = SHARED / "engines" / "katago-v1.17.2-eigen"
CFG = SHARED / "engines" / "katago-gtp.cfg"
MODEL = SHARED / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"
REFERENCE = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"


def katago_policies(records: list[dict]) -> list[np.ndarray]:
    cmds = []
    for r in records:
        cmds += ["boardsize 9", "clear_board", f"komi {r['komi']}", "kata-set-rules chinese"]
        cmds += [f"play {c} {v}" for c, v in r["moves"]]
        cmds += [f"kata-raw-nn {s}" for s in range(8)]
    out = subprocess.run([str(KATAGO), "gtp", "-model", str(MODEL), "-config", str(CFG)],
                         input="\n".join([*cmds, "quit"]) + "\n", capture_output=True,
                         text=True, timeout=600, check=True).stdout
    policies = []
    for block in (b for b in out.split("\n\n") if "policy" in b):
        tok = block.replace("=", " ").split()
        i = tok.index("policy") + 1
        vals = [0.0 if t == "NAN" else float(t) for t in tok[i:i + 81]]
        policies.append(np.array([*vals, float(tok[tok.index("policyPass") + 1])]))
    return policies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", type=int, default=4)
    args = ap.parse_args()
    if not KATAGO.exists() or not REFERENCE.exists():
        print(f"symmetry_parity: error: needs {KATAGO} and {REFERENCE}", file=sys.stderr)
        return 2
    records = [json.loads(x) for x in REFERENCE.read_text().splitlines()]
    records = [r for r in records if r["board_size"] == 9][: args.positions]
    kata = katago_policies(records)
    base = load_evaluator(str(MODEL), backend="numpy", cache=False)
    states = []
    for r in records:
        s = GameState(9, r["komi"], "chinese")
        for c, v in r["moves"]:
            s.play(vertex_to_point(v, 9), parse_color(c))
        states.append(s)
    ours = [[np.asarray(e.policy) for e in
             NetEvaluator(base.backend, base.config, symmetries=(j,)).evaluate(states)]
            for j in range(8)]
    worst, pairs = 0.0, set()
    for i in range(len(records)):
        for s in range(8):
            p = kata[i * 8 + s]
            j = min(range(8), key=lambda k: float(np.abs(ours[k][i] - p).max()))
            pairs.add((s, j))
            worst = max(worst, float(np.abs(ours[j][i] - p).max()))
    print(json.dumps({"positions": len(records), "katago_to_kosumi": sorted(pairs),
                      "max_policy_diff": worst}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
