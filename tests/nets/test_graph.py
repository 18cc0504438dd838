"""Inference graphs (kosumi.nets.graph): the layers of each head, the flow of values, and the
names that tie the graph to the folded tensors.

Oracles: the weighted layers of small nets listed by hand from the architecture (stem, two
convolutions per block, the heads), a data-flow property (every value is made before it is used,
every output is made), and ``fold_batchnorm``'s tensors of real checkpoints, whose names must be
exactly the graph's weighted layers.
"""

from __future__ import annotations

import pytest
from helpers import random_net_file

from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.fold import fold_batchnorm
from kosumi.nets.graph import WEIGHTED_OPS, graph_tensors, inference_graph


def flows(graph) -> None:
    made = {"planes"} | ({"globals"} if graph.has_globals else set())
    for node in graph.nodes:
        assert set(node.inputs) <= made, (node, made)
        assert node.output not in made, node  # every value is made once
        made.add(node.output)
    assert set(graph.outputs.values()) <= made


def test_conv_head_layers_by_hand():
    cfg = NetConfig(arch="b2c16", features="basic", head="conv", board_sizes=[9, 19])
    g = inference_graph(cfg)
    assert [n.name for n in g.weighted()] == [
        "input_conv", "global_linear",
        "blocks.0.conv1", "blocks.0.conv2", "blocks.1.conv1", "blocks.1.conv2",
        "policy_conv", "value_conv", "policy_point", "policy_pass", "value_fc1", "value_fc2",
        "score_fc", "ownership_conv"]
    assert set(g.outputs) == {"policy", "value", "score_lead", "ownership"}
    assert g.has_globals and (g.num_planes, g.num_globals) == (11, 4) and g.fixed_size is None
    kernels = {n.name: n.attrs.get("kernel") for n in g.nodes if n.op == "conv"}
    assert kernels["input_conv"] == kernels["blocks.1.conv2"] == 3
    assert kernels["policy_conv"] == kernels["ownership_conv"] == 1
    flows(g)
    bare = inference_graph(NetConfig(arch="b1c8", board_sizes=[9], score_lead=False,
                                     ownership=False))
    assert set(bare.outputs) == {"policy", "value"}
    assert "score_fc" not in {n.name for n in bare.nodes}
    flows(bare)


def test_lz_head_layers_by_hand():
    cfg = NetConfig(arch="b1c8", features="lz18", head="lz", board_sizes=[19], value="tanh",
                    score_lead=False, ownership=False)
    g = inference_graph(cfg)
    assert [n.name for n in g.weighted()] == [
        "input_conv", "blocks.0.conv1", "blocks.0.conv2", "policy_conv", "value_conv",
        "policy_fc", "value_fc1", "value_fc2"]
    assert not g.has_globals and g.num_planes == 18 and g.fixed_size == 19
    assert set(g.outputs) == {"policy", "value"}
    flows(g)


@pytest.mark.parametrize("spec", [
    {"arch": "b2c16"},
    {"arch": "b1c8", "features": "lz18", "head": "lz"},
    {"arch": "b1c8", "score_lead": False},
])
def test_the_folded_tensors_are_exactly_the_graph_layers(tmp_path, spec):
    ckpt = read_checkpoint(random_net_file(tmp_path / "n.safetensors", **spec))
    g = inference_graph(ckpt.config)
    tensors = fold_batchnorm(ckpt.config, ckpt.tensors)
    want = {f"{n.name}.{part}" for n in g.nodes if n.op in WEIGHTED_OPS
            for part in ("weight", "bias")}
    want |= {f"{n.name}.{part}" for n in g.nodes if n.op == "affine"
             for part in ("scale", "bias")}
    assert set(tensors) == want
    assert sorted(graph_tensors(g)) == sorted(want)  # what a folded net must hold
    for n in g.weighted():
        w = tensors[f"{n.name}.weight"]
        assert w.ndim == (4 if n.op == "conv" else 2)
        assert tensors[f"{n.name}.bias"].shape == (w.shape[0],)
        if n.op == "conv":
            assert w.shape[2] == w.shape[3] == n.attrs["kernel"]


def test_katago_graph_of_the_real_net(katago_model):
    from kosumi.nets.katago import read_katago_model

    ckpt = read_katago_model(katago_model)
    g = inference_graph(ckpt.config)
    flows(g)
    assert g.has_globals and g.nodes[0].op == "area"
    blocks = ckpt.config.katago["blocks"]
    assert len(blocks) == 6  # b6c96
    pre = [n.name for n in g.nodes if n.op == "affine"]
    assert pre == [f"blocks.{i}.pre" for i in range(6)] + ["tip"]
    gpools = [n.name for n in g.nodes if n.op == "kata_gpool"]
    assert len(gpools) == sum(k == "gpool" for k in blocks) + 1  # and the policy head's
    tensors = fold_batchnorm(ckpt.config, ckpt.tensors)
    assert {f"{n.name}.weight" for n in g.weighted()} <= set(tensors)
    assert set(graph_tensors(g)) == set(tensors)  # the affine tip and pre-norms included
