"""The numpy backends' float operations (kosumi.runtime.numpy_ops): the im2col convolution and
the graph's inputs.

Oracles: a convolution written as plain loops, one small case by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.nets.config import NetConfig
from kosumi.nets.graph import inference_graph
from kosumi.runtime.numpy_ops import conv_nhwc, graph_inputs


def loop_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[B,N,M,I] (*) [O,I,k,k] + b with zero padding k // 2, one product at a time."""
    bsz, n, m, _ = x.shape
    o, i, k, _ = w.shape
    p = k // 2
    out = np.zeros((bsz, n, m, o))
    for bi, y, xx, oc in np.ndindex(bsz, n, m, o):
        acc = float(b[oc])
        for ic, dy, dx in np.ndindex(i, k, k):
            yy, xs = y + dy - p, xx + dx - p
            if 0 <= yy < n and 0 <= xs < m:
                acc += float(x[bi, yy, xs, ic]) * float(w[oc, ic, dy, dx])
        out[bi, y, xx, oc] = acc
    return out


def test_conv_by_hand():
    # a 3x3 board of ones, the all-ones 3x3 kernel: each point sums its on-board neighbourhood
    x = np.ones((1, 3, 3, 1), np.float32)
    y = conv_nhwc(x, np.ones((1, 1, 3, 3), np.float32), np.array([0.5], np.float32))
    assert y[0, :, :, 0].tolist() == [[4.5, 6.5, 4.5], [6.5, 9.5, 6.5], [4.5, 6.5, 4.5]]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_conv_equals_the_loops(k):
    rng = np.random.default_rng(k)
    x = rng.standard_normal((2, 5, 5, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3, k, k)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(conv_nhwc(x, w, b), loop_conv(x, w, b), rtol=1e-5, atol=1e-5)


def test_graph_inputs_are_channels_last_and_need_the_globals():
    graph = inference_graph(NetConfig(arch="b1c8", board_sizes=[9]))
    planes = np.arange(2 * 11 * 9 * 9, dtype=np.float32).reshape(2, 11, 9, 9)
    v = graph_inputs(graph, planes, np.zeros((2, 4), np.float32))
    assert v["planes"].shape == (2, 9, 9, 11)
    assert v["planes"][1, 3, 4, 5] == planes[1, 5, 3, 4]
    if graph.has_globals:
        with pytest.raises(ValueError, match="global inputs"):
            graph_inputs(graph, planes, None)
