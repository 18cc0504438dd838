"""Where ONNX Runtime spends a forward pass: the share of each op type in its own profile.

Shows whether an int8 model really runs in int8 kernels (QLinearConv, QGemm) or falls back to
float Conv (a DQ-Conv without a Q after it is not fused). One thread, random 0/1 inputs.

    python benchmarks/ort_profile.py g170-fp32.onnx g170-int8.onnx --batch 64 --size 9 [--nodes 20]
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort


def random_feeds(session: ort.InferenceSession, batch: int, size: int,
                 density: float = 0.5) -> dict[str, np.ndarray]:
    """Random 0/1 float32 inputs for every input of ``session``: ``batch`` first, ``size`` for
    the other dynamic axes (the board's)."""
    rng = np.random.default_rng(0)
    feeds = {}
    for i in session.get_inputs():
        shape = [batch] + [d if isinstance(d, int) else size for d in i.shape[1:]]
        feeds[i.name] = (rng.random(shape) < density).astype(np.float32)
    return feeds


def profile(path: str, batch: int, size: int, calls: int, nodes: int = 0) -> dict:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = random_feeds(session, batch, size)
    for _ in range(3):
        session.run(None, feeds)
    t = time.perf_counter()
    for _ in range(calls):
        session.run(None, feeds)
    ms = (time.perf_counter() - t) / calls * 1e3
    events = json.loads(Path(session.end_profiling()).read_text())
    per_op: collections.Counter = collections.Counter()
    per_node: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_op[e["args"]["op_name"]] += e["dur"]
            per_node[(e["name"].removesuffix("_kernel_time"), e["args"]["op_name"])].append(
                e["dur"])
    total = sum(per_op.values()) or 1
    out = {"model": path, "ms_per_batch": round(ms, 2),
           "op_share": {op: round(100 * d / total, 1) for op, d in per_op.most_common(8)},
           "op_us_per_call": {op: round(d / (calls + 3), 1) for op, d in per_op.most_common(8)}}
    if nodes:  # the slowest nodes (ONNX Runtime's node names), by their median time in a call
        order = [k for k, _ in sorted(per_node.items(), key=lambda kv: -float(np.median(kv[1])))]
        out["slowest_nodes_median_us"] = [
            {"node": n, "op": op, "us": float(np.median(per_node[(n, op)]))}
            for n, op in order[:nodes]]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=9)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=0, help="also the N slowest nodes (medians)")
    args = ap.parse_args()
    print(json.dumps([profile(m, args.batch, args.size, args.calls, args.nodes)
                      for m in args.models], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
