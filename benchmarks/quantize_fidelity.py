"""kosumi's int8 PTQ against ONNX Runtime's own ``quantize_static``, side by side, one run.

    python benchmarks/quantize_fidelity.py --model default --calib CALIB [--keep-float auto]
                                           [--method mse] [--calib-size 512] [--out q.json]

Both quantize the same model on the same calibration positions (``CALIB``: a positions or
label folder, other games than the reference set) and are judged on the same held-out positions
(KataGo's 300 reference positions in ``../shared/reference``):

- kosumi: ``kosumi quantize MODEL --bits 8 --calib CALIB`` (the options given), run by the
  numpy integer backend and by ONNX Runtime (its explicit Q/DQ export);
- the peer: kosumi's fp32 ONNX export of the model, quantized by
  ``onnxruntime.quantization.quantize_static`` (QDQ, per-channel int8 weights, uint8
  activations, MinMax calibration on the same positions, which it takes for mixed board sizes),
  run by ONNX Runtime. Features, masking and softmax are kosumi's for both (``NetEvaluator``).

Against the float net (ONNX Runtime fp32): top-1 agreement, tie-aware agreement (the float
probability of the int8 choice is at least 95% of the float best), policy KL(float || int8),
value MAE; against the teacher (KataGo's outputs in the reference file): top-1 and KL of each.
Speed: evals/s at batch 16 and 1, 1 thread, 9x9 and 19x19, the three ONNX files interleaved in
one ``kosumi bench``-style run, with the ratios over fp32. One JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from emit import emit

from kosumi.nets.formats import read_model
from kosumi.nets.onnx import onnx_bytes
from kosumi.quantize import QatStop, QuantizeOptions, quantize_model
from kosumi.quantize.calibration import read_calibration
from kosumi.runtime import NetEvaluator, load_evaluator
from kosumi.runtime.agreement import agreement, evaluate_all, kl, raw_nn_policy, same_top_move
from kosumi.runtime.analyze import position_from_json
from kosumi.runtime.evaluator import same_size_chunks
from kosumi.runtime.onnxruntime_backend import OnnxRuntimeBackend, int8_weight_type
from kosumi.runtime.options import LoadOptions

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"


def against_teacher(records, got) -> dict:
    rows = {}
    for n in (19, 9):
        idx = [i for i, r in enumerate(records) if r["board_size"] == n]
        if not idx or got[idx[0]] is None:
            continue
        top1, kls = [], []
        for i in idx:
            k = records[i]["katago_raw_nn"]
            p = raw_nn_policy(k)
            top1.append(same_top_move(p, got[i].policy))
            kls.append(kl(p, got[i].policy))
        rows[f"{n}x{n}"] = {"top1": round(float(np.mean(top1)), 4),
                            "policy_kl": round(float(np.mean(kls)), 4)}
    return rows


def quantize_static_peer(model: str, calib_states, out: Path, reduce_range: bool = False
                         ) -> Path:
    """kosumi's fp32 ONNX of ``model`` quantized by ONNX Runtime's quantize_static
    (``reduce_range``: its 7-bit weights, its advice for x86 CPUs without VNNI)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    _, ckpt = read_model(model)
    fp32 = out.with_suffix(".fp32.onnx")
    fp32.write_bytes(onnx_bytes(ckpt.config, ckpt.tensors, "fp32"))
    ev = load_evaluator(model, backend="numpy", cache=False)
    batches = []
    for chunk in same_size_chunks(calib_states, 32):
        planes, glob = ev.features.encode([calib_states[i] for i in chunk])
        feed = {"planes": planes}
        if glob is not None:
            feed["globals"] = glob
        batches.append(feed)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(batches)

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(fp32), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                    reduce_range=reduce_range)
    return out


