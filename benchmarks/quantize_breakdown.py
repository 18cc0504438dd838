"""Where an int8 net's error comes from: each quantization of its scheme simulated alone.

    python benchmarks/quantize_breakdown.py --model default --quantized default-int8.safetensors
                                            [--reference raw_nn.jsonl | --positions dev9,...]
                                            [--out b.json]

``MODEL`` is the float net, ``QUANTIZED`` its ``kosumi quantize`` output (the scheme read from
it: which layers are int8, every activation scale). The float net's folded graph runs in torch
(``quantize.qat.FakeQuantGraph``) with only some of the scheme's quantizations switched on:
all of them; all but the residual stream (the values a residual add reads on its skip path,
and the last block's output: what ``stream_in_float`` leaves unquantized); the weights only;
the activations only; each int8 layer's weights alone; each quantized activation alone. Each
row is judged against the float graph on the held-out reference positions (KataGo's 300 in
``../shared/reference``), or on ``--positions`` (any positions or label folders or JSON Lines
files kosumi reads, comma-separated: a larger sample), per board size: top-1, tie-aware top-1,
policy KL, value MAE. The fake quantization has no bias correction, so "all" sits a
little above the real int8 net, which is also given (the integer backend).

"near_ties" lists, for the real int8 net, every position whose top move differs from the
float net's: the float probabilities of both moves and their ratio, and whether a symmetry of
the position maps one move onto the other (then they are the same move); "float_close_calls"
counts the positions where the float net's second move has at least 95% (99%) of its best
move's probability.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from emit import emit

from kosumi.go.coords import symmetry_permutation
from kosumi.nets.fold import fold
from kosumi.nets.formats import read_model
from kosumi.nets.quant import scheme_of
from kosumi.quantize.calibration import read_calibration
from kosumi.quantize.qat import FakeQuantGraph
from kosumi.runtime import NetEvaluator, load_evaluator
from kosumi.runtime.agreement import agreement, evaluate_all
from kosumi.runtime.analyze import position_from_json
from kosumi.runtime.backend import Backend

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"


class Partial(FakeQuantGraph):
    """The fake-quantized graph with only the named weights and activations quantized."""

    def __init__(self, *args, weights: set[str], acts: set[str]):
        super().__init__(*args)
        self.only_weights, self.only_acts = weights, acts
        self.acts = {k: a for k, a in self.acts.items() if k in acts}
        self.int_layers = self.int_layers & weights


class TorchGraph(Backend):
    name = "fake-quant"

    def __init__(self, model: torch.nn.Module):
        self.model = model.eval()

    def forward(self, planes, globals):
        with torch.no_grad():
            out = self.model(torch.from_numpy(planes),
                             None if globals is None else torch.from_numpy(globals))
        return {k: v.numpy() for k, v in out.items()}


def symmetric_pair(state, a: int, b: int) -> bool:
    """Does a symmetry of the position (stones only) map point a onto point b?"""
    n = state.size
    if max(a, b) >= n * n:
        return False
    board = np.frombuffer(bytes(state.board), dtype=np.uint8)
    for sym in range(1, 8):
        perm = symmetry_permutation(n, sym)
        seen = np.empty_like(board)
        seen[perm] = board
        if np.array_equal(seen, board) and perm[a] == b:
            return True
    return False


def stream_values(graph) -> set[str]:
    """The residual stream: each add's skip input, and the value the last add's ReLU gives."""
    adds = [n for n in graph.nodes if n.op == "add"]
    stream = {n.inputs[0] for n in adds}
    if adds:
        last = f"{adds[-1].name}:add"
        stream |= {f"{n.name}:relu" for n in graph.nodes if n.op == "relu" and n.inputs == (last,)}
    return stream


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--quantized", required=True)
    ap.add_argument("--reference", type=Path, default=REFERENCE)
    ap.add_argument("--positions", help="positions or label folders or JSON Lines files, "
                    "comma-separated (instead of --reference)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.positions is None and not args.reference.exists():
        sys.exit(f"{args.reference} is absent (the shared reference folder)")
    torch.set_num_threads(args.threads)
    _, ckpt = read_model(args.model)
    _, qnet = read_model(args.quantized)
    scheme = scheme_of(qnet.config)
    if scheme is None or scheme.bits != 8:
        sys.exit(f"{args.quantized}: not an int8 net")
    folded = fold(ckpt.config, ckpt.tensors)
    if args.positions is None:
        records = [json.loads(x) for x in args.reference.read_text().splitlines() if x.strip()]
        records = [r for r in records if r["board_size"] in ckpt.config.board_sizes]
        states = [position_from_json(json.dumps(r), r["id"]).state for r in records]
        ids = [r["id"] for r in records]
    else:
        states = [s for folder in args.positions.split(",")
                  for s in read_calibration(folder, limit=None)
                  if s.size in ckpt.config.board_sizes]
        ids = [str(i) for i in range(len(states))]
    sizes = [s.size for s in states]
    base = (folded, scheme.layers, scheme.acts, scheme.weight_max)
    every = FakeQuantGraph(*base)
    all_w, all_a = set(every.int_layers), set(every.acts)
    ref = evaluate_all(NetEvaluator(TorchGraph(FakeQuantGraph(*base, quantize=False)),
                                    ckpt.config), states)

    def judged(weights: set[str], acts: set[str]) -> dict:
        model = Partial(*base, weights=weights, acts=acts)
        return agreement(ref, evaluate_all(NetEvaluator(TorchGraph(model), ckpt.config),
                                           states), sizes)

    real = evaluate_all(load_evaluator(args.quantized, backend="numpy", cache=False), states)
    report: dict = {
        "model": args.model, "quantized": args.quantized,
        "kept_float": [k for k, m in scheme.layers.items() if m == "float"],
        "int8_net": agreement(ref, real, sizes),
        "all": judged(all_w, all_a),
        "weights_only": judged(all_w, set()),
        "stream_in_float": judged(all_w, all_a - stream_values(every.graph)),
        "activations_only": judged(set(), all_a),
        "each_layer_weights": {w: judged({w}, set()) for w in sorted(all_w)},
        "each_activation": {a: judged(set(), {a}) for a in every.acts},
    }
    ties = []
    for id_, s, a, b in zip(ids, states, ref, real, strict=True):
        i, j = int(np.argmax(a.policy)), int(np.argmax(b.policy))
        if i != j:
            ties.append({"id": id_, "stones": int(sum(1 for x in s.board if x)),
                         "float_p_best": round(float(a.policy[i]), 4),
                         "float_p_int8_choice": round(float(a.policy[j]), 4),
                         "ratio": round(float(a.policy[j] / a.policy[i]), 4),
                         "same_move_by_symmetry": symmetric_pair(s, i, j)})
    report["near_ties"] = ties
    close: dict = {}
    for s, a in zip(states, ref, strict=True):
        top2 = np.sort(a.policy)[-2:]
        row = close.setdefault(f"{s.size}x{s.size}", {"positions": 0, "second_within_5%": 0,
                                                      "second_within_1%": 0})
        row["positions"] += 1
        row["second_within_5%"] += int(top2[0] >= 0.95 * top2[1])
        row["second_within_1%"] += int(top2[0] >= 0.99 * top2[1])
    report["float_close_calls"] = close
    return emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
