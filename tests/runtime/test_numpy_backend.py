"""The numpy backend (kosumi.runtime.numpy_backend): the whole folded graph.

Oracle: the torch module of the same checkpoint, unfolded (its BatchNorm statistics randomised),
run directly. Its convolution is tested in test_numpy_ops.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import random_net_file

from kosumi.nets.checkpoint import build_net, read_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_backend import NumpyBackend


@pytest.fixture(scope="module")
def size_pool_net(tmp_path_factory):
    """A random net whose value head pools KataGo's way (mean, mean x (N - 14) / 10, max)."""
    return random_net_file(tmp_path_factory.mktemp("sp") / "sp.safetensors", arch="b1c8",
                           seed=3, value_pool="katago")


@pytest.mark.parametrize("which", ["random_net", "size_pool_net"])
def test_forward_equals_the_unfolded_torch_net(which, request):
    ckpt = read_checkpoint(request.getfixturevalue(which))
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