def speed(files: dict[str, Path], sizes=(9, 19), batches=(1, 16), seconds=0.5,
          rounds=5) -> dict:
    """evals/s of each ONNX file, cells interleaved (round-robin) on 1 thread."""
    from kosumi.nets.features import get_feature_set
    from kosumi.runtime.bench import bench_states

    sessions = {k: OnnxRuntimeBackend(p, LoadOptions(threads=1)) for k, p in files.items()}
    cells = []
    for name, be in sessions.items():
        feats = "basic" if "globals" in be.inputs else "lz18"
        fs = get_feature_set(feats)
        for n in sizes:
            for b in batches:
                cells.append((name, n, b, fs.encode(bench_states(n, b)), []))
    for name, _, _, inputs, _ in cells:  # warm-up
        sessions[name].forward(*inputs)
        sessions[name].forward(*inputs)
    for r in range(rounds):
        k = r % len(cells)
        for name, _, _, inputs, times in cells[k:] + cells[:k]:
            end = time.perf_counter() + seconds
            while True:
                t0 = time.perf_counter()
                sessions[name].forward(*inputs)
                t1 = time.perf_counter()
                times.append(t1 - t0)
                if t1 >= end:
                    break
    out: dict = {}
    for name, n, b, _, times in cells:
        out.setdefault(f"{n}x{n} batch {b}", {})[name] = round(b * len(times) / sum(times), 1)
    for row in out.values():
        base = row.get("fp32")
        for name in list(row):
            if base and name != "fp32":
                row[f"{name}_x_fp32"] = round(row[name] / base, 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--calib", required=True)
    ap.add_argument("--calib-size", type=int, default=512)
    ap.add_argument("--method", default="mse")
    ap.add_argument("--keep-float", default="auto")
    ap.add_argument("--weight-range", type=int, help="kosumi's largest int8 weight (default: "
                    "this CPU's choice, 127, or 63 on x86 without VNNI)")
    ap.add_argument("--peer-reduce-range", action="store_true",
                    help="quantize_static with reduce_range=True (7-bit weights)")
    ap.add_argument("--reference", type=Path, default=REFERENCE)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--qat-data", help="also a QAT run on this label or positions folder")
    ap.add_argument("--qat-steps", type=int, default=500)
    ap.add_argument("--qat-lr", type=float, default=2e-5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the QAT run")
    ap.add_argument("--save-onnx", type=Path, metavar="DIR",
                    help="keep the three ONNX files (fp32, kosumi int8, quantize_static) in DIR "
                         "(for benchmarks/ort_profile.py)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not args.reference.exists():
        sys.exit(f"{args.reference} is absent (the shared reference folder)")
    records = [json.loads(x) for x in args.reference.read_text().splitlines() if x.strip()]
    float_ev = load_evaluator(args.model, backend="onnxruntime", cache=False)
    records = [r for r in records if float_ev.supports_size(r["board_size"])]
    states = [position_from_json(json.dumps(r), r["id"]).state for r in records]
    sizes = [s.size for s in states]
    ref = evaluate_all(float_ev, states)
    keep = args.keep_float if args.keep_float in ("auto", "none") else args.keep_float.split(",")
    report: dict = {"model": args.model, "calibration": args.calib,
                    "calibration_positions": args.calib_size,
                    "kosumi_options": {"method": args.method, "keep_float": args.keep_float,
                                       "weight_range": args.weight_range},
                    "quantize_static_reduce_range": args.peer_reduce_range}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        q = tmp_path / "kosumi-int8.safetensors"
        t = time.perf_counter()
        options = QuantizeOptions(method=args.method, keep_float=keep,
                                  weight_max=args.weight_range)
        done = quantize_model(args.model, q, options, calib=args.calib,
                              calib_limit=args.calib_size)
        assert not isinstance(done, QatStop)  # no QAT in this call
        rep, nbytes = done
        report["kosumi_quantize_seconds"] = round(time.perf_counter() - t, 1)
        report["kosumi_kept_float"] = rep.scheme.info.get("keep_float")
        report["kosumi_weight_max"] = rep.scheme.weight_max
        report["kosumi_bytes"] = nbytes
        calib_states = read_calibration(args.calib, args.calib_size)
        t = time.perf_counter()
        peer = quantize_static_peer(args.model, calib_states, tmp_path / "static.onnx",
                                    args.peer_reduce_range)
        report["quantize_static_seconds"] = round(time.perf_counter() - t, 1)
        _, ckpt = read_model(args.model)
        peer_ev = NetEvaluator(OnnxRuntimeBackend(peer, LoadOptions()), ckpt.config,
                               name="quantize_static")
        runs = {
            "kosumi int8 (numpy)": load_evaluator(q, backend="numpy", cache=False),
            "kosumi int8 (onnxruntime)": load_evaluator(q, backend="onnxruntime", cache=False),
            "quantize_static (onnxruntime)": peer_ev,
        }
        if args.qat_data:
            from kosumi.quantize.qat import QatOptions

            qq = tmp_path / "kosumi-qat.safetensors"
            t = time.perf_counter()
            quantize_model(args.model, qq, options,
                           calib=args.calib, calib_limit=args.calib_size, qat_data=args.qat_data,
                           qat_options=QatOptions(steps=args.qat_steps, lr=args.qat_lr,
                                                  threads=args.threads))
            report["kosumi_qat_seconds"] = round(time.perf_counter() - t, 1)
            report["kosumi_qat"] = {"data": args.qat_data, "steps": args.qat_steps,
                                    "lr": args.qat_lr, "target": "float"}
            runs["kosumi int8 QAT (numpy)"] = load_evaluator(qq, backend="numpy", cache=False)
        got = {name: evaluate_all(ev, states) for name, ev in runs.items()}
        report["vs_float"] = {name: agreement(ref, g, sizes) for name, g in got.items()}
        report["vs_teacher"] = {"float": against_teacher(records, ref),
                                **{name: against_teacher(records, g) for name, g in got.items()}}
        a, b = got["kosumi int8 (numpy)"], got["kosumi int8 (onnxruntime)"]
        report["onnxruntime_vs_integer_reference_max_policy_diff"] = float(format(
            max(float(np.abs(x.policy - y.policy).max()) for x, y in zip(a, b, strict=True)),
            ".3g"))
        if not args.no_speed:
            kosumi_onnx = tmp_path / "kosumi-int8.onnx"
            _, qck = read_model(q)
            weights = int8_weight_type(qck.config)  # as the backend would run it here
            report["kosumi_int8_weights"] = weights
            kosumi_onnx.write_bytes(onnx_bytes(qck.config, qck.tensors, int8_weights=weights))
            fp32 = peer.with_suffix(".fp32.onnx")
            report["speed_evals_per_s"] = speed({"fp32": fp32, "kosumi_int8": kosumi_onnx,
                                                 "quantize_static": peer})
            if args.save_onnx:
                args.save_onnx.mkdir(parents=True, exist_ok=True)
                for name, f in (("fp32", fp32), ("kosumi-int8", kosumi_onnx),
                                ("quantize-static", peer)):
                    (args.save_onnx / f"{name}.onnx").write_bytes(f.read_bytes())
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
