"""ONNX: any net kosumi runs as an ONNX model with kosumi metadata, and such files read back.

``onnx_model(config, tensors, precision)`` builds the model from the net's inference graph
(``nets.graph``) over its folded tensors (``nets.fold``: no BatchNorm is left), node by node with
``onnx.helper`` -- no torch, no tracing. The file is the contract every ONNX consumer sees:

- opset ``OPSET`` (17), IR version 8, producer ``kosumi``;
- inputs ``planes`` float32 [batch, C, size, size] and, when the feature set has global inputs,
  ``globals`` float32 [batch, G]; ``batch`` is dynamic, and so is ``size`` for every head but
  ``lz`` (19x19 only): one file serves every board size of the config;
- outputs named as the backend contract names them (``runtime.backend``): ``policy`` [batch,
  size*size+1] logits, ``value`` [batch, 3] wdl logits or [batch, 1] pre-tanh, ``score_lead``
  [batch] and ``ownership`` [batch, size*size] (kosumi nets that have them); KataGo nets give
  ``policy``, ``value``, ``ownership`` and ``score`` [batch, 4] (raw: score mean/20,
  pre-softplus stdev/20, lead/20, pre-softplus time-left variance/40) instead of ``score_lead``;
- ``precision`` fp16: fp16 weights and compute; the inputs and outputs stay float32 (a Cast at
  each end), so callers never change;
- ``metadata_props``: ``kosumi_format`` = ``kosumi-onnx``, ``kosumi_config`` (the config JSON:
  features, head, board sizes, value kind, provenance), ``kosumi_precision``,
  ``kosumi_exporter`` (the exporter's version) and ``kosumi_source_sha256`` (of the tensors).

Pools use ReduceMean over the board, which equals KataGo's sum / on-board area because kosumi
always runs a net at the board's exact size (and is safer in fp16 than a sum).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.fold import fold
from kosumi.nets.graph import Graph, Node, inference_graph
from kosumi.nets.onnx_meta import (
    META_CONFIG,
    META_EXPORTER,
    META_FORMAT,
    META_INT8_WEIGHTS,
    META_PRECISION,
    META_SOURCE,
)
from kosumi.nets.onnx_weights import form_words, recode_weights

OPSET = 17
IR_VERSION = 8
ONNX_FORMAT = "kosumi-onnx"
EXPORTER_VERSION = "4"  # 2: padded int8 inputs; 3: offset weights; 4: the stream identity
PRODUCER = "kosumi"
PRECISIONS = ("fp32", "fp16")  # of a float net; a quantized net's is its scheme's
CONV_CHANNEL_MULTIPLE = 4  # int8 convolutions' input channels are padded to a multiple of it


def tensors_sha256(config: NetConfig, tensors: dict[str, np.ndarray]) -> str:
    """A content hash of a net: its config JSON and every tensor's name, type, shape and bytes."""
    h = hashlib.sha256(config.to_json().encode())
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _OnnxBuilder:
    """Translates graph nodes into ONNX nodes (see the module docstring)."""

    def __init__(self, graph: Graph, t: dict[str, np.ndarray], half: bool):
        from onnx import TensorProto, helper, numpy_helper

        self.helper, self.numpy_helper, self.TP = helper, numpy_helper, TensorProto
        self.graph, self.t = graph, t
        self.dtype = np.float16 if half else np.float32
        self.elem = TensorProto.FLOAT16 if half else TensorProto.FLOAT
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.names: set[str] = set()
        self.count = 0

    def const(self, name: str, value: Any, dtype: Any = None) -> str:
        if name not in self.names:
            arr = np.asarray(value, dtype=dtype or self.dtype)
            self.inits.append(self.numpy_helper.from_array(arr, name))
            self.names.add(name)
        return name

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        self.count += 1
        out = output or f"t{self.count}"
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], name=f"n{self.count}",
                                                **attrs))
        return out

    def pooled_mean(self, x: str) -> str:
        return self.op("ReduceMean", [x], axes=[2, 3], keepdims=0)

    def node(self, n: Node, xs: list[str]) -> str:
        t, op = self.t, n.op
        if op == "conv":
            w = self.const(f"{n.name}.weight", t[f"{n.name}.weight"])
            b = self.const(f"{n.name}.bias", t[f"{n.name}.bias"])
            k = int(t[f"{n.name}.weight"].shape[2])
            return self.op("Conv", [xs[0], w, b], kernel_shape=[k, k], pads=[k // 2] * 4)
        if op == "linear":
            w = self.const(f"{n.name}.weight", t[f"{n.name}.weight"])
            b = self.const(f"{n.name}.bias", t[f"{n.name}.bias"])
            return self.op("Gemm", [xs[0], w, b], transB=1)
        if op == "relu":
            return self.op("Relu", xs)
        if op == "add":
            return self.op("Add", xs)
        if op == "add_bias":
            axes = self.const("axes_2_3", [2, 3], np.int64)
            return self.op("Add", [xs[0], self.op("Unsqueeze", [xs[1], axes])])
        if op == "affine":
            c = t[f"{n.name}.scale"].size
            s = self.const(f"{n.name}.scale", t[f"{n.name}.scale"].reshape(1, c, 1, 1))
            b = self.const(f"{n.name}.bias", t[f"{n.name}.bias"].reshape(1, c, 1, 1))
            return self.op("Add", [self.op("Mul", [xs[0], s]), b])
        if op == "mean_max":
            mx = self.op("ReduceMax", [xs[0]], axes=[2, 3], keepdims=0)
            return self.op("Concat", [self.pooled_mean(xs[0]), mx], axis=1)
        if op == "area":
            starts, ends = self.const("zero_1", [0], np.int64), self.const("one_1", [1], np.int64)
            plane0 = self.op("Slice", [xs[0], starts, ends, self.const("axis_1", [1], np.int64)])
            return self.op("ReduceSum", [plane0, self.const("axes_2_3", [2, 3], np.int64)],
                           keepdims=0)
        if op in ("kata_gpool", "kata_vpool"):
            x, area = xs
            mean = self.pooled_mean(x)
            off = self.op("Sub", [self.op("Sqrt", [area]), self.const("c14", 14.0)])
            second = self.op("Mul", [mean, self.op("Div", [off, self.const("c10", 10.0)])])
            if op == "kata_gpool":
                third = self.op("ReduceMax", [x], axes=[2, 3], keepdims=0)
            else:
                q = self.op("Div", [self.op("Mul", [off, off]), self.const("c100", 100.0)])
                third = self.op("Mul", [mean, self.op("Sub", [q, self.const("c0_1", 0.1)])])
            return self.op("Concat", [mean, second, third], axis=1)
        if op == "flatten":
            return self.op("Flatten", xs, axis=1)
        if op == "concat":
            return self.op("Concat", xs, axis=1)
        if op == "squeeze":
            return self.op("Squeeze", [xs[0], self.const("axis_1", [1], np.int64)])
        return self.transformer_node(n, xs)

    # ---------------------------------------------------------------- transformer ops
    def transformer_node(self, n: Node, xs: list[str]) -> str:
        """The ops of KataGo's later nets: SiLU, Mish, product, RMS norm, attention."""
        op = n.op
        if op == "silu":
            return self.op("Mul", [xs[0], self.op("Sigmoid", xs)])
        if op == "mish":
            return self.op("Mul", [xs[0], self.op("Tanh", [self.op("Softplus", xs)])])
        if op == "mul":
            return self.op("Mul", xs)
        if op == "rmsnorm":
            return self.rmsnorm(xs[0], n)
        if op == "attention":
            return self.attention(n, *xs)
        raise KosumiError(f"ONNX export: unknown op {op!r} in layer {n.name}")

    def to_float(self, x: str) -> str:
        """x in float32 (a Cast in an fp16 model): norms and softmax run in float32."""
        return self.op("Cast", [x], to=self.TP.FLOAT) if self.dtype == np.float16 else x

    def from_float(self, x: str) -> str:
        return self.op("Cast", [x], to=self.elem) if self.dtype == np.float16 else x

    def rmsnorm(self, x: str, n: Node) -> str:
        xf = self.to_float(x)
        axes = [1, 2, 3] if n.attrs["spatial"] else [1]
        ms = self.op("ReduceMean", [self.op("Mul", [xf, xf])], axes=axes, keepdims=1)
        eps = self.const(f"{n.name}.eps", np.float32(n.attrs["eps"]), np.float32)
        return self.from_float(self.op("Div", [xf, self.op("Sqrt", [self.op("Add", [ms, eps])])]))

    def _heads(self, x: str, heads: int, dim: int) -> str:
        """[B, heads*dim, N, N] -> [B, heads, T, dim]."""
        shape = self.const(f"shape_heads_{heads}_{dim}", [0, heads, dim, -1], np.int64)
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=[0, 1, 3, 2])

    def _rope_tables(self, n: Node, q: str) -> tuple[str, str]:
        """cos, sin [K or 1, T, D/2] of the board's points, from q's board size (float32)."""
        a = n.attrs
        i64 = np.int64
        side = self.op("Gather", [self.op("Shape", [q]), self.const("idx_2", 2, i64)], axis=0)
        pos = self.op("Range", [self.const("zero_i", 0, i64), self.op("Mul", [side, side]),
                                self.const("one_i", 1, i64)])
        fl = self.TP.FLOAT
        col = self.op("Cast", [self.op("Mod", [pos, side])], to=fl)
        row = self.op("Cast", [self.op("Div", [pos, side])], to=fl)
        ax = self.const("axes_0_2", [0, 2], i64)
        col, row = self.op("Unsqueeze", [col, ax]), self.op("Unsqueeze", [row, ax])  # [1,T,1]
        if a["rope"] == "learned":
            f = np.asarray(self.t[f"{n.name}.rope_freqs"], dtype=np.float32)  # [K, D/2, 2]
            fx = self.const(f"{n.name}.rope_fx", f[:, None, :, 0], np.float32)
            fy = self.const(f"{n.name}.rope_fy", f[:, None, :, 1], np.float32)
            ang = self.op("Add", [self.op("Mul", [col, fx]), self.op("Mul", [row, fy])])
        else:
            pairs = a["q_dim"] // 2
            inv = 1.0 / np.power(np.float32(a["rope_theta"]),
                                 2 * np.arange(pairs // 2, dtype=np.float32) / pairs)
            z = np.zeros(pairs // 2, np.float32)
            fy = self.const(f"{n.name}.rope_fy", np.concatenate((inv, z))[None, None], np.float32)
            fx = self.const(f"{n.name}.rope_fx", np.concatenate((z, inv))[None, None], np.float32)
            ang = self.op("Add", [self.op("Mul", [col, fx]), self.op("Mul", [row, fy])])
        return self.op("Cos", [ang]), self.op("Sin", [ang])

    def _rotate(self, x: str, cos: str, sin: str, dim: int) -> str:
        """x [B, h, T, D] float32: channel pairs (2p, 2p+1) turned by cos/sin [h or 1, T, D/2]."""
        i64 = np.int64
        pairs = self.op("Reshape", [x, self.const(f"shape_pairs_{dim}", [0, 0, 0, dim // 2, 2],
                                                  i64)])
        x0 = self.op("Gather", [pairs, self.const("zero_i", 0, i64)], axis=4)
        x1 = self.op("Gather", [pairs, self.const("one_i", 1, i64)], axis=4)
        y0 = self.op("Sub", [self.op("Mul", [x0, cos]), self.op("Mul", [x1, sin])])
        y1 = self.op("Add", [self.op("Mul", [x0, sin]), self.op("Mul", [x1, cos])])
        last = self.const("axis_last", [-1], i64)
        y = self.op("Concat", [self.op("Unsqueeze", [y0, last]), self.op("Unsqueeze", [y1, last])],
                    axis=-1)
        return self.op("Reshape", [y, self.const(f"shape_unpair_{dim}", [0, 0, 0, dim], i64)])

    def _repeat_heads(self, x: str, heads: int, group: int, dim: int) -> str:
        """[B, K, T, D] -> [B, heads = K*group, T, D], each KV head repeated for its group."""
        i64 = np.int64
        y = self.op("Unsqueeze", [x, self.const("axis_2", [2], i64)])
        y = self.op("Expand", [y, self.const(f"expand_{group}", [1, 1, group, 1, 1], i64)])
        return self.op("Reshape", [y, self.const(f"shape_merge_{heads}_{dim}",
                                                 [0, heads, -1, dim], i64)])

    def attention(self, n: Node, q: str, k: str, v: str) -> str:
        a = n.attrs
        h, kv, d, e = a["heads"], a["kv_heads"], a["q_dim"], a["v_dim"]
        qh = self.to_float(self._heads(q, h, d))
        kh = self.to_float(self._heads(k, kv, d))
        vh = self._heads(v, kv, e)
        if a["rope"] != "none":
            cos, sin = self._rope_tables(n, q)
            kh = self._rotate(kh, cos, sin, d)
            if a["rope"] == "learned" and kv > 1 and h != kv:
                i64 = np.int64
                half = [d // 2]
                cos, sin = (self.op("Reshape", [self.op("Expand", [
                    self.op("Unsqueeze", [c, self.const("axis_1", [1], i64)]),
                    self.const(f"expand_rope_{h // kv}", [1, h // kv, 1, 1], i64)]),
                    self.const(f"shape_rope_{h}_{d}", [h, -1, *half], i64)]) for c in (cos, sin))
            qh = self._rotate(qh, cos, sin, d)
        if kv != h:
            kh = self._repeat_heads(kh, h, h // kv, d)
            vh = self._repeat_heads(vh, h, h // kv, e)
        scores = self.op("MatMul", [qh, self.op("Transpose", [kh], perm=[0, 1, 3, 2])])
        scale = self.const(f"scale_{d}", np.float32(1.0 / np.sqrt(d)), np.float32)
        w = self.from_float(self.op("Softmax", [self.op("Mul", [scores, scale])], axis=-1))
        o = self.op("Transpose", [self.op("MatMul", [w, vh])], perm=[0, 1, 3, 2])  # [B,H,E,T]
        i64 = np.int64
        qs = self.op("Shape", [q])
        shape = self.op("Concat", [
            self.op("Slice", [qs, self.const("zero_1", [0], i64), self.const("one_1", [1], i64)]),
            self.const(f"channels_{h * e}", [h * e], i64),
            self.op("Slice", [qs, self.const("two_1", [2], i64), self.const("four_1", [4], i64)])],
            axis=0)
        return self.op("Reshape", [o, shape])


class _QdqBuilder(_OnnxBuilder):
    """An int8 net (``nets.quant``) as explicit QuantizeLinear/DequantizeLinear ONNX built from
    kosumi's own scales: int8 weights and int32 biases as initializers behind
    DequantizeLinear, every quantized activation as a Q/DQ pair with zero point 0 (uint8 or
    int8), ReLUs left out where a uint8 Q's clamp is the ReLU, integer adds as DQ-Add-Q, an
    int8 convolution's input padded to whole groups of 4 channels (``_padded_input``). ONNX
    Runtime fuses these patterns into its integer kernels (QLinearConv, QGemm, QLinearAdd)."""

    def __init__(self, graph: Graph, t: dict[str, np.ndarray], config: NetConfig,
                 pad_channels: bool = True):
        super().__init__(graph, {}, half=False)
        self.pad_channels = pad_channels
        from kosumi.nets.quant import check_quantized_tensors, integer_plan, scheme_of

        self.scheme = scheme_of(config)
        assert self.scheme is not None
        check_quantized_tensors(config, t, "ONNX export")
        self.raw = t
        self.plan = integer_plan(graph, self.scheme.layers, self.scheme.acts)
        self.acts = dict(self.scheme.acts)
        for out, src in self.plan.shared.items():
            self.acts.setdefault(out, self.acts[src])
        # residual-stream values (read by integer adds) -> channels, as int8 convolutions read them
        adds = {v for st in self.plan.steps if st.integer and st.node.op == "add"
                for v in st.node.inputs}
        self.stream = {st.node.inputs[0]: int(t[f"{st.node.name}.weight"].shape[1])
                       for st in self.plan.steps if st.integer and st.node.op == "conv"
                       and st.node.inputs[0] in adds}
        self.qvals: dict[str, str] = {}  # value -> its quantized tensor's name
        self.fvals: dict[str, str] = {}  # value -> its float tensor (computed in float)
        self.dqvals: dict[str, str] = {}  # value -> DequantizeLinear of its quantized tensor

    def _act_consts(self, value: str) -> tuple[str, str]:
        act = self.acts[value]
        scale = self.const(f"{value}.q_scale", np.float32(act.scale), np.float32)
        zp_type = np.uint8 if act.dtype == "uint8" else np.int8
        return scale, self.const(f"{value}.q_zero", zp_type(act.zero_point), zp_type)

    def quantized(self, value: str) -> str:
        """The quantized tensor of ``value`` (QuantizeLinear of its float one if needed)."""
        if value not in self.qvals:
            scale, zp = self._act_consts(value)
            q = self.op("QuantizeLinear", [self.fvals[value], scale, zp])
            if self.pad_channels and value in self.stream:
                q = self._stream_identity(value, q, scale, zp)
            self.qvals[value] = q
        return self.qvals[value]

    def _stream_identity(self, value: str, q: str, scale: str, zp: str) -> str:
        """``q`` again, through an exact identity 1x1 int8 convolution (identity weights of scale
        1, the same activation scale in and out: every integer unchanged). On the CPU, ONNX
        Runtime's NHWC rewrite leaves the residual stream's QLinearAdds in NCHW, two Transposes
        a block, when the stream starts from a float layer (``auto``'s float stem); started by
        a QLinearConv, the whole trunk stays NHWC (3 Transposes in all instead of 14 for
        `default`, its median 9x9 batch 1.64-1.67 ms instead of 1.69). Not for TensorRT or
        CUDA (``pad_channels`` False)."""
        c = self.stream[value]
        w = self.const(f"{value}.identity_q", np.eye(c, dtype=np.int8).reshape(c, c, 1, 1),
                       np.int8)
        ws = self.const(f"{value}.identity_scale", np.ones(c, np.float32), np.float32)
        wz = self.const(f"{value}.identity_zero", np.zeros(c, np.int8), np.int8)
        wf = self.op("DequantizeLinear", [w, ws, wz], axis=0)
        x = self.op("DequantizeLinear", [q, scale, zp])
        return self.op("QuantizeLinear", [self.op("Conv", [x, wf], kernel_shape=[1, 1]),
                                          scale, zp])

    def dequantized(self, value: str) -> str:
        """DequantizeLinear of ``value``'s quantized tensor (quantizing it first if needed):
        what an integer op reads."""
        if value not in self.dqvals:
            scale, zp = self._act_consts(value)
            self.dqvals[value] = self.op("DequantizeLinear", [self.quantized(value), scale, zp])
        return self.dqvals[value]

    def floating(self, value: str) -> str:
        """A float tensor of ``value``: the float one if it was computed in float, else its
        dequantized one (what a float op reads)."""
        return self.fvals[value] if value in self.fvals else self.dequantized(value)

    def _dq_weight(self, name: str, pad_inputs: int = 0) -> str:
        t = self.raw
        w = t[f"{name}.weight"]
        if pad_inputs:  # zero weights for the padded input channels (``_padded_input``)
            w = np.pad(w, [(0, 0), (0, pad_inputs)] + [(0, 0)] * (w.ndim - 2))
        sw = t[f"{name}.weight_scale"].astype(np.float32)
        o = w.shape[0]
        wq = self.const(f"{name}.weight_q", w, np.int8)
        w_scale = self.const(f"{name}.weight_scale", sw, np.float32)
        w_zero = self.const(f"{name}.weight_zero", np.zeros(o, np.int8), np.int8)
        return self.op("DequantizeLinear", [wq, w_scale, w_zero], axis=0)

    def _padded_input(self, value: str, channels: int) -> tuple[str, int]:
        """(DequantizeLinear of ``value``'s quantized tensor padded with zero-point channels up
        to a multiple of ``CONV_CHANNEL_MULTIPLE``, how many were added). ONNX Runtime's fast
        symmetric int8 convolution on the CPU (MLAS's ConvSym) takes input channels in groups
        of 4 and leaves a convolution with any other count to its slower im2col GEMM: the stem
        of 11 feature planes ran at a third of a trunk convolution's speed per multiply-add.
        The padded channels meet zero weights, so every integer stays the same. Not for
        TensorRT or CUDA (``pad_channels`` False), which pad channels their own way."""
        extra = -channels % CONV_CHANNEL_MULTIPLE if self.pad_channels else 0
        if not extra:
            return self.dequantized(value), 0
        scale, zp = self._act_consts(value)
        pads = self.const(f"pad_channels_{extra}", [0, 0, 0, 0, 0, extra, 0, 0], np.int64)
        padded = self.op("Pad", [self.quantized(value), pads, zp], mode="constant")
        return self.op("DequantizeLinear", [padded, scale, zp]), extra

    def _int_layer(self, st: Any) -> None:
        n = st.node
        t = self.raw
        if n.op == "conv":  # quantize-in first if it was float
            xf, extra = self._padded_input(n.inputs[0], int(t[f"{n.name}.weight"].shape[1]))
        else:
            xf, extra = self.dequantized(n.inputs[0]), 0
        wf = self._dq_weight(n.name, extra)
        sx = self.acts[n.inputs[0]].scale
        b_scale = (np.float64(sx) * t[f"{n.name}.weight_scale"].astype(np.float64)).astype(
            np.float32)
        o = b_scale.size
        bq = self.const(f"{n.name}.bias_q", t[f"{n.name}.bias"], np.int32)
        bs = self.const(f"{n.name}.bias_scale", b_scale, np.float32)
        bz = self.const(f"{n.name}.bias_zero", np.zeros(o, np.int32), np.int32)
        bf = self.op("DequantizeLinear", [bq, bs, bz], axis=0)
        if n.op == "conv":
            k = int(t[f"{n.name}.weight"].shape[2])
            y = self.op("Conv", [xf, wf, bf], kernel_shape=[k, k], pads=[k // 2] * 4)
        else:
            y = self.op("Gemm", [xf, wf, bf], transB=1)
        if st.requant:  # a uint8 Q with zero point 0 clamps at 0: the fused ReLU costs nothing
            self._requantize(st.output, self._relu_if_needed(st, y))
        else:
            self.fvals[st.output] = self.op("Relu", [y]) if st.fused is not None else y

    def _relu_if_needed(self, st: Any, y: str) -> str:
        act = self.acts[st.output]
        if st.fused is None or (act.dtype == "uint8" and act.zero_point == 0):
            return y
        return self.op("Relu", [y])

    def _requantize(self, value: str, y: str) -> None:
        scale, zp = self._act_consts(value)
        self.qvals[value] = self.op("QuantizeLinear", [y, scale, zp])

    def run(self, inputs: dict[str, str]) -> None:
        self.fvals.update(inputs)
        for st in self.plan.steps:
            n = st.node
            if st.integer and n.op in ("conv", "linear"):
                self._int_layer(st)
            elif st.integer and n.op in ("add", "add_bias"):
                a = self.dequantized(n.inputs[0])
                bq = self.quantized(n.inputs[1])
                if n.op == "add_bias":
                    axes = self.const("axes_2_3", [2, 3], np.int64)
                    scale, zp = self._act_consts(n.inputs[1])
                    bq = self.op("Unsqueeze", [bq, axes])
                    bf = self.op("DequantizeLinear", [bq, scale, zp])
                else:
                    bf = self.floating(n.inputs[1])
                self._requantize(st.output, self._relu_if_needed(st, self.op("Add", [a, bf])))
            elif st.integer and n.op == "flatten":
                self.qvals[st.output] = self.op("Flatten", [self.quantized(n.inputs[0])], axis=1)
            else:
                xs = [self.floating(v) for v in n.inputs]
                self.t = {k: np.asarray(v, np.float32) for k, v in self.raw.items()
                          if k.startswith(f"{n.name}.") and np.asarray(v).dtype.kind == "f"}
                y = self.node(n, xs)
                self.fvals[st.output] = self.op("Relu", [y]) if st.fused is not None else y
        self.outputs_f = {key: self.floating(value) for key, value in self.graph.outputs.items()}


def _output_dims(name: str, config: NetConfig, size: str | int) -> list[str | int]:
    points = "points" if isinstance(size, str) else size * size
    moves = "moves" if isinstance(size, str) else size * size + 1
    dims: dict[str, list[str | int]] = {
        "policy": ["batch", moves], "value": ["batch", config.value_outputs],
        "score_lead": ["batch"], "ownership": ["batch", points],
        "score": ["batch", int(config.katago.get("score_channels", 4))]}
    return dims[name]


def onnx_model(config: NetConfig, tensors: dict[str, np.ndarray], precision: str = "fp32",
               source_sha256: str | None = None, pad_channels: bool = True) -> Any:
    """The ONNX ``ModelProto`` of a net (see the module docstring). Needs the ``onnx`` package;
    KosumiError if it is missing or the precision unknown. ``pad_channels``: an int8 net's
    convolution inputs padded for ONNX Runtime's CPU kernels (``_QdqBuilder._padded_input``)."""
    return _build_model(config, tensors, precision, source_sha256, pad_channels)[0]


def int8_model_with_values(config: NetConfig, tensors: dict[str, np.ndarray]
                           ) -> tuple[Any, dict[str, str]]:
    """An int8 net's Q/DQ model with every quantized activation also a graph output, and
    {inference-graph value: its output's name}: what ``runtime.int8_check`` compares with the
    integer reference, value by value."""
    from onnx import helper

    if not is_int8(config):
        raise KosumiError("int8_model_with_values: the net is not quantized to 8 bits")
    model, builder = _build_model(config, tensors, "int8", None)
    qvals = dict(builder.qvals)
    for name in qvals.values():
        model.graph.output.append(helper.make_empty_tensor_value_info(name))
    return model, qvals


def _build_model(config: NetConfig, tensors: dict[str, np.ndarray], precision: str,
                 source_sha256: str | None, pad_channels: bool = True) -> tuple[Any, Any]:
    """(ModelProto, the builder that made it): ``onnx_model``'s work."""
    try:
        import onnx
        from onnx import helper
    except ImportError:
        raise KosumiError("ONNX export needs the onnx package (pip install 'kosumi[onnx]')") \
            from None
    int8 = config.own_precision == "int8"
    if config.quantized:  # int8 Q/DQ; a 16-bit net is its fp16 ONNX
        precision = config.own_precision or precision
    elif precision not in PRECISIONS:
        raise KosumiError(f"ONNX precision {precision!r} is not one of {', '.join(PRECISIONS)} "
                          "(int8 ONNX comes from a quantized net: kosumi quantize --bits 8)")
    graph = inference_graph(config)
    folded = tensors if config.quantized else fold(config, tensors).tensors
    half = precision == "fp16"
    if int8:
        b: _OnnxBuilder = _QdqBuilder(graph, folded, config, pad_channels)
    else:
        b = _OnnxBuilder(graph, {k: v.astype(np.float16 if half else np.float32)
                                 for k, v in folded.items()}, half)
    size: str | int = graph.fixed_size or "size"
    fl = b.TP.FLOAT
    inputs = [helper.make_tensor_value_info("planes", fl, ["batch", graph.num_planes, size, size])]
    values = {"planes": b.op("Cast", ["planes"], to=b.elem) if half else "planes"}
    if graph.has_globals:
        inputs.append(helper.make_tensor_value_info("globals", fl, ["batch", graph.num_globals]))
        values["globals"] = b.op("Cast", ["globals"], to=b.elem) if half else "globals"
    if int8:
        b.run(values)  # type: ignore[attr-defined]
    else:
        for n in graph.nodes:
            values[n.output] = b.node(n, [values[x] for x in n.inputs])
    if int8:
        values.update({v: b.outputs_f[k] for k, v in graph.outputs.items()})  # type: ignore
    outputs = []
    for key, value in graph.outputs.items():
        if half:
            b.op("Cast", [values[value]], output=key, to=fl)
        else:
            b.op("Identity", [values[value]], output=key)
        outputs.append(helper.make_tensor_value_info(key, fl, _output_dims(key, config, size)))
    g = helper.make_graph(b.nodes, f"kosumi-{config.arch}-{config.head}", inputs, outputs,
                          initializer=b.inits)
    model = helper.make_model(g, producer_name=PRODUCER, producer_version=EXPORTER_VERSION,
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    meta = {META_FORMAT: ONNX_FORMAT, META_CONFIG: config.to_json(), META_PRECISION: precision,
            META_EXPORTER: EXPORTER_VERSION,
            META_SOURCE: source_sha256 or tensors_sha256(config, tensors)}
    onnx.helper.set_model_props(model, meta)
    return model, b


def is_int8(config: NetConfig) -> bool:
    """An 8-bit quantized net (its ONNX is int8 Q/DQ)."""
    return config.own_precision == "int8"


def one_conv_model(shape: tuple[int, ...], x_quant: tuple[float, Any], w: np.ndarray,
                   w_scale: np.ndarray, w_zero: np.ndarray, y_quant: tuple[float, Any],
                   bias: np.ndarray | None = None) -> bytes:
    """A one-node ONNX model of ONNX Runtime's own ``QLinearConv``: input ``x`` of ``shape``
    quantized as ``x_quant`` (scale, zero point as a numpy uint8 or int8 scalar), int8/uint8
    weights ``w`` with per-channel ``w_scale`` and ``w_zero``, output ``y`` quantized as
    ``y_quant``, same padding, optional int32 ``bias``. What a per-layer check or a kernel
    timing runs."""
    from onnx import TensorProto, helper, numpy_helper

    types = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}
    (xs, xz), (ys, yz) = x_quant, y_quant
    arrays = {"xs": np.array(xs, np.float32), "xz": np.asarray(xz), "w": w,
              "ws": np.asarray(w_scale, np.float32), "wz": w_zero,
              "ys": np.array(ys, np.float32), "yz": np.asarray(yz)}
    if bias is not None:
        arrays["b"] = bias
    k = int(w.shape[2])
    node = helper.make_node("QLinearConv", ["x", *arrays], ["y"], pads=[k // 2] * 4)
    graph = helper.make_graph(
        [node], "one_conv",
        [helper.make_tensor_value_info("x", types[arrays["xz"].dtype], list(shape))],
        [helper.make_tensor_value_info("y", types[arrays["yz"].dtype], None)],
        initializer=[numpy_helper.from_array(a, name) for name, a in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    return model.SerializeToString()


def onnx_bytes(config: NetConfig, tensors: dict[str, np.ndarray], precision: str = "fp32",
               check: bool = True, int8_weights: str = "int8", pad_channels: bool = True) -> bytes:
    """The serialized model, checked with ``onnx.checker`` (full check) when ``check``;
    ``int8_weights`` "uint8" or "offset" stores an int8 net's weights in that form
    (``nets.onnx_weights.recode_weights``); ``pad_channels`` as in ``onnx_model``."""
    import onnx

    model = onnx_model(config, tensors, precision, pad_channels=pad_channels)
    if int8_weights != "int8" and is_int8(config):
        recode_weights(model, int8_weights)
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def write_onnx_model(checkpoint: Checkpoint, out: str | os.PathLike[str], precision: str = "fp32",
                     source: str = "net", int8_weights: str = "int8", **_: Any) -> str:
    """``kosumi export --format onnx``: write the net as ONNX atomically; a summary line."""
    from kosumi.fileio import atomic_write, output_errors

    cfg = checkpoint.config
    own = cfg.own_precision
    if own is not None:  # a quantized net exports at its own precision
        if precision not in (own, "fp32", "auto"):
            raise KosumiError(f"a {own} quantized net exports as {own} ONNX, not {precision}")
        precision = own
    elif precision == "int8":
        raise KosumiError("int8 ONNX comes from a quantized net: kosumi quantize MODEL --bits 8 "
                          "--calib POSITIONS --out Q, then kosumi export Q --format onnx")
    if int8_weights != "int8" and precision != "int8":
        raise KosumiError(f"--int8-weights {int8_weights} is for int8 nets (this one exports "
                          f"as {precision})")
    data = onnx_bytes(checkpoint.config, checkpoint.tensors, precision, int8_weights=int8_weights)
    with output_errors(out):
        atomic_write(out, data)
    dyn = "19x19" if checkpoint.config.head == "lz" else "dynamic board size"
    qdq = (f" (explicit Q/DQ from kosumi's scales, {int8_weights} weights)"
           if precision == "int8" else "")
    return (f"wrote {out}: ONNX opset {OPSET}, {precision}{qdq}, {checkpoint.config.arch} "
            f"{checkpoint.config.head} head, dynamic batch, {dyn}, {len(data):,} bytes")


# ---------------------------------------------------------------------------- reading
def sniff_onnx(path: Path, head: bytes) -> bool:
    """An ``.onnx`` name, or a protobuf ModelProto whose producer is kosumi."""
    if str(path).lower().endswith(".onnx"):
        return True
    return head[:1] == b"\x08" and b"\x12\x06" + PRODUCER.encode() in head[:32]


def _load_meta(path: Path) -> tuple[dict[str, str], Any]:
    """(metadata_props, the ModelProto or None) of an ONNX file; KosumiError if corrupt."""
    onnx: ModuleType | None
    try:
        import onnx
    except ImportError:
        onnx = None
    if onnx is not None:
        try:
            model = onnx.load(str(path), load_external_data=False)
        except OSError as e:
            raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
        except Exception as e:
            raise KosumiError(f"{path}: corrupt ONNX file ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else 'cannot parse'})") from None
        if not model.graph.node:
            raise KosumiError(f"{path}: corrupt ONNX file (no graph)")
        return {p.key: p.value for p in model.metadata_props}, model
    try:  # a bare install with onnxruntime but without onnx
        import onnxruntime as ort

        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except ImportError:
        raise KosumiError(f"{path}: reading ONNX files needs onnx or onnxruntime "
                          "(pip install 'kosumi[onnx]')") from None
    except Exception as e:
        raise KosumiError(f"{path}: corrupt ONNX file ({str(e).splitlines()[0]})") from None
    return dict(sess.get_modelmeta().custom_metadata_map), None


def read_onnx_model(path: str | os.PathLike[str]) -> Checkpoint:
    """An ONNX file's kosumi config (no tensors: the file runs as it is). KosumiError for a
    corrupt file or one without kosumi metadata."""
    path = Path(path)
    meta, _ = _load_meta(path)
    if META_CONFIG not in meta:
        raise KosumiError(f"{path}: an ONNX model without kosumi metadata (metadata_props "
                          f"{META_CONFIG!r}); kosumi runs the ONNX files it exports (kosumi export "
                          "MODEL --format onnx)")
    config = NetConfig.from_json(meta[META_CONFIG], source=f"{path}: metadata {META_CONFIG}")
    return Checkpoint(config=config, tensors={}, metadata=meta)


def describe_onnx(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What ``kosumi inspect`` shows for an ONNX file kosumi exported."""
    from kosumi.nets.features import get_feature_set

    path = Path(path)
    meta, model = _load_meta(path)
    ckpt = read_onnx_model(path)
    cfg = ckpt.config
    fs = get_feature_set(cfg.features)
    info: dict[str, Any] = {
        "format": f"ONNX ({meta.get(META_PRECISION, '?')}"
                  f"{form_words(meta.get(META_INT8_WEIGHTS, 'int8'))}, "
                  f"kosumi exporter {meta.get(META_EXPORTER, '?')})",
        "version": json.loads(meta[META_CONFIG]).get("version"),
        "arch": cfg.arch, "blocks": cfg.blocks, "channels": cfg.channels,
        "input_features": {"name": fs.name, "spatial": fs.num_planes, "global": fs.num_globals},
        "head": cfg.head,
        "board_sizes": list(cfg.board_sizes),
    }
    if model is not None:
        info["opset"] = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                             None)
        info["parameters"] = int(sum(int(np.prod(t.dims)) for t in model.graph.initializer))
        info["inputs"] = [i.name for i in model.graph.input]
        info["outputs"] = [o.name for o in model.graph.output]
    if cfg.provenance:
        info["provenance"] = cfg.provenance
    return info
