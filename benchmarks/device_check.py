"""The GPU checks, as one prepared script for a machine with an NVIDIA GPU (run it where one is
lent; everything here is skipped cleanly by the test suite without one).

    python benchmarks/device_check.py [--out device.json]

1. what is installed: CUDA through torch, onnxruntime's providers, TensorRT's version;
2. ``kosumi export --format tensorrt --precision fp16`` of ``default`` and of KataGo's g170 net,
   with the build time (and fp32 for ``default``), and an int8 engine from ``default``
   quantized with ``--activations int8`` (its explicit Q/DQ ONNX, kosumi's own scales);
3. parity on the 300 reference positions: TensorRT fp16/fp32 and ONNX Runtime's CUDA provider
   against ONNX Runtime fp32 on the CPU, TensorRT int8 against the numpy integer reference
   (top-1, largest policy and value differences), and
   KataGo's net on TensorRT against the real KataGo engine (mean KL, top-1, winrate and lead
   MAE);
4. speed: one ``kosumi bench`` run, batch 1, 16 and 64, 9x9 and 19x19, the GPU backends beside
   ONNX Runtime on the CPU.

Prints one JSON object; each step records its error instead of stopping the script.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
from emit import emit

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REFERENCE = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"
KATAGO = SHARED / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"


def step(report: dict, name: str, fn) -> None:
    t = time.perf_counter()
    try:
        report[name] = fn()
    except Exception as e:
        report[name] = {"error": f"{type(e).__name__}: {e}",
                        "trace": traceback.format_exc().splitlines()[-6:]}
    report.setdefault("seconds", {})[name] = round(time.perf_counter() - t, 1)
    print(json.dumps({name: report[name]})[:2000], file=sys.stderr, flush=True)


def installed() -> dict:
    out: dict = {}
    try:
        import torch

        out["torch"] = torch.__version__
        out["cuda"] = torch.cuda.is_available()
        if out["cuda"]:
            out["gpu"] = torch.cuda.get_device_name(0)
            out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    except ImportError:
        out["torch"] = None
    try:
        import onnxruntime as ort

        out["onnxruntime"] = ort.__version__
        out["providers"] = ort.get_available_providers()
    except ImportError:
        out["onnxruntime"] = None
    try:
        import tensorrt

        out["tensorrt"] = tensorrt.__version__
    except ImportError:
        out["tensorrt"] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from kosumi.export import export_model
    from kosumi.go.coords import WHITE
    from kosumi.runtime import load_evaluator
    from kosumi.runtime.agreement import kl, raw_nn_policy, same_top_move
    from kosumi.runtime.analyze import position_from_json

    records = [json.loads(x) for x in REFERENCE.read_text().splitlines() if x.strip()]
    states = [position_from_json(json.dumps(r), r["id"]).state for r in records]

    def evaluate(model, **kw):
        ev = load_evaluator(model, cache=False, **kw)
        out = []
        for i in range(0, len(states), 32):
            out.extend(ev.evaluate(states[i:i + 32]))
        return out

    def compare(ref, got) -> dict:
        return {"top1": float(np.mean([same_top_move(a.policy, b.policy)
                                       for a, b in zip(ref, got, strict=True)])),
                "max_policy_diff": float(max(np.abs(a.policy - b.policy).max()
                                             for a, b in zip(ref, got, strict=True))),
                "max_value_diff": float(max(abs(a.value - b.value)
                                            for a, b in zip(ref, got, strict=True)))}

    report: dict = {}
    step(report, "installed", installed)
    tmp = Path(tempfile.mkdtemp(prefix="kosumi-device-"))
    def int8_default() -> str:  # default quantized for TensorRT (symmetric int8 activations)
        from kosumi.distill.positions import Position, write_positions
        from kosumi.quantize import QuantizeOptions, quantize_model
        from kosumi.runtime.bench import bench_states

        calib = tmp / "calib"
        write_positions(calib, [Position.from_state(s, f"c:{i}") for i, s in
                                enumerate(bench_states(9, 128, 3) + bench_states(19, 64, 4))])
        out = tmp / "default-int8s.safetensors"
        quantize_model("default", out, QuantizeOptions(activations="int8", sensitivity=False),
                       calib=calib)
        return str(out)

    plans = {"default-fp16": ("default", "fp16"), "default-fp32": ("default", "fp32"),
             "katago-fp16": (str(KATAGO), "fp16")}
    try:
        plans["default-int8"] = (int8_default(), "int8")
    except Exception as e:
        report["int8 quantize"] = {"error": f"{type(e).__name__}: {e}"}
    for name, (model, precision) in plans.items():
        step(report, f"build {name}", lambda m=model, p=precision, n=name: export_model(
            m, "tensorrt", tmp / f"{n}.plan", precision=p, batch="1,16,64", sizes="9,19"))
    cpu = {"default": evaluate("default", backend="onnxruntime"),
           "katago": evaluate(KATAGO, backend="onnxruntime")}
    if "default-int8" in plans:  # TensorRT int8 against the integer reference
        cpu["default-int8"] = evaluate(plans["default-int8"][0], backend="numpy")
    for name in plans:
        base = "katago" if name.startswith("katago") else \
            "default-int8" if name == "default-int8" else "default"
        step(report, f"parity {name} vs onnxruntime cpu", lambda n=name, b=base: compare(
            cpu[b], evaluate(tmp / f"{n}.plan", backend="tensorrt", device="cuda")))
    step(report, "parity default onnxruntime cuda vs cpu", lambda: compare(
        cpu["default"], evaluate("default", backend="onnxruntime", device="cuda")))
    step(report, "parity default onnxruntime cuda fp16 vs cpu", lambda: compare(
        cpu["default"], evaluate("default", backend="onnxruntime", device="cuda",
                                 precision="fp16")))

    def katago_vs_engine() -> dict:
        got = evaluate(tmp / "katago-fp16.plan", backend="tensorrt", device="cuda")
        kls, top1, dwin, dlead = [], [], [], []
        for r, s, e in zip(records, states, got, strict=True):
            k = r["katago_raw_nn"]
            p = raw_nn_policy(k)
            kls.append(kl(p, e.policy))
            top1.append(same_top_move(p, e.policy))
            rv = (k["whiteWin"] if s.to_move == WHITE else k["whiteLoss"]) + k["noResult"] / 2
            dwin.append(abs(e.value - rv))
            dlead.append(abs(e.white_view(s.to_move)["whiteLead"] - k["whiteLead"]))
        return {"mean_kl": float(np.mean(kls)), "top1": float(np.mean(top1)),
                "winrate_mae": float(np.mean(dwin)), "lead_mae": float(np.mean(dlead))}

    step(report, "katago tensorrt fp16 vs katago engine", katago_vs_engine)

    def bench() -> dict:
        cmd = [sys.executable, "-m", "kosumi", "bench", str(tmp / "default-fp16.plan"), "default",
               "--backend", "tensorrt,onnxruntime", "--device", "cuda", "--batch", "1,16,64",
               "--size", "9,19", "--seconds", "0.3", "--rounds", "3", "--json", "--no-memory"]
        gpu = subprocess.run(cmd, capture_output=True, text=True, timeout=500, check=False)
        cmd_cpu = [sys.executable, "-m", "kosumi", "bench", "default", "--backend", "onnxruntime",
                   "--batch", "1,16,64", "--size", "9,19", "--seconds", "0.3", "--rounds", "3",
                   "--json", "--no-memory"]
        cpu_run = subprocess.run(cmd_cpu, capture_output=True, text=True, timeout=300,
                                 check=False)
        out = {}
        for name, proc in (("gpu", gpu), ("cpu", cpu_run)):
            out[name] = json.loads(proc.stdout)["rows"] if proc.returncode == 0 \
                else {"error": proc.stderr[-1500:]}
        return out

    step(report, "bench", bench)
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
