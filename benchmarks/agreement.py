"""Agreement of any model with the real KataGo engine on its reference positions.

    python benchmarks/agreement.py --model FILE|default [--reference PATH] [--symmetries 1]
        [--backend auto|torch,onnxruntime,onnxruntime:fp16,numpy] [--markdown]

Prints one JSON object with, per board size: mean and max KL(KataGo || model) over the policy
(legal points + pass), top-1 and top-5 agreement (KataGo's best move among the model's k best),
mean |winrate difference| (side to move; noResult counts half), and, when the model has them,
mean |score lead difference|, the least-squares slope of the model's score lead on KataGo's
(1: the same scale; 2: leads twice KataGo's), and ownership mean absolute error. The reference
outputs are
KataGo's `kata-raw-nn 0` on ../shared/reference/katago-g170-b6c96/raw_nn.jsonl (White's view,
converted here). Used for the KataGo loader (issue: teachers) and for distilled students.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.coords import WHITE, parse_color, vertex_to_point
from kosumi.runtime import load_evaluator
from kosumi.runtime.agreement import kl, raw_nn_policy

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"


def sig(x: float) -> float:
    """Four significant digits (tiny errors stay visible)."""
    return float(f"{float(x):.4g}")


def slope(pairs: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of y on x over (x, y) pairs; None without spread in x."""
    if len(pairs) < 2:
        return None
    x, y = np.array(pairs, dtype=np.float64).T
    dx = x - x.mean()
    denom = float(dx @ dx)
    return sig(float(dx @ (y - y.mean())) / denom) if denom > 0 else None


def state_of(record: dict) -> GameState:
    n = record["board_size"]
    s = GameState(n, record["komi"], record.get("rules", "chinese"))
    for color, vertex in record["moves"]:
        s.play(vertex_to_point(vertex, n), parse_color(color))
    return s


def agreement(model: str, reference: Path, symmetries: int = 1, threads: int = 1,
              backend: str = "auto") -> dict:
    """``backend``: a backend name, optionally ``:fp16`` (ONNX Runtime's fp16 model)."""
    records = [json.loads(line) for line in reference.read_text().splitlines() if line.strip()]
    name, _, precision = backend.partition(":")
    kw = {"precision": precision} if precision else {}
    evaluator = load_evaluator(model, backend=name, threads=threads, cache=False,
                               symmetries=symmetries, **kw)
    out: dict = {"model": str(model), "reference": str(reference), "symmetries": symmetries,
                 "backend": f"{evaluator.backend.name}" + (f":{precision}" if precision else "")}
    for n in sorted({r["board_size"] for r in records}, reverse=True):
        recs = [r for r in records if r["board_size"] == n]
        if not evaluator.supports_size(n):
            out[f"{n}x{n}"] = "board size not supported by the model"
            continue
        states = [state_of(r) for r in recs]
        t0 = time.perf_counter()
        evals = []
        for i in range(0, len(states), 32):
            evals.extend(evaluator.evaluate(states[i : i + 32]))
        elapsed = time.perf_counter() - t0
        kls, top1, top5, dwin, dlead, down = [], [], [], [], [], []
        leads: list[tuple[float, float]] = []  # (KataGo's, the model's)
        for r, s, e in zip(recs, states, evals, strict=True):
            k = r["katago_raw_nn"]
            ref = raw_nn_policy(k)
            legal = ~np.isnan(ref)
            p = ref[legal] / ref[legal].sum()
            q = np.maximum(e.policy[legal].astype(np.float64), 1e-12)
            q /= q.sum()
            kls.append(kl(p, q))
            best = int(np.nanargmax(ref))
            order = np.argsort(-e.policy)
            top1.append(best == int(order[0]))
            top5.append(best in set(order[:5].tolist()))
            white = s.to_move == WHITE
            ref_win = (k["whiteWin"] if white else k["whiteLoss"]) + 0.5 * k["noResult"]
            dwin.append(abs(e.value - ref_win))
            if e.score_lead is not None:
                ref_lead = k["whiteLead"] if white else -k["whiteLead"]
                dlead.append(abs(e.score_lead - ref_lead))
                leads.append((ref_lead, float(e.score_lead)))
            if e.ownership is not None:
                ref_own = np.array(k["whiteOwnership"]) * (1 if white else -1)
                down.append(float(np.mean(np.abs(e.ownership - ref_own))))
        out[f"{n}x{n}"] = {
            "positions": len(recs),
            "policy_kl_mean": sig(np.mean(kls)),
            "policy_kl_max": sig(np.max(kls)),
            "top1": sig(np.mean(top1)),
            "top5": sig(np.mean(top5)),
            "winrate_mae": sig(np.mean(dwin)),
            "score_lead_mae": sig(np.mean(dlead)) if dlead else None,
            "score_lead_slope": slope(leads),
            "ownership_mae": sig(np.mean(down)) if down else None,
            "evals_per_s": sig(len(recs) / elapsed),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--reference", type=Path, default=REFERENCE)
    ap.add_argument("--symmetries", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="auto",
                    help="comma-separated backends, each optionally :fp16 (e.g. onnxruntime:fp16)")
    ap.add_argument("--markdown", action="store_true", help="also print a markdown table")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    rows = [agreement(args.model, args.reference, args.symmetries, args.threads, b)
            for b in args.backend.split(",") if b]
    print(json.dumps(rows[0] if len(rows) == 1 else rows, indent=2))
    if args.markdown:
        print(markdown(rows))
    return 0


def markdown(rows: list[dict]) -> str:
    """One line per backend and board size: the figures of ``agreement``."""
    lines = ["| model | backend | board | KL mean | KL max | top-1 | winrate MAE | lead MAE | "
             "lead slope | ownership MAE |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for key, v in r.items():
            if not key.endswith(tuple(f"x{n}" for n in range(2, 20))) or not isinstance(v, dict):
                continue
            lines.append(f"| {Path(r['model']).name} | {r['backend']} | {key} | "
                         f"{v['policy_kl_mean']:.2g} | {v['policy_kl_max']:.2g} | "
                         f"{v['top1']:.3f} | {v['winrate_mae']:.2g} | {v['score_lead_mae']} | "
                         f"{v['score_lead_slope']} | {v['ownership_mae']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
