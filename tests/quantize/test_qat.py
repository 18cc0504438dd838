"""QAT: the fake-quantized torch graph is the integer reference's arithmetic, fine-tuning lowers
the quantized net's loss, and a stopped run resumes to the same net."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import random_net_file
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.distill.labels import label_positions
from kosumi.distill.positions import Position, write_positions
from kosumi.nets.checkpoint import build_net, read_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.nets.fold import fold_batchnorm
from kosumi.nets.graph import inference_graph
from kosumi.nets.quant import integer_plan, scheme_of
from kosumi.quantize.qat import FakeQuantGraph
from kosumi.runtime.agreement import kl
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_int8 import Int8NumpyBackend

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("qat")
    net = random_net_file(root / "net.safetensors", arch="b1c8", board_sizes=(9,), seed=2,
                          bn=False)
    pos = root / "pos"
    write_positions(pos, [Position.from_state(s, f"q:{i}") for i, s in
                          enumerate(bench_states(9, 160, seed=8))])
    return root, net, pos


def quantize(args: list[str]) -> None:
    r = CliRunner().invoke(app, ["quantize", *args])
    assert r.exit_code == 0, r.output


def dequantized(q) -> dict[str, np.ndarray]:
    """The float tensors a quantized net's integers stand for (weights x scales)."""
    scheme = scheme_of(q.config)
    plan = integer_plan(inference_graph(q.config), scheme.layers)
    out = {}
    for st in plan.steps:
        n = st.node
        if n.op not in ("conv", "linear"):
            continue
        w = q.tensors[f"{n.name}.weight"]
        if w.dtype != np.int8:
            out[f"{n.name}.weight"], out[f"{n.name}.bias"] = w, q.tensors[f"{n.name}.bias"]
            continue
        sw = q.tensors[f"{n.name}.weight_scale"].astype(np.float64)
        sx = scheme.acts[n.inputs[0]].scale
        out[f"{n.name}.weight"] = (w * sw.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
        out[f"{n.name}.bias"] = (q.tensors[f"{n.name}.bias"] * sx * sw).astype(np.float32)
    return out


def test_fake_quant_graph_is_the_integer_arithmetic(setup):
    root, net, pos = setup
    out = root / "ptq.safetensors"
    quantize([str(net), "--calib", str(pos), "--keep-float", "none", "--out", str(out)])
    q = read_checkpoint(out)
    scheme = scheme_of(q.config)
    plan = integer_plan(inference_graph(q.config), scheme.layers)
    acts = {v: scheme.acts[plan.shared.get(v, v)] for v in plan.quantized}
    model = FakeQuantGraph(q.config, dequantized(q), scheme.layers, acts, scheme.weight_max)
    planes, glob = get_feature_set("basic").encode(bench_states(9, 12, seed=31))
    with torch.no_grad():
        fake = model(torch.from_numpy(planes), torch.from_numpy(glob))
    real = Int8NumpyBackend(q.config, q.tensors).forward(planes, glob)
    for k in ("policy", "value"):  # equal but for a rare 1-LSB rounding (float vs fixed point)
        d = np.abs(fake[k].numpy() - real[k])
        assert d.max() < 0.05 and np.mean(d < 1e-3) > 0.99, (k, d.max())
    # and without quantization it is the float net (the unfolded torch module as the oracle)
    ckpt = read_checkpoint(net)
    plain = FakeQuantGraph(ckpt.config, fold_batchnorm(ckpt.config, ckpt.tensors),
                           scheme.layers, acts, scheme.weight_max, quantize=False)
    with torch.no_grad():
        a = plain(torch.from_numpy(planes), torch.from_numpy(glob))
        b = build_net(ckpt)(torch.from_numpy(planes), torch.from_numpy(glob))
    for k in b:
        np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), atol=1e-4)


def fidelity(float_net: Path, qnet: Path, states) -> float:
    """Mean policy KL(float || int8) on ``states``."""
    from kosumi.runtime import load_evaluator

    ref = load_evaluator(float_net, backend="numpy", cache=False).evaluate(states)
    got = load_evaluator(qnet, backend="numpy", cache=False).evaluate(states)
    return float(np.mean([kl(a.policy, b.policy) for a, b in zip(ref, got, strict=True)]))


def test_qat_brings_the_int8_net_closer_to_its_float_self(setup):
    """On the positions it was fine-tuned on (a small random net has little to generalise
    from; on trained nets benchmarks/RESULTS.md shows the held-out figures): the int8 net's
    policy moves towards its float self's through the straight-through gradients."""
    from kosumi.distill.positions import PositionStore

    root, net, pos = setup
    ptq, qat = root / "p.safetensors", root / "q.safetensors"
    quantize([str(net), "--calib", str(pos), "--keep-float", "none", "--out", str(ptq)])
    quantize([str(net), "--keep-float", "none", "--qat", "--data", str(pos), "--steps", "150",
              "--lr", "1e-3", "--out", str(qat)])
    states = [p.to_state() for p in PositionStore(pos).positions()]
    before, after = fidelity(net, ptq, states), fidelity(net, qat, states)
    assert after < 0.8 * before, (before, after)
    info = read_checkpoint(qat).config.quantization["info"]["qat"]
    assert info["steps"] == 150 and info["target"] == "float"


def test_a_stopped_qat_run_resumes_to_the_same_net(setup, tmp_path):
    _, net, pos = setup
    whole, parts = tmp_path / "whole.safetensors", tmp_path / "parts.safetensors"
    common = [str(net), "--keep-float", "none", "--qat", "--data", str(pos), "--steps", "30"]
    quantize([*common, "--out", str(whole)])
    r = CliRunner().invoke(app, ["quantize", *common, "--stop-after", "12", "--out", str(parts)])
    assert r.exit_code == 0 and "stopped at step 12" in r.output, r.output
    assert not parts.exists() and Path(str(parts) + ".qat-state").exists()
    quantize([*common, "--resume", "--out", str(parts)])
    a, b = read_checkpoint(whole), read_checkpoint(parts)
    assert a.config.to_dict() == b.config.to_dict()
    for k in a.tensors:
        assert np.array_equal(a.tensors[k], b.tensors[k]), k


def test_teacher_targets_need_labels(setup, tmp_path):
    _, net, pos = setup
    r = CliRunner().invoke(app, ["quantize", str(net), "--qat", "--data", str(pos),
                                 "--qat-target", "teacher", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "no teacher targets" in r.output
    labels = tmp_path / "labels"
    label_positions(net, pos, labels, backend="numpy")
    quantize([str(net), "--qat", "--data", str(labels), "--qat-target", "teacher", "--steps",
              "10", "--out", str(tmp_path / "t.safetensors")])
    r = CliRunner().invoke(app, ["quantize", str(net), "--calib", str(pos), "--resume",
                                 "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "--resume continues a QAT run" in r.output
