"""The ``numpy`` backend: a net's inference graph run with numpy alone (no torch, no onnx).

It executes ``kosumi.nets.graph.inference_graph`` over ``kosumi.nets.fold.fold_batchnorm``'s
tensors, float32, activations channels-last ([B, N, N, C]) so that every convolution is one
matrix product of an im2col view. It is the runtime of a bare install (``pip install kosumi``)
and an oracle independent of torch and ONNX Runtime for the folded graph; the quantize issue
adds its integer-only mode here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.config import NetConfig
from kosumi.nets.fold import fold_batchnorm
from kosumi.nets.graph import Graph, Node, inference_graph
from kosumi.runtime.backend import Backend
from kosumi.runtime.options import LoadOptions


def conv_nhwc(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """x [B,N,N,I] (*) weight [O,I,k,k] + bias, zero padding k//2 -> [B,N,N,O]."""
    o, i, k, _ = weight.shape
    b, n, m, _ = x.shape
    if k == 1:
        y = x.reshape(-1, i) @ weight.reshape(o, i).T
    else:
        p = k // 2
        xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))
        y = cols.reshape(b * n * m, i * k * k) @ weight.reshape(o, i * k * k).T
    y += bias
    return y.reshape(b, n, m, o)


class NumpyBackend(Backend):
    """Runs a folded inference graph in numpy (see the module docstring)."""

    name = "numpy"

    def __init__(self, config: NetConfig, tensors: dict[str, np.ndarray]):
        self.config = config
        self.graph: Graph = inference_graph(config)
        self.t = fold_batchnorm(config, tensors)
        # layouts for the hot path: dense weights transposed once
        self.dense = {n.name: np.ascontiguousarray(self.t[f"{n.name}.weight"].T)
                      for n in self.graph.nodes if n.op == "linear"}

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        v: dict[str, Any] = {"planes": np.ascontiguousarray(
            np.asarray(planes, dtype=np.float32).transpose(0, 2, 3, 1))}
        if self.graph.has_globals:
            if globals is None:
                raise ValueError("this net needs global inputs")
            v["globals"] = np.asarray(globals, dtype=np.float32)
        for node in self.graph.nodes:
            v[node.output] = self._run(node, [v[name] for name in node.inputs])
        return {key: np.ascontiguousarray(v[name], dtype=np.float32)
                for key, name in self.graph.outputs.items()}

    def _run(self, node: Node, xs: list[np.ndarray]) -> np.ndarray:
        t, op = self.t, node.op
        if op == "conv":
            return conv_nhwc(xs[0], t[f"{node.name}.weight"], t[f"{node.name}.bias"])
        if op == "linear":
            return xs[0] @ self.dense[node.name] + t[f"{node.name}.bias"]
        if op == "relu":
            return np.maximum(xs[0], 0.0)
        if op == "add":
            return xs[0] + xs[1]
        if op == "add_bias":
            return xs[0] + xs[1][:, None, None, :]
        if op == "affine":
            return xs[0] * t[f"{node.name}.scale"] + t[f"{node.name}.bias"]
        if op == "mean_max":
            return np.concatenate((xs[0].mean(axis=(1, 2)), xs[0].max(axis=(1, 2))), axis=1)
        if op == "area":
            return xs[0][..., 0].sum(axis=(1, 2))[:, None]
        if op in ("kata_gpool", "kata_vpool"):
            x, area = xs
            mean = x.sum(axis=(1, 2)) / area
            off = np.sqrt(area) - 14.0
            third = x.max(axis=(1, 2)) if op == "kata_gpool" \
                else mean * (off * off / 100.0 - 0.1)
            return np.concatenate((mean, mean * (off / 10.0), third), axis=1)
        if op == "flatten":  # channel-major, as the NCHW graph defines it
            return xs[0].transpose(0, 3, 1, 2).reshape(xs[0].shape[0], -1)
        if op == "concat":
            return np.concatenate(xs, axis=1)
        if op == "squeeze":
            return xs[0][:, 0]
        raise KosumiError(f"numpy backend: unknown op {op!r} in layer {node.name}")


def open_numpy(config: NetConfig, source: dict[str, np.ndarray] | Path,
               options: LoadOptions) -> NumpyBackend:
    """The backend factory registered as ``numpy``: CPU only, float32."""
    if isinstance(source, Path):
        raise KosumiError(f"{source}: the numpy backend runs kosumi, KataGo and Leela Zero "
                          "nets, not this file")
    if options.device not in (None, "cpu"):
        raise KosumiError(f"the numpy backend runs on the CPU only, not --device "
                          f"{options.device}")
    if options.precision not in ("auto", "fp32"):
        raise KosumiError(f"the numpy backend runs fp32 nets (asked for {options.precision})")
    return NumpyBackend(config, source)
