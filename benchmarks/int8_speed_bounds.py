"""What holds int8 ONNX Runtime under a speed ratio: timing-only cuts of the same two graphs.

Times, side by side on one thread (interleaved rounds, medians), an fp32 export and an int8
export of the same net and cuts of them whose outputs are meaningless but whose work is a part
of the real graph's:

- ``trunk``: the graph up to the residual stream that the heads read (stem, globals, blocks);
- ``fused``: the int8 graph with the globals path folded into the stem, as a stem convolution
  reading the global inputs as 4 constant planes with centre-tap weights would run it (4 more
  input channels, padded to a whole group of 4; the globals' QuantizeLinear, QGemm and
  QLinearAdd gone);
- ``fused trunk``: both.

``--forms int8,offset`` times each int8 graph also with its weights in the other forms of
``nets.onnx_weights.recode_weights`` (``offset``: zero point -1, ONNX Runtime's QGEMM kernels,
on AMX tiles where the CPU has them), named e.g. ``int8 trunk (offset)``.

    kosumi export default --format onnx --out fp32.onnx
    kosumi export d-none.safetensors --format onnx --out d-none.onnx
    python benchmarks/int8_speed_bounds.py fp32.onnx d-none.onnx [--size 9] [--batch 16]
        [--forms int8,offset]

Prints ms per batch of each and each one's ratio to the fp32 graph's (``x_fp32``) and to the
fp32 trunk's (``x_fp32_trunk``). Written for kosumi's own exports (its node and tensor names).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from emit import emit
from onnx import numpy_helper
from ort_profile import random_feeds

from kosumi.nets.onnx_weights import recode_weights

GLOBAL_PLANES = 4


def _drop_unused(g: onnx.GraphProto) -> None:
    used = {x for n in g.node for x in n.input}
    for t in [t for t in g.initializer if t.name not in used]:
        g.initializer.remove(t)


def trunk(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph up to the tensor the first head reads (``policy_conv``'s input)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    reader = next(n for n in g.node if any(x.startswith("policy_conv.") for x in n.input))
    if reader.op_type == "DequantizeLinear":  # int8: the weights' DQ feeds the convolution
        reader = next(n for n in g.node if reader.output[0] in n.input)
    stream = reader.input[0]
    producer = next(i for i, n in enumerate(g.node) if stream in n.output)
    keep = list(g.node[: producer + 1])
    del g.node[:]
    g.node.extend(keep)
    del g.output[:]
    g.output.extend([onnx.helper.make_tensor_value_info(
        stream, onnx.TensorProto.FLOAT, [None] * 4)])
    _drop_unused(g)
    return model


def fused(model: onnx.ModelProto) -> onnx.ModelProto:
    """The int8 graph with the globals path folded into the stem convolution (see above)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    index = {t.name: i for i, t in enumerate(g.initializer)}

    def get(name: str) -> np.ndarray:
        return numpy_helper.to_array(g.initializer[index[name]]).copy()

    def put(name: str, value: np.ndarray) -> None:
        g.initializer[index[name]].CopyFrom(numpy_helper.from_array(value, name))

    w = get("input_conv.weight_q")
    pad_name = next(n.input[1] for n in g.node if n.op_type == "Pad")
    pads = get(pad_name)
    real = w.shape[1] - int(pads[5])  # Pad's end padding of the channel axis
    wide = -(-(real + GLOBAL_PLANES) // 4) * 4
    pads[5] = wide - real
    put(pad_name, pads)
    w2 = np.zeros((w.shape[0], wide, *w.shape[2:]), w.dtype)
    w2[:, :real] = w[:, :real]
    w2[:, real:real + GLOBAL_PLANES, w.shape[2] // 2, w.shape[3] // 2] = np.random.default_rng(
        0).integers(-60, 60, (w.shape[0], GLOBAL_PLANES))
    put("input_conv.weight_q", w2)
    # the stem convolution's QuantizeLinear now writes the stream (stem:relu) itself
    nodes = list(g.node)
    stem_q = next(n for n in nodes if n.op_type == "QuantizeLinear"
                  and n.input[1] == "input_conv.q_scale")
    stream_q = next(n for n in nodes if n.op_type == "QuantizeLinear"
                    and n.input[1] == "stem:relu.q_scale")
    start, end = nodes.index(stem_q), nodes.index(stream_q)
    stem_q.input[1], stem_q.input[2] = "stem:relu.q_scale", "stem:relu.q_zero"
    stem_q.output[0] = stream_q.output[0]
    del g.node[:]
    g.node.extend(n for i, n in enumerate(nodes) if not start < i <= end)
    _drop_unused(g)
    return model


def time_models(paths: dict[str, Path], batch: int, size: int, rounds: int,
                seconds: float) -> dict[str, float]:
    """Median ms per batch of each model, rounds interleaved, one thread, random 0/1 inputs."""
    runs = {}
    for name, path in paths.items():
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3  # the cuts leave inputs unused
        session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        feeds = random_feeds(session, batch, size, density=0.3)
        session.run(None, feeds)
        runs[name] = (session, feeds)
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, (session, feeds) in runs.items():
            calls, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                session.run(None, feeds)
                calls += 1
            times[name].append((time.perf_counter() - t0) / calls * 1e3)
    return {name: float(np.median(t)) for name, t in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fp32", type=Path, help="kosumi export MODEL --format onnx")
    ap.add_argument("int8", type=Path, help="kosumi export MODEL_Q --format onnx (int8)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=0.4, help="per model per round")
    ap.add_argument("--forms", default="int8", help="int8 weight forms to time, e.g. "
                    "int8,offset (nets.onnx_weights.recode_weights)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    fp32, int8 = onnx.load(str(args.fp32)), onnx.load(str(args.int8))
    graphs = {"fp32": fp32, "fp32 trunk": trunk(fp32)}
    cuts = {"int8": int8, "int8 trunk": trunk(int8), "int8 fused": fused(int8),
            "int8 fused trunk": trunk(fused(int8))}
    for form in forms:
        for name, model in cuts.items():
            if form == "int8":
                graphs[name] = model
                continue
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            recode_weights(copy, form)
            graphs[f"{name} ({form})"] = copy
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, model in graphs.items():
            onnx.checker.check_model(model)
            paths[name] = Path(tmp) / (name.replace(" ", "-") + ".onnx")
            onnx.save(model, str(paths[name]))
        ms = time_models(paths, args.batch, args.size, args.rounds, args.seconds)
    report = {
        "fp32": str(args.fp32), "int8": str(args.int8), "batch": args.batch, "size": args.size,
        "threads": 1, "onnxruntime": ort.__version__,
        "ms_per_batch": {k: round(v, 4) for k, v in ms.items()},
        "x_fp32": {k: round(ms["fp32"] / v, 3) for k, v in ms.items() if k.startswith("int8")},
        "x_fp32_trunk": {k: round(ms["fp32 trunk"] / v, 3) for k, v in ms.items()
                         if k.startswith("int8") and "trunk" in k},
    }
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
