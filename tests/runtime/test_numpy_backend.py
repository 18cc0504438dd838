"""The numpy backend (kosumi.runtime.numpy_backend): its convolution and the whole folded graph.

Oracles: a convolution written as plain loops (and one small case by hand), and the torch module
of the same checkpoint, unfolded (its BatchNorm statistics randomised), run directly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kosumi.nets.checkpoint import build_net, read_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_backend import NumpyBackend, conv_nhwc


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


def test_forward_equals_the_unfolded_torch_net(random_net):
    ckpt = read_checkpoint(random_net)
    net = build_net(ckpt).eval()
    backend = NumpyBackend(ckpt.config, ckpt.tensors)
    for size in (9, 19):
        planes, glob = get_feature_set(ckpt.config.features).encode(bench_states(size, 6, seed=4))
        got = backend.forward(planes, glob)
        with torch.no_grad():
            want = net(torch.from_numpy(planes), torch.from_numpy(glob))
        assert set(got) == set(want)
        for key, value in want.items():
            assert got[key].dtype == np.float32 and got[key].shape == tuple(value.shape)
            np.testing.assert_allclose(got[key], value.numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{size} {key}")
