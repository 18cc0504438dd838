"""Weight rounding that answers for its own error: GPTQ (Frantar et al. 2022, after Optimal Brain
Quantization), for kosumi's per-output-channel symmetric int8 weights.

Round to nearest makes each weight's error as small as it can be alone, but a layer's output
error is what matters: ``x . (w - q s)`` over the layer's real inputs x. GPTQ rounds the input
columns of a layer's weight matrix one at a time, and after each spreads its rounding error
over the columns not yet rounded, weighted by the inverse of the inputs' second moment
``H = E[x x^T]`` (over the im2col patches of a convolution), so that later columns make up for
earlier ones where the inputs are correlated. The scales stay those of round to nearest (the
largest weight of each output channel), so everything downstream of the weights is unchanged.

- ``input_hessians(backend, feature_set, states, names)``: H for each named layer, from the
  float net's own values on calibration positions (a layer that never sees an input gets a
  zero row and column there, and its weights on that input are rounded to nearest). A dense
  layer on pooled values sees one row per position, too few to know H: it is left out, and
  rounded to nearest;
- ``gptq_round(w, scale, h, weight_max)``: the int8 weights. Columns go in order of decreasing
  ``H[j, j]`` (the inputs that carry the most first), with 1% of H's mean diagonal added for
  stability.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kosumi.go.board import GameState
from kosumi.nets.graph import WEIGHTED_OPS
from kosumi.runtime.numpy_ops import im2col_nhwc

DAMP = 0.01  # of the mean diagonal, added to H's diagonal
ROWS_PER_BATCH = 8192  # input rows (positions x points) sampled per batch and layer
MIN_ROWS_PER_INPUT = 16  # fewer input rows than this per weight input: H is not known well
#                          enough to trust (a dense layer on pooled values sees one row per
#                          position), and the layer is rounded to nearest


def quantize_weights(w: np.ndarray, weight_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Round to nearest, symmetric per output channel: (int8 weights, float32 scales [O]);
    ``weight_max`` is the largest integer (127, or 63 where VNNI's pairs must not saturate)."""
    o = w.shape[0]
    flat = w.reshape(o, -1).astype(np.float64)
    amax = np.abs(flat).max(axis=1)
    scale = np.where(amax > 0, amax / weight_max, 1.0 / weight_max)
    q = np.clip(np.rint(flat / scale[:, None]), -weight_max, weight_max).astype(np.int8)
    return q.reshape(w.shape), scale.astype(np.float32)


def input_hessians(backend: Any, feature_set: Any, states: list[GameState], names: set[str],
                   batch: int = 32, seed: int = 0) -> dict[str, np.ndarray]:
    """{layer: E[x x^T] over its inputs (float64 [K, K], K = its weight's inputs per output:
    for a convolution, over its im2col patches, the padding included)} for the named
    conv/linear layers of ``backend``'s graph, run on ``states`` (grouped by board size,
    ``batch`` at a time; at most ROWS_PER_BATCH input rows sampled per batch). Layers seen on
    fewer than MIN_ROWS_PER_INPUT rows per input, or whose inputs overflow float32, are left
    out."""
    rng = np.random.default_rng(seed)
    nodes = [n for n in backend.graph.nodes if n.op in WEIGHTED_OPS and n.name in names]
    sums: dict[str, np.ndarray] = {}
    rows: dict[str, int] = {}
    for size in sorted({s.size for s in states}):
        group = [s for s in states if s.size == size]
        for i in range(0, len(group), batch):
            planes, glob = feature_set.encode(group[i:i + batch])
            values = backend.values(planes, glob)
            for n in nodes:
                x = values[n.inputs[0]]
                if n.op == "conv":
                    k = backend.t[f"{n.name}.weight"].shape[2]
                    x = im2col_nhwc(x, k)
                x = x.reshape(-1, x.shape[-1])
                if len(x) > ROWS_PER_BATCH:
                    x = x[rng.choice(len(x), ROWS_PER_BATCH, replace=False)]
                x = x.astype(np.float32)
                with np.errstate(over="ignore", invalid="ignore"):  # checked at the end
                    h = (x.T @ x).astype(np.float64)
                sums[n.name] = sums[n.name] + h if n.name in sums else h
                rows[n.name] = rows.get(n.name, 0) + len(x)
    return {name: h / rows[name] for name, h in sums.items()
            if rows[name] >= MIN_ROWS_PER_INPUT * h.shape[0] and np.isfinite(h).all()}


def gptq_round(w: np.ndarray, scale: np.ndarray, h: np.ndarray, weight_max: int) -> np.ndarray:
    """int8 weights of ``w`` [O, ...] on the given per-output-channel ``scale`` [O], rounded
    column by column with the error passed on through ``h`` (see the module docstring)."""
    o = w.shape[0]
    W = w.reshape(o, -1).astype(np.float64).copy()
    k = W.shape[1]
    if h.shape != (k, k):
        raise ValueError(f"GPTQ: H is {h.shape}, the weights have {k} inputs")
    s = scale.astype(np.float64)
    H = h.astype(np.float64).copy()
    diag = np.diag(H).copy()
    dead = diag <= 0
    H[dead, :] = 0.0
    H[:, dead] = 0.0
    mean = float(diag[~dead].mean()) if (~dead).any() else 1.0
    H[np.diag_indices(k)] += DAMP * mean
    H[dead, dead] = mean  # never-seen inputs: rounded alone, nothing passed on
    order = np.argsort(-np.diag(H), kind="stable")
    W, H = W[:, order], H[np.ix_(order, order)]
    # the upper Cholesky factor U of H^-1 (H^-1 = U^T U): row j of U, scaled by 1/U[j, j], is
    # how column j's rounding error is passed on to the columns after it
    U = np.linalg.cholesky(np.linalg.inv(H)).T
    Q = np.empty_like(W)
    for j in range(k):
        q = np.clip(np.rint(W[:, j] / s), -weight_max, weight_max)
        Q[:, j] = q
        err = (W[:, j] - q * s) / U[j, j]
        W[:, j + 1:] -= np.outer(err, U[j, j + 1:])
    out = np.empty_like(Q)
    out[:, order] = Q
    return out.astype(np.int8).reshape(w.shape)
