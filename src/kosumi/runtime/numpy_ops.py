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
    return transformer_op(node, xs, t)


def transformer_op(node: Node, xs: list[np.ndarray], t: dict[str, np.ndarray]) -> np.ndarray:
    """The ops of KataGo's later nets (SiLU, Mish, product, RMS norm, attention) in float32."""
    op = node.op
    if op == "silu":  # x * sigmoid(x), written without an overflowing exp
        return xs[0] * (0.5 + 0.5 * np.tanh(0.5 * xs[0]))
    if op == "mish":
        return xs[0] * np.tanh(np.logaddexp(np.float32(0.0), xs[0]))
    if op == "mul":
        return xs[0] * xs[1]
    if op == "rmsnorm":
        x = xs[0]
        axes = (1, 2, 3) if node.attrs["spatial"] else (3,)
        ms = np.mean(np.square(x, dtype=np.float32), axis=axes, keepdims=True)
        return x / np.sqrt(ms + np.float32(node.attrs["eps"]))
    if op == "attention":
        return attention_nhwc(xs[0], xs[1], xs[2], node.attrs,
                              t.get(f"{node.name}.rope_freqs"))
    raise KosumiError(f"numpy backend: unknown op {op!r} in layer {node.name}")


def rope_angles(attrs: dict[str, Any], freqs: np.ndarray | None, n: int) -> np.ndarray:
    """Rotation angles [kv_heads or 1, T, q_dim/2] of the n*n points (row-major from the
    top-left; ``kosumi.nets.graph``'s attention op)."""
    pos = np.arange(n * n)
    xs, ys = (pos % n).astype(np.float32), (pos // n).astype(np.float32)
    if attrs["rope"] == "learned":
        assert freqs is not None
        f = np.asarray(freqs, dtype=np.float32)  # [K, D/2, 2]
        return xs[None, :, None] * f[:, None, :, 0] + ys[None, :, None] * f[:, None, :, 1]
    pairs = attrs["q_dim"] // 2
    half = pairs // 2
    inv = (1.0 / np.power(np.float32(attrs["rope_theta"]),
                          2 * np.arange(half, dtype=np.float32) / pairs)).astype(np.float32)
    return np.concatenate((ys[:, None] * inv, xs[:, None] * inv), axis=1)[None]


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [B, heads, T, D]: channel pairs (2p, 2p+1) turned by cos/sin [heads or 1, T, D/2]."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def attention_nhwc(q: np.ndarray, k: np.ndarray, v: np.ndarray, attrs: dict[str, Any],
                   freqs: np.ndarray | None) -> np.ndarray:
    """The graph's attention op on channels-last q, k, v [B, N, N, *] -> [B, N, N, H*E]."""
    b, n, _, _ = q.shape
    h, kv, d, e = attrs["heads"], attrs["kv_heads"], attrs["q_dim"], attrs["v_dim"]
    t = n * n
    qh = q.reshape(b, t, h, d).transpose(0, 2, 1, 3)
    kh = k.reshape(b, t, kv, d).transpose(0, 2, 1, 3)
    vh = v.reshape(b, t, kv, e).transpose(0, 2, 1, 3)
    if attrs["rope"] != "none":
        ang = rope_angles(attrs, freqs, n)
        cos, sin = np.cos(ang), np.sin(ang)
        kh = _rotate(kh, cos, sin)
        if ang.shape[0] > 1:
            cos, sin = np.repeat(cos, h // kv, axis=0), np.repeat(sin, h // kv, axis=0)
        qh = _rotate(qh, cos, sin)
    if kv != h:
        kh, vh = np.repeat(kh, h // kv, axis=1), np.repeat(vh, h // kv, axis=1)
    scores = (qh @ kh.transpose(0, 1, 3, 2)) * np.float32(1.0 / np.sqrt(d))
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return (w @ vh).transpose(0, 2, 1, 3).reshape(b, n, n, h * e)
