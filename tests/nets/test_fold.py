"""BN folding and the inference graph (nets.fold, nets.graph) against the unfolded torch nets.

The numpy backend runs only the folded graph; the torch modules (``KosumiNet``, ``KataGoNet``)
run the nets as trained, BatchNorm and Leela Zero's vertical flips included. Their agreement on
real positions is the oracle for the folding (stem, blocks, heads, the score scale, the lz
head's flip moved into its weights).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import random_net_file

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint, build_net, read_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.nets.fold import fold_batchnorm
from kosumi.nets.graph import WEIGHTED_OPS, inference_graph
from kosumi.nets.katago import read_katago_model
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_backend import NumpyBackend

torch.set_num_threads(1)

NETS = [
    {"arch": "b2c16", "features": "basic", "head": "conv"},
    {"arch": "b1c8", "features": "lz18", "head": "conv", "board_sizes": (9,)},  # no globals
    {"arch": "b2c16", "features": "lz18", "head": "lz"},
    {"arch": "b2c16", "features": "basic", "head": "lz"},  # lz head with global inputs
    {"arch": "b1c8", "features": "basic", "head": "conv", "value": "tanh", "score_lead": False,
     "ownership": True, "board_sizes": (7,)},
]


def torch_outputs(ckpt: Checkpoint, planes, glob) -> dict[str, np.ndarray]:
    net = build_net(ckpt)
    with torch.no_grad():
        out = net(torch.from_numpy(planes), None if glob is None else torch.from_numpy(glob))
    return {k: v.numpy() for k, v in out.items()}


@pytest.mark.parametrize("spec", NETS, ids=lambda s: f"{s['arch']}-{s['features']}-{s['head']}")
def test_folded_graph_matches_the_unfolded_net(tmp_path, spec):
    path = random_net_file(tmp_path / "net.safetensors", seed=7, **spec)
    ckpt = read_checkpoint(path)
    backend = NumpyBackend(ckpt.config, ckpt.tensors)
    for size in ckpt.config.board_sizes:
        planes, glob = get_feature_set(ckpt.config.features).encode(
            bench_states(size, 6, seed=3))
        ours = backend.forward(planes, glob)
        ref = torch_outputs(ckpt, planes, glob)
        assert ours.keys() == ref.keys()
        for k in ref:
            scale = max(1.0, float(np.abs(ref[k]).max()))
            np.testing.assert_allclose(ours[k], ref[k], atol=2e-5 * scale, rtol=0, err_msg=k)


def test_folded_katago_matches_the_unfolded_net(katago_model):
    ckpt = read_katago_model(katago_model)
    backend = NumpyBackend(ckpt.config, ckpt.tensors)
    fs = get_feature_set("katago_v7")
    for size in (9, 13, 19):
        planes, glob = fs.encode(bench_states(size, 4, seed=1))
        ours = backend.forward(planes, glob)
        ref = torch_outputs(ckpt, planes, glob)
        for k in ref:
            np.testing.assert_allclose(ours[k], ref[k], atol=2e-4, rtol=1e-4, err_msg=k)


def test_fold_removes_every_batchnorm_and_names_graph_layers(tmp_path):
    ckpt = read_checkpoint(random_net_file(tmp_path / "n.safetensors"))
    folded = fold_batchnorm(ckpt.config, ckpt.tensors)
    assert not any("bn" in k or "running" in k for k in folded)
    graph = inference_graph(ckpt.config)
    layers = [n.name for n in graph.nodes if n.op in WEIGHTED_OPS]
    assert sorted(f"{n}.{p}" for n in layers for p in ("weight", "bias")) == sorted(folded)
    # the stem's BN scale went into both the conv and the global inputs' linear layer
    s = ckpt.tensors["input_bn.weight"] / np.sqrt(ckpt.tensors["input_bn.running_var"] + 1e-5)
    np.testing.assert_allclose(folded["global_linear.weight"],
                               ckpt.tensors["global_linear.weight"] * s[:, None], rtol=1e-5)


def test_fold_refuses_integer_tensors(tmp_path):
    ckpt = read_checkpoint(random_net_file(tmp_path / "n.safetensors", arch="b1c8"))
    tensors = dict(ckpt.tensors)
    tensors["input_conv.weight"] = np.zeros(tensors["input_conv.weight"].shape, np.int8)
    with pytest.raises(KosumiError, match=r"'input_conv.weight' is int8"):
        fold_batchnorm(ckpt.config, tensors)


def test_a_folded_net_is_a_float_net_that_runs_as_the_unfolded_one(tmp_path):
    from dataclasses import replace

    from kosumi.nets.fold import FoldedNet, fold

    ckpt = read_checkpoint(random_net_file(tmp_path / "n.safetensors"))
    net = fold(ckpt.config, ckpt.tensors)
    states = bench_states(9, 4, seed=5)
    planes, glob = get_feature_set(ckpt.config.features).encode(states)
    with torch.no_grad():  # the torch module as trained, batch norms and all
        want = build_net(ckpt)(torch.from_numpy(planes), torch.from_numpy(glob))
    got = NumpyBackend.folded(net).forward(planes, glob)
    for k in ("policy", "value"):
        np.testing.assert_allclose(got[k], want[k].numpy(), atol=1e-4)
    # a rewrite gives a new net and leaves the old one as it was
    zero = net.with_tensors({"input_conv.bias": np.zeros_like(net.bias("input_conv"))})
    assert not np.array_equal(zero.bias("input_conv"), net.bias("input_conv"))
    assert zero.weight("input_conv") is net.weight("input_conv")
    gone = FoldedNet(net.config, {k: v for k, v in net.tensors.items() if k != "value_fc1.bias"})
    with pytest.raises(KosumiError, match=r"'value_fc1\.bias' is missing"):
        NumpyBackend.folded(gone)
    with pytest.raises(KosumiError, match="a folded net is a float net"):
        FoldedNet(replace(ckpt.config, quantization={"bits": 16}), net.tensors)
