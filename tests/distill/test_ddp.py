"""Data-parallel distillation: global BatchNorm, and 2 gloo processes (torchrun) computing what
one process computes on the same global batches."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
from helpers import ROOT, make_label_folder
from torch import nn

from kosumi.distill.ddp import GlobalBatchNorm2d, convert_batchnorm
from kosumi.distill.train import DistillOptions, distill, make_batch
from kosumi.nets.checkpoint import load_net, read_checkpoint

torch.set_num_threads(1)

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_convert_batchnorm_keeps_the_same_parameters():
    net = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.Sequential(nn.BatchNorm2d(4)))
    before = {id(p) for p in net.parameters()} | {id(b) for b in net.buffers()}
    names = [k for k, _ in net.state_dict().items()]
    convert_batchnorm(net)
    assert isinstance(net[1], GlobalBatchNorm2d) and isinstance(net[2][0], GlobalBatchNorm2d)
    assert {id(p) for p in net.parameters()} | {id(b) for b in net.buffers()} == before
    assert [k for k, _ in net.state_dict().items()] == names


def test_global_batchnorm_equals_batchnorm(tmp_path):
    """In a one-rank gloo group the all-reduce path runs and must match nn.BatchNorm2d."""
    torch.manual_seed(0)
    x = torch.randn(6, 5, 4, 4) * 3 + 1
    ref = nn.BatchNorm2d(5, momentum=0.1)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.uniform_(-1, 1)
    glob = GlobalBatchNorm2d(5)
    glob.load_state_dict(ref.state_dict())
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        outs, grads = [], []
        for bn in (ref, glob):
            xi = x.clone().requires_grad_(True)
            y = bn(xi)
            (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape)).sum().backward()
            outs.append(y.detach())
            grads.append((xi.grad, bn.weight.grad, bn.bias.grad))
    finally:
        dist.destroy_process_group()
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
    for g_glob, g_ref in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(g_glob, g_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(glob.running_mean, ref.running_mean)
    torch.testing.assert_close(glob.running_var, ref.running_var)
    assert int(glob.num_batches_tracked) == int(ref.num_batches_tracked) == 1


def assert_same_weights(one, two) -> None:
    """Every weight agrees, except one direction the loss cannot see: the centre tap of the
    constant "on board" plane adds the same number everywhere, which the next BatchNorm
    removes; its true gradient is 0, and Adam turns the float noise of a 0 gradient (which
    differs with the summation order) into steps of size lr. The running mean follows it."""
    a, b = read_checkpoint(one).tensors, read_checkpoint(two).tensors
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k].copy(), b[k].copy()
        if k == "input_conv.weight":
            x[:, 0, 1, 1] = y[:, 0, 1, 1] = 0.0
        if k == "input_bn.running_mean":
            continue
        np.testing.assert_allclose(y, x, atol=1e-4, rtol=0, err_msg=k)


def test_two_nodes_over_one_label_folder_equal_one_process(tmp_path):
    """``torchrun --nnodes 2``: two launchers (two "machines", each with its own cache disk)
    train over the same label folder and write one student to the shared ``--out``."""
    lab, teacher = make_label_folder(tmp_path / "data", size=7, games=12, length=14, seed=3)
    common = ["--data", str(lab), "--teacher", str(teacher), "--student", "b1c8",
              "--steps", "5", "--batch", "16", "--lr", "3e-3", "--eval-every", "3",
              "--threads", "1", "--device", "cpu", "--quiet"]
    two = tmp_path / "shared" / "two.safetensors"
    two.parent.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    port = str(free_port())
    nodes = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank",
         str(rank), "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port",
         port, "-m", "kosumi", "distill", *common, "--cache-dir",
         str(tmp_path / f"node{rank}-cache"), "--out", str(two)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in (0, 1)]
    outs = [n.communicate(timeout=300) for n in nodes]
    for n, (_, err) in zip(nodes, outs, strict=True):
        assert n.returncode == 0, err[-3000:]
    assert outs[0][0].count("wrote ") == 1 and "wrote " not in outs[1][0]  # rank 0 writes
    assert (tmp_path / "node1-cache").exists()  # each machine built its own cache

    one = tmp_path / "one.safetensors"
    distill(DistillOptions(data=lab, out=one, teacher=str(teacher), student="b1c8", steps=5,
                           batch=16, lr=3e-3, eval_every=3, threads=1, device="cpu",
                           progress=False, cache_dir=tmp_path / "cache"))
    assert_same_weights(one, two)


def test_two_gloo_processes_equal_one_process(tmp_path):
    lab, teacher = make_label_folder(tmp_path / "data", size=7, games=12, length=14, seed=3)
    common = ["--data", str(lab), "--teacher", str(teacher), "--student", "b1c8",
              "--steps", "5", "--batch", "16", "--lr", "3e-3", "--eval-every", "3",
              "--threads", "1", "--device", "cpu", "--quiet",
              "--cache-dir", str(tmp_path / "cache")]
    two = tmp_path / "two.safetensors"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           "-m", "kosumi", "distill", *common, "--out", str(two)]
    proc = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("wrote ") == 1  # rank 0 alone reports and writes

    one = tmp_path / "one.safetensors"
    distill(DistillOptions(data=lab, out=one, teacher=str(teacher), student="b1c8", steps=5,
                           batch=16, lr=3e-3, eval_every=3, threads=1, device="cpu",
                           progress=False, cache_dir=tmp_path / "cache"))
    assert_same_weights(one, two)
    # and the two students compute the same function (batch statistics, as in training)
    from kosumi.distill.dataset import load_dataset
    from kosumi.distill.labels import LabelStore

    data = load_dataset(LabelStore(lab), "basic", cache_dir=tmp_path / "cache").sizes[7]
    batch = make_batch(data, np.arange(min(64, len(data))), torch.device("cpu"))
    nets = [load_net(one).train(), load_net(two).train()]
    with torch.no_grad():
        outs = [n(batch.planes, batch.globals) for n in nets]
    for k in outs[0]:
        torch.testing.assert_close(outs[1][k], outs[0][k], atol=1e-4, rtol=1e-4)
