"""The torch backend (kosumi.runtime.torch_backend): numpy in, numpy out, and what it refuses.

Oracles: a hand-written torch module whose outputs are known functions of its inputs, and the
refusals the module documents (one line each).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.runtime.options import LoadOptions
from kosumi.runtime.torch_backend import TorchBackend, open_torch


class Sums(torch.nn.Module):
    """policy = per-point sum of the planes, value = the globals' sum (or -1 without them)."""

    def forward(self, planes, globals):
        b = planes.shape[0]
        value = globals.sum(dim=1, keepdim=True) if globals is not None else -torch.ones(b, 1)
        return {"policy": planes.sum(dim=1).reshape(b, -1), "value": value}


def test_forward_converts_both_ways():
    planes = np.arange(2 * 3 * 2 * 2, dtype=np.float64).reshape(2, 3, 2, 2)  # not float32
    glob = np.array([[1.0, 2.0], [3.0, 4.5]])
    out = TorchBackend(Sums(), threads=0).forward(planes, glob)
    assert set(out) == {"policy", "value"}
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in out.values())
    # plane sums by hand: point 0 of sample 0 is 0 + 4 + 8
    assert out["policy"].tolist() == [[12, 15, 18, 21], [48, 51, 54, 57]]
    assert out["value"].tolist() == [[3.0], [7.5]]
    assert TorchBackend(Sums(), threads=0).forward(planes, None)["value"].tolist() == [[-1], [-1]]


def test_threads_set_torch_and_zero_leaves_it_alone():
    before = torch.get_num_threads()
    try:
        TorchBackend(Sums(), threads=2)
        assert torch.get_num_threads() == 2
        TorchBackend(Sums(), threads=0)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_open_torch_refusals(random_net, int8_net_b2c16):
    ck = read_checkpoint(random_net)
    cases = [
        (ck.config, Path("x.onnx"), LoadOptions(), "not this file"),
        (read_checkpoint(int8_net_b2c16).config, {}, LoadOptions(), "runs on the numpy"),
        (ck.config, ck.tensors, LoadOptions(precision="int8"), "not int8"),
        (ck.config, ck.tensors, LoadOptions(precision="fp16"), "fp16 on CUDA only"),
    ]
    for config, source, options, needle in cases:
        with pytest.raises(KosumiError, match=needle) as e:
            open_torch(config, source, options)
        assert "\n" not in str(e.value)
    backend = open_torch(ck.config, ck.tensors, LoadOptions(threads=0))
    assert isinstance(backend, TorchBackend) and backend.device.type == "cpu"
