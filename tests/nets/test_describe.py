"""``kosumi.nets.describe``: a kosumi net's description, counted against torch's own parameters."""

from __future__ import annotations

import torch

from kosumi.nets.checkpoint import save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.describe import describe_checkpoint, describe_checkpoint_parts
from kosumi.nets.resnet import KosumiNet, inference_tensors

torch.set_num_threads(1)


def test_a_checkpoint_is_described_from_its_file(tmp_path):
    net = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9], score_lead=False,
                                     ownership=False), 0)
    path = tmp_path / "net.kosumi"
    save_checkpoint(path, net)
    info = describe_checkpoint(path)
    assert info["format"] == "kosumi checkpoint"
    assert (info["arch"], info["blocks"], info["channels"]) == ("b1c8", 1, 8)
    assert info["parameters"] == net.num_parameters()  # torch's count, not ours
    assert set(info["heads"]) == {"policy", "value"}  # no score or ownership head
    assert info["board_sizes"] == [9] and "tensor_types" not in info


def test_a_net_in_memory_names_its_format_and_tensor_types():
    net = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9, 19]), 0)
    tensors = {k: v.numpy() for k, v in inference_tensors(net).items()}
    tensors = {k: (v.astype("float16") if k.endswith(".weight") else v)
               for k, v in tensors.items()}
    info = describe_checkpoint_parts(net.config, tensors, "a test format")
    assert info["format"] == "a test format"
    assert set(info["heads"]) == {"policy", "value", "score_lead", "ownership"}
    assert set(info["tensor_types"]) == {"float16", "float32"}
