"""The float32 operations of the numpy backends on channels-last values ([B, N, N, C]): im2col
convolution, the graph's inputs, and every op of ``kosumi.nets.graph`` in float
(``runtime.numpy_backend`` runs a float net with them, ``runtime.numpy_int8`` the layers an int8
net keeps in float, ``quantize`` reads layers' inputs through them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.graph import Graph, Node


def im2col_nhwc(x: np.ndarray, k: int) -> np.ndarray:
    """[B, N, N, C] -> [B*N*N, C*k*k] (zero padding k//2; the weight layout [O, C, k, k])."""
    b, n, m, c = x.shape
    if k == 1:
        return x.reshape(-1, c)
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))
    return cols.reshape(b * n * m, c * k * k)


def conv_nhwc(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """x [B,N,N,I] (*) weight [O,I,k,k] + bias, zero padding k//2 -> [B,N,N,O]."""
    o, i, k, _ = weight.shape
    b, n, m, _ = x.shape
    y = im2col_nhwc(x, k) @ weight.reshape(o, i * k * k).T
    y += bias
    return y.reshape(b, n, m, o)


def graph_inputs(graph: Graph, planes: np.ndarray, globals: np.ndarray | None
                 ) -> dict[str, Any]:
    """The graph's input values: planes channels-last, globals (checked present if needed)."""
    v: dict[str, Any] = {"planes": np.ascontiguousarray(
        np.asarray(planes, dtype=np.float32).transpose(0, 2, 3, 1))}
    if graph.has_globals:
        if globals is None:
            raise ValueError("this net needs global inputs")
        v["globals"] = np.asarray(globals, dtype=np.float32)
    return v


def float_op(node: Node, xs: list[np.ndarray], t: dict[str, np.ndarray],
             dense: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """One graph op in float32 on channels-last values (``dense``: transposed linear weights,
    to skip the transpose)."""
    op = node.op
    if op == "conv":
        return conv_nhwc(xs[0], t[f"{node.name}.weight"].astype(np.float32, copy=False),
                         t[f"{node.name}.bias"].astype(np.float32))
    if op == "linear":
        w = dense[node.name] if dense and node.name in dense \
            else t[f"{node.name}.weight"].astype(np.float32, copy=False).T
        return xs[0] @ w + t[f"{node.name}.bias"].astype(np.float32)
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
        third = x.max(axis=(1, 2)) if op == "kata_gpool" else mean * (off * off / 100.0 - 0.1)
        return np.concatenate((mean, mean * (off / 10.0), third), axis=1)
    if op == "flatten":  # channel-major, as the NCHW graph defines it
        return xs[0].transpose(0, 3, 1, 2).reshape(xs[0].shape[0], -1)
    if op == "concat":
        return np.concatenate(xs, axis=1)
    if op == "squeeze":
        return xs[0][:, 0]
    raise KosumiError(f"numpy backend: unknown op {op!r} in layer {node.name}")
