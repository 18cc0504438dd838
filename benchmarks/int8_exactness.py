"""Does ONNX Runtime's int8 run of a quantized net match the integer reference on this CPU?

    python benchmarks/int8_exactness.py Q.safetensors [Q2 ...] [--positions 8] [--size 9,19]

For each quantized checkpoint, every way of holding its weights in the ONNX file (int8, the
default; uint8 with zero point 128, what the onnxruntime backend takes on x86 without VNNI for
weights beyond +-63; offset, int8 with zero point -1, what it takes where AMX tiles make ONNX
Runtime's QGEMM path faster): the largest difference from the integer reference in LSB over every
quantized activation of the whole net, the share of values more than 1 LSB apart, and the
largest difference with each int8 convolution run alone on the reference's input (where the
contract is 1 LSB) and its layer (``kosumi.runtime.int8_check``). One JSON object with this
CPU's line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from emit import emit

from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.onnx_weights import INT8_WEIGHTS
from kosumi.nets.quant import scheme_of
from kosumi.runtime.bench import bench_states
from kosumi.runtime.cpu import cpu_line
from kosumi.runtime.int8_check import layer_lsb_apart, lsb_apart
from kosumi.runtime.onnxruntime_backend import int8_weight_type


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--positions", type=int, default=8, help="positions per board size")
    ap.add_argument("--size", default="9,19")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    report: dict = {"cpu": cpu_line(), "nets": {}}
    for path in args.models:
        q = read_checkpoint(path)
        scheme = scheme_of(q.config)
        if scheme is None or scheme.bits != 8:
            raise SystemExit(f"{path}: not an int8 net (kosumi quantize --bits 8)")
        sizes = [int(x) for x in args.size.split(",") if int(x) in q.config.board_sizes]
        states = [s for n in sizes for s in bench_states(n, args.positions, seed=n)]
        row: dict = {"weight_max": scheme.weight_max,
                     "backend_holds_weights_as": int8_weight_type(q.config)}
        for weights in INT8_WEIGHTS:
            r = lsb_apart(q.config, q.tensors, states, weights)
            layer = layer_lsb_apart(q.config, q.tensors, states, weights)
            row[weights] = {"max_lsb": r["max_lsb"],
                            "share_over_1_lsb": float(format(r["share_over_1_lsb"], ".3g")),
                            "values": r["values"], "layer_by_layer_max_lsb": layer["max_lsb"],
                            "worst_layer": layer["worst"]}
        report["nets"][str(path)] = row
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
