"""Cross-layer equalization (kosumi.quantize.equalize): the float net's outputs unchanged."""

from __future__ import annotations

import numpy as np

from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.nets.fold import fold
from kosumi.quantize.calibration import collect_stats
from kosumi.quantize.equalize import equalize_blocks, equalize_stream
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_backend import NumpyBackend


# ---------------------------------------------------------------------------- rewrites
def test_equalization_leaves_the_float_net_unchanged(float_net_b2c16, calib_positions):
    ckpt = read_checkpoint(float_net_b2c16)
    net = fold(ckpt.config, ckpt.tensors)
    fs = get_feature_set("basic")
    states = bench_states(9, 8, seed=9)
    stats = collect_stats(NumpyBackend.folded(net), fs, states)
    eq, spread = equalize_blocks(net, stats)
    eq, _ = equalize_stream(eq, stats, 1.0)
    assert spread and any(not np.allclose(eq.tensors[k], net.tensors[k]) for k in net.tensors)
    planes, glob = fs.encode(states)
    a = NumpyBackend(ckpt.config, ckpt.tensors).forward(planes, glob)  # folded by the backend
    b = NumpyBackend.folded(eq).forward(planes, glob)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-4, atol=1e-4)
