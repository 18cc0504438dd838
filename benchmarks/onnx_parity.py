"""Parity of the one door: every backend against torch, and KataGo's net against KataGo itself.

    python benchmarks/onnx_parity.py [--model default] [--model runs/demo/student-b2c16.safetensors]
                                     [--lz-random] [--katago PATH] [--out parity.json]

On the 300 positions of KataGo's reference file (``../shared/reference``; 19x19 only for a
19x19 net), for each kosumi model: ONNX Runtime fp32 and fp16 (exported by ``kosumi export
--format onnx``) and the numpy backend against the torch backend -- top-1 agreement, the
largest policy difference, the largest win-probability difference, and a tie-aware figure
(the torch probability of the other backend's choice relative to torch's best). For KataGo's
g170 net, every backend against the real KataGo engine's outputs (mean/max policy KL, top-1,
winrate, lead and ownership MAE), the thresholds of the torch loader's test. One JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from emit import emit

from kosumi.export import export_model
from kosumi.go.board import GameState
from kosumi.go.coords import WHITE
from kosumi.runtime import load_evaluator
from kosumi.runtime.agreement import kl, raw_nn_policy, same_top_move
from kosumi.runtime.analyze import position_from_json

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REFERENCE = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"
KATAGO = SHARED / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"


def replay(r: dict) -> GameState:
    return position_from_json(json.dumps(r), r["id"]).state


def evaluate(ev, states):
    out = []
    for i in range(0, len(states), 32):
        out.extend(ev.evaluate(states[i:i + 32]))
    return out


def against(ref, got) -> dict:
    pairs = list(zip(ref, got, strict=True))
    top1 = [same_top_move(a.policy, b.policy) for a, b in pairs]
    rel = [float(a.policy[int(np.argmax(b.policy))] / a.policy.max()) for a, b in pairs]
    return {
        "positions": len(ref),
        "top1": round(float(np.mean(top1)), 4),
        "max_policy_diff": float(format(
            max(float(np.abs(a.policy - b.policy).max()) for a, b in pairs), ".3g")),
        "max_value_diff": float(format(max(abs(a.value - b.value) for a, b in pairs), ".3g")),
        "min_rel_prob_of_choice": round(min(rel), 4),
    }


def model_parity(model: str, records: list[dict], tmp: Path) -> dict:
    torch_ev = load_evaluator(model, backend="torch", cache=False)
    states = [replay(r) for r in records if torch_ev.supports_size(r["board_size"])]
    ref = evaluate(torch_ev, states)
    out: dict = {}
    for precision in ("fp32", "fp16"):
        path = tmp / f"{Path(model).stem}-{precision}.onnx"
        export_model(model, "onnx", path, precision=precision)
        out[f"onnxruntime {precision}"] = against(ref, evaluate(load_evaluator(
            path, backend="onnxruntime", cache=False), states))
    out["numpy fp32"] = against(ref, evaluate(load_evaluator(model, backend="numpy",
                                                             cache=False), states))
    return out


def katago_parity(model: Path, records: list[dict], tmp: Path) -> dict:
    states = [replay(r) for r in records]
    half = tmp / "katago-fp16.onnx"
    export_model(model, "onnx", half, precision="fp16")
    out: dict = {}
    for name, path, backend in (("torch", model, "torch"), ("onnxruntime fp32", model,
                                                            "onnxruntime"),
                                ("onnxruntime fp16", half, "onnxruntime"),
                                ("numpy", model, "numpy")):
        evals = evaluate(load_evaluator(path, backend=backend, cache=False), states)
        rows = {}
        for n in (19, 9):
            kls, top1, dwin, dlead, down = [], [], [], [], []
            for r, s, e in zip(records, states, evals, strict=True):
                if r["board_size"] != n:
                    continue
                k = r["katago_raw_nn"]
                p = raw_nn_policy(k)
                kls.append(kl(p, e.policy))
                top1.append(same_top_move(p, e.policy))
                w = e.white_view(s.to_move)
                rv = (k["whiteWin"] if s.to_move == WHITE else k["whiteLoss"]) + k["noResult"] / 2
                dwin.append(abs(e.value - rv))
                dlead.append(abs(w["whiteLead"] - k["whiteLead"]))
                down.append(float(np.mean(np.abs(w["whiteOwnership"]
                                                 - np.array(k["whiteOwnership"])))))
            rows[f"{n}x{n}"] = {"mean_kl": float(f"{np.mean(kls):.3g}"),
                                "max_kl": float(f"{np.max(kls):.3g}"),
                                "top1": round(float(np.mean(top1)), 4),
                                "winrate_mae": float(f"{np.mean(dwin):.3g}"),
                                "lead_mae": float(f"{np.mean(dlead):.3g}"),
                                "ownership_mae": float(f"{np.mean(down):.3g}")}
        out[name] = rows
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--lz-random", action="store_true",
                    help="also a random b6c64 lz-head net (BatchNorm randomised)")
    ap.add_argument("--katago", type=Path, default=KATAGO)
    ap.add_argument("--reference", type=Path, default=REFERENCE)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not args.reference.exists():
        sys.exit(f"{args.reference} is absent (the shared reference folder)")
    records = [json.loads(x) for x in args.reference.read_text().splitlines() if x.strip()]
    report: dict = {"reference": str(args.reference), "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        models = list(args.model or ["default"])
        if args.lz_random:
            import torch

            from kosumi.nets.checkpoint import save_checkpoint
            from kosumi.nets.config import NetConfig
            from kosumi.nets.resnet import KosumiNet

            cfg = NetConfig(arch="b6c64", features="lz18", head="lz", board_sizes=[19],
                            value="tanh", score_lead=False, ownership=False)
            net = KosumiNet.random(cfg, 3)
            g = torch.Generator().manual_seed(3)
            with torch.no_grad():
                for m in net.modules():
                    if isinstance(m, torch.nn.BatchNorm2d):
                        m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.3)
                        m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            path = Path(tmp) / "lz-b6c64-random.safetensors"
            save_checkpoint(path, net)
            models.append(str(path))
        for model in models:
            report["models"][Path(model).name] = model_parity(model, records, Path(tmp))
        if args.katago and args.katago.exists():
            report["katago_vs_katago_engine"] = katago_parity(args.katago, records, Path(tmp))
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
