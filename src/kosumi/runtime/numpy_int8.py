"""The integer-only reference: a quantized net (``kosumi quantize --bits 8``) run in numpy.

Between quantize-in and dequantize-out everything is integer arithmetic, exactly as
``nets.quant`` specifies it: int8 weights times uint8/int8 activations summed into int32, an
int32 bias, fixed-point requantisation (int32 multiplier and shift, round half up, in int64),
ReLUs as the clamp of uint8 outputs, residual adds and per-channel bias adds as integer adds with
fixed-point rescales. Layers the scheme keeps in float (and pools, concatenations, KataGo's
pre-activation norms) run in float32 on dequantized values. It is the oracle every int8 backend
is checked against, and the runtime of a bare install.

Speed: an int8 x int8 (or uint8 x int8) product summed over K terms is exact in float32 while
K * 128 * 255 < 2^24, i.e. K <= 513 (K <= 1031 with int8 activations; twice that with weights
in +-63). A k x k convolution is im2col and float32 BLAS in as few groups of taps as keep each
product's K within that bound (``int_conv_nhwc``: one product for a 3x3 over 64 channels in
+-63, two in +-127), the groups' results added in int32; a dense layer, or a convolution with
more input channels than the bound, is float32 BLAS over chunks of at most the exact K, each
chunk's sum converted to int32 and added.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.config import NetConfig
from kosumi.nets.graph import WEIGHTED_OPS, inference_graph
from kosumi.nets.quant import (
    PlanStep,
    QuantScheme,
    check_quantized_tensors,
    integer_add,
    integer_plan,
    quantize_values,
    requantize,
    scheme_of,
)
from kosumi.runtime.backend import Backend
from kosumi.runtime.numpy_ops import float_op, graph_inputs, im2col_nhwc

#: exact float32 products: K * max|q_x| * max|q_w| < 2^24
EXACT = 2**24
#: im2col columns built at a time (a few positions' worth: they stay in the cache for BLAS)
COLS_BYTES = 1 << 20


def exact_chunk(qmax_x: int, weight_max: int) -> int:
    """The largest K for which sum_k q_x * q_w is exact in float32."""
    return max(1, (EXACT - 1) // (qmax_x * max(1, weight_max)))


def int_matmul(x: np.ndarray, w: np.ndarray, chunk: int) -> np.ndarray:
    """x [R, K] (integers as float32) @ w.T [K, O] (integers as float32) -> exact int64 [R, O],
    in float32 BLAS chunks of ``chunk`` along K."""
    k = x.shape[1]
    if k <= chunk:
        return (x @ w.T).astype(np.int64)
    out = np.zeros((x.shape[0], w.shape[0]), dtype=np.int64)
    for start in range(0, k, chunk):
        out += (x[:, start:start + chunk] @ w[:, start:start + chunk].T).astype(np.int64)
    return out


def int_conv_nhwc(x: np.ndarray, w_taps: np.ndarray, k: int, chunk: int) -> np.ndarray:
    """An exact integer k x k convolution (zero padding k//2) of x [B, N, N, C] (integers as
    float32) with ``w_taps`` [k*k, C, O] (integers as float32). The taps are split into as few
    equal groups as keep each group's taps * C summed terms within ``chunk`` (exact in
    float32); per group, its im2col columns [B*N*N, taps*C] are copied tap by tap from the
    padded input (contiguous C-long rows) and multiplied by its taps' weights in one float32
    BLAS product; the groups' results are added in int32. Returns int32 [B, N, N, O]."""
    b, n, m, c = x.shape
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0))) if p else x
    o = w_taps.shape[2]
    taps = k * k
    groups = -(-taps // max(1, chunk // c))
    size = -(-taps // groups)
    out = np.zeros((b, n, m, o), dtype=np.int32)
    step = max(1, COLS_BYTES // (n * m * size * c * 4))  # positions whose columns stay cached
    for first in range(0, b, step):
        rows = slice(first, min(b, first + step))
        for start in range(0, taps, size):
            stop = min(taps, start + size)
            cols = np.empty((rows.stop - first, n, m, stop - start, c), dtype=np.float32)
            for t in range(start, stop):
                dy, dx = divmod(t, k)
                cols[:, :, :, t - start, :] = xp[rows, dy:dy + n, dx:dx + m, :]
            out[rows] += (cols.reshape(-1, (stop - start) * c) @ w_taps[start:stop].reshape(
                -1, o)).astype(np.int32).reshape(-1, n, m, o)
    return out


class Int8NumpyBackend(Backend):
    """Runs a quantized net's integer plan (see the module docstring)."""

    name = "numpy"

    def __init__(self, config: NetConfig, tensors: dict[str, np.ndarray],
                 scheme: QuantScheme | None = None):
        self.config = config
        found = scheme or scheme_of(config)
        if found is None or found.bits != 8:
            raise KosumiError("the int8 numpy backend runs nets quantized to 8 bits")
        self.scheme: QuantScheme = found
        check_quantized_tensors(config, tensors, "int8 net")
        self.graph = inference_graph(config)
        self.plan = integer_plan(self.graph, self.scheme.layers, self.scheme.acts)
        self.acts = dict(self.scheme.acts)
        for out, src in self.plan.shared.items():
            self.acts.setdefault(out, self.acts[src])
        missing = sorted(v for v in self.plan.quantized if v not in self.acts)
        if missing:
            raise KosumiError(f"quantization scheme: activation {missing[0]!r} has no scale")
        self.t = tensors
        # per layer: float32 copies of the integer weights (exact), reshaped for matmuls
        self.wq: dict[str, np.ndarray] = {}
        self.taps: dict[str, np.ndarray] = {}  # k x k int8 convolutions, tap-major
        self.dense: dict[str, np.ndarray] = {}  # float layers' dense weights, transposed
        for n in self.graph.nodes:
            if n.op not in WEIGHTED_OPS:
                continue
            w = tensors[f"{n.name}.weight"]
            o = w.shape[0]
            if self.scheme.layers.get(n.name) == "int8":
                if w.dtype != np.int8:
                    raise KosumiError(f"layer {n.name}: int8 in the scheme, {w.dtype} in the file")
                self.wq[n.name] = np.ascontiguousarray(w.reshape(o, -1), dtype=np.float32)
                if w.ndim == 4 and w.shape[2] > 1:  # [k*k, C, O], for int_conv_nhwc
                    self.taps[n.name] = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(
                        w.shape[2] * w.shape[3], w.shape[1], w.shape[0]), dtype=np.float32)
            elif n.op == "linear":
                self.dense[n.name] = np.ascontiguousarray(w.T, dtype=np.float32)
        self.chunk_u8 = exact_chunk(255, self.scheme.weight_max)
        self.chunk_s8 = exact_chunk(128, self.scheme.weight_max)

    # ------------------------------------------------------------------ values
    def _quant(self, v: dict[str, Any], name: str) -> np.ndarray:
        """The value ``name`` as integers (quantize-in if it is float)."""
        val = v[name]
        if isinstance(val, tuple):
            return val[0]
        return quantize_values(val, self.acts[name])

    def _float(self, v: dict[str, Any], name: str) -> np.ndarray:
        val = v[name]
        if isinstance(val, tuple):
            q, act = val
            return (q - act.zero_point).astype(np.float32) * np.float32(act.scale)
        return val

    def _run(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, Any]:
        v = graph_inputs(self.graph, planes, globals)
        self.advance(v, 0, len(self.plan.steps))
        return v

    def advance(self, v: dict[str, Any], start: int, stop: int) -> None:
        """Run the plan's steps ``start`` to ``stop - 1`` on ``v`` in place (quantized values
        held as (integers, ActQuant); ``dequantized`` reads one): a layer-by-layer walk in
        which the later layers may change between calls (``quantize.refit``)."""
        for st in self.plan.steps[start:stop]:
            v[st.output] = self._step(st, v)

    def dequantized(self, v: dict[str, Any], name: str) -> np.ndarray:
        """Value ``name`` of ``v`` as the next integer op sees it: quantized (quantize-in where
        it is still float) and dequantized."""
        act = self.acts[name]
        return (self._quant(v, name) - act.zero_point).astype(np.float32) * np.float32(act.scale)

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        v = self._run(planes, globals)
        return {key: np.ascontiguousarray(self._float(v, name), dtype=np.float32)
                for key, name in self.graph.outputs.items()}

    def values(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        """Every value the plan computes, dequantized (channels-last): what calibration and
        bias correction compare with the float graph's."""
        v = self._run(planes, globals)
        return {name: self._float(v, name) for name in v}

    # ------------------------------------------------------------------ steps
    def _step(self, st: PlanStep, v: dict[str, Any]) -> Any:
        n = st.node
        if st.integer and n.op in WEIGHTED_OPS:
            return self._int_layer(st, v)
        if st.integer and n.op in ("add", "add_bias"):
            a, b = (self._quant(v, x) for x in n.inputs)
            if n.op == "add_bias":
                b = b[:, None, None, :]
            act = self.acts[st.output]
            acts_in = [self.acts[x] for x in n.inputs]
            return (integer_add(a, b, self.scheme.adds[n.name], acts_in[0], acts_in[1], act,
                                relu=st.fused is not None), act)
        if st.integer and n.op == "flatten":
            q, act = v[n.inputs[0]]
            return (q.transpose(0, 3, 1, 2).reshape(q.shape[0], -1), act)
        y = float_op(n, [self._float(v, x) for x in n.inputs], self.t, self.dense)
        return np.maximum(y, 0.0) if st.fused is not None else y

    def _int_layer(self, st: PlanStep, v: dict[str, Any]) -> Any:
        n = st.node
        x_name = n.inputs[0]
        q = self._quant(v, x_name)
        x_act = self.acts[x_name]
        # centred on the zero point (so the zero padding is the zero point, as in ONNX)
        centred = (q - x_act.zero_point).astype(np.float32)
        chunk = self.chunk_u8 if x_act.dtype == "uint8" and not x_act.zero_point \
            else self.chunk_s8
        t = self.t
        k = int(t[f"{n.name}.weight"].shape[2]) if n.op == "conv" else 1
        lead = q.shape[:3] if n.op == "conv" else q.shape[:1]
        if n.name in self.taps and centred.shape[-1] <= chunk:
            o = t[f"{n.name}.weight"].shape[0]
            acc = int_conv_nhwc(centred, self.taps[n.name], k, chunk).reshape(-1, o) \
                + t[f"{n.name}.bias"]
        else:
            cols = im2col_nhwc(centred, k) if n.op == "conv" else centred
            acc = int_matmul(cols, self.wq[n.name], chunk) + t[f"{n.name}.bias"].astype(np.int64)
        if st.requant:
            act = self.acts[st.output]
            y = requantize(acc, t[f"{n.name}.multiplier"], t[f"{n.name}.shift"], act,
                           relu=st.fused is not None)
            return (y.reshape(*lead, -1).astype(np.int32), act)
        scale = (np.float64(x_act.scale) * t[f"{n.name}.weight_scale"].astype(np.float64))
        y = (acc * scale).astype(np.float32).reshape(*lead, -1)  # dequantize-out
        return np.maximum(y, 0.0) if st.fused is not None else y
