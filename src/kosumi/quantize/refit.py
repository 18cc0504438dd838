"""Refit each int8 layer to the inputs it will really see, then round it (``--rounding refit``).

GPTQ (``quantize.rounding``) makes ``x . (w - q s)`` small over the float net's inputs x. But an
int8 layer runs on the quantized net's inputs x_q: uint8 activations carry the errors of
every layer before, and in a trained net those errors, not the weights', dominate
(benchmarks/RESULTS.md, Quantization: "Rounding, the error's sources"). This step answers for
them too. Layer by layer in the plan's order, over calibration positions:

1. run the quantized net as built so far (every layer before this one refit and rounded) up to
   the layer, and the float net beside it;
2. refit the layer's float weights and bias by least squares, so that from x_q they give the
   float net's output ``W x + b``: ``[W' b'] = argmin E|W' x_q + b' - (W x + b)|^2 +
   lambda |W' - W|^2`` (ridge towards the float weights, lambda = ``DAMP`` of H's mean
   diagonal; the closed-form, linear case of AdaQuant's layer-wise reconstruction, Hubara et
   al. 2021, and the asymmetric calibration of GPTAQ, Li et al. 2025);
3. round W' by GPTQ with ``H = E[x_q x_q^T]`` on W''s own per-channel scales, and take the
   rounding's mean shift ``(W' - q s) . E[x_q]`` (over the im2col patches, padding included)
   out of b'.

A layer whose inputs are exact (the binary input planes) comes out as it was. A dense layer on
pooled values sees too few rows to fit (``rounding.MIN_ROWS_PER_INPUT``) and is left to round
to nearest with the calibrated bias correction. The positions should not be the ones the
result is judged on (``quantize_net`` keeps them apart).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.fold import FoldedNet
from kosumi.nets.graph import WEIGHTED_OPS
from kosumi.quantize.rounding import (
    DAMP,
    MIN_ROWS_PER_INPUT,
    ROWS_PER_BATCH,
    gptq_round,
    quantize_weights,
)
from kosumi.runtime.numpy_backend import NumpyBackend
from kosumi.runtime.numpy_int8 import Int8NumpyBackend
from kosumi.runtime.numpy_ops import graph_inputs, im2col_nhwc

Batches = list[tuple[np.ndarray, np.ndarray | None]]


@dataclass
class Refit:
    """The refit net (``net``: weights and corrected biases of the refit layers, the others as
    given), their int8 weights (``rounded``), and per refit layer how far its weights moved
    (relative Frobenius norm)."""

    net: FoldedNet
    rounded: dict[str, np.ndarray] = field(default_factory=dict)
    moved: dict[str, float] = field(default_factory=dict)


def _rows(x: np.ndarray, op: str, k: int) -> np.ndarray:
    return im2col_nhwc(x, k) if op == "conv" else x.reshape(len(x), -1)


def _prune(v: dict[str, Any], needed: set[str]) -> None:
    for name in [k for k in v if k not in needed]:
        del v[name]


def refit_layers(net: FoldedNet,
                 build: Callable[[FoldedNet, dict[str, np.ndarray]], Checkpoint],
                 batches: Batches, weight_max: int, seed: int = 0,
                 say: Callable[[str], None] | None = None) -> Refit:
    """See the module docstring. ``net``: the float net; ``build(net, rounded)``: the quantized
    net of that float net with those layers' int8 weights (the others rounded to nearest)."""
    rng = np.random.default_rng(seed)
    float_backend = NumpyBackend.folded(net)
    tensors = dict(net.tensors)  # rewritten layer by layer
    rounded: dict[str, np.ndarray] = {}
    moved: dict[str, float] = {}
    first = build(FoldedNet(net.config, tensors), rounded)
    steps = Int8NumpyBackend(first.config, first.tensors).plan.steps
    nodes = float_backend.graph.nodes
    node_index = {nd.output: i for i, nd in enumerate(nodes)}
    qv = [graph_inputs(float_backend.graph, p, g) for p, g in batches]  # walked step by step
    fv = [graph_inputs(float_backend.graph, p, g) for p, g in batches]
    done_steps = done_nodes = 0
    targets = [i for i, st in enumerate(steps) if st.integer and st.node.op in WEIGHTED_OPS]
    for count, i in enumerate(targets):
        n = steps[i].node
        x_name = n.inputs[0]
        j = node_index[n.output]
        # ``i`` steps ahead of ``done_steps`` may have changed since they were built: run them
        # with the net as it is now, and keep only what later steps read
        q = build(FoldedNet(net.config, dict(tensors)), rounded)
        backend = Int8NumpyBackend(q.config, q.tensors)
        for v in qv:
            backend.advance(v, done_steps, i)
            _prune(v, {x for st in steps[i:] for x in st.node.inputs})
        for v in fv:
            float_backend.advance(v, done_nodes, j)
            _prune(v, {x for nd in nodes[j:] for x in nd.inputs})
        done_steps, done_nodes = i, j
        w = tensors[f"{n.name}.weight"].astype(np.float64)
        b = tensors[f"{n.name}.bias"].astype(np.float64)
        W = w.reshape(w.shape[0], -1)
        k = w.shape[2] if n.op == "conv" else 1
        K = W.shape[1]
        A = np.zeros((K + 1, K + 1))  # E[[x_q 1] [x_q 1]^T]
        B = np.zeros((K + 1, W.shape[0]))  # E[[x_q 1] y^T]
        rows = 0
        for vq, vf in zip(qv, fv, strict=True):
            xq = _rows(backend.dequantized(vq, x_name), n.op, k)
            xf = _rows(vf[x_name], n.op, k)
            if len(xq) > ROWS_PER_BATCH:
                pick = rng.choice(len(xq), ROWS_PER_BATCH, replace=False)
                xq, xf = xq[pick], xf[pick]
            y = xf.astype(np.float32) @ W.T.astype(np.float32) + b.astype(np.float32)
            x1 = np.concatenate([xq, np.ones((len(xq), 1), np.float32)], axis=1)
            A += (x1.T @ x1).astype(np.float64)
            B += (x1.T @ y).astype(np.float64)
            rows += len(xq)
        if rows < MIN_ROWS_PER_INPUT * K or not (np.isfinite(A).all() and np.isfinite(B).all()):
            continue
        A /= rows
        B /= rows
        H = A[:K, :K]
        ridge = np.zeros_like(A)
        ridge[np.arange(K), np.arange(K)] = DAMP * max(float(np.diag(H).mean()), 1e-12)
        prior = np.concatenate([W, b[:, None]], axis=1).T  # [K + 1, O]
        sol = np.linalg.solve(A + ridge + 1e-12 * np.eye(K + 1), B + ridge @ prior)
        w_new, b_new = sol[:K].T, sol[K]
        tensors[f"{n.name}.weight"] = w_new.reshape(w.shape).astype(np.float32)
        _, scale = quantize_weights(tensors[f"{n.name}.weight"], weight_max)
        qw = gptq_round(w_new, scale, H, weight_max)
        # the rounding's mean shift of the output, over these very inputs
        b_new = b_new + (w_new - qw.reshape(W.shape) * scale[:, None].astype(np.float64)
                         ) @ A[K, :K]
        tensors[f"{n.name}.bias"] = b_new.astype(np.float32)
        rounded[n.name] = qw.reshape(w.shape)
        moved[n.name] = float(np.linalg.norm(w_new - W)) / max(float(np.linalg.norm(W)), 1e-30)
        if say:
            say(f"refit {count + 1}/{len(targets)}: {n.name}")
    return Refit(FoldedNet(net.config, tensors), rounded, moved)
