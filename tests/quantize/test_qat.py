"""QAT: the fake-quantized torch graph is the integer reference's arithmetic, fine-tuning lowers
the quantized net's loss, and a stopped run resumes to the same net."""

from __future__ import annotations

from dataclasses import replace
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
from kosumi.nets.fold import FoldedNet, fold
from kosumi.nets.graph import inference_graph
from kosumi.nets.quant import integer_plan, scheme_of
from kosumi.quantize.qat import FakeQuantGraph, fake_quant_weight
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


def dequantized(q) -> FoldedNet:
    """The float net a quantized net's integers stand for (weights x scales)."""
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
    return FoldedNet(replace(q.config, quantization={}), out)


def assert_same_outputs(model: FakeQuantGraph, q, planes: np.ndarray, glob: np.ndarray) -> None:
    """The fake-quantized graph and the integer backend give the same policy and value."""
    with torch.no_grad():
        fake = model(torch.from_numpy(planes), torch.from_numpy(glob))
    real = Int8NumpyBackend(q.config, q.tensors).forward(planes, glob)
    for k in ("policy", "value"):  # equal but for a rare 1-LSB rounding (float vs fixed point)
        d = np.abs(fake[k].numpy() - real[k])
        assert d.max() < 0.05 and np.mean(d < 1e-3) > 0.99, (k, d.max())


def test_fake_quant_graph_is_the_integer_arithmetic(setup):
    root, net, pos = setup
    out = root / "ptq.safetensors"
    # round to nearest: the fake quantization's own rounding (QAT starts from float weights;
    # GPTQ's integers need not reach +-weight_max, so their scale is not max|w| / weight_max)
    quantize([str(net), "--calib", str(pos), "--keep-float", "none", "--rounding", "nearest",
              "--out", str(out)])
    q = read_checkpoint(out)
    scheme = scheme_of(q.config)
    plan = integer_plan(inference_graph(q.config), scheme.layers)
    acts = {v: scheme.acts[plan.shared.get(v, v)] for v in plan.quantized}
    model = FakeQuantGraph(dequantized(q), scheme.layers, acts, scheme.weight_max)
    planes, glob = get_feature_set("basic").encode(bench_states(9, 12, seed=31))
    assert_same_outputs(model, q, planes, glob)
    # and without quantization it is the float net (the unfolded torch module as the oracle)
    ckpt = read_checkpoint(net)
    plain = FakeQuantGraph(fold(ckpt.config, ckpt.tensors), scheme.layers, acts,
                           scheme.weight_max, quantize=False)
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


@pytest.mark.parametrize("weight_range", ["127", "63"])
def test_qat_brings_the_int8_net_closer_to_its_float_self(setup, weight_range):
    """On the positions it was fine-tuned on (a small random net has little to generalise
    from; on trained nets benchmarks/RESULTS.md shows the held-out figures): the int8 net's
    policy moves towards its float self's through the straight-through gradients. Both weight
    ranges, whatever this CPU would choose: +-63 (x86 without VNNI) starts further away."""
    from kosumi.distill.positions import PositionStore

    root, net, pos = setup
    ptq, qat = root / f"p{weight_range}.safetensors", root / f"q{weight_range}.safetensors"
    common = ["--keep-float", "none", "--weight-range", weight_range]
    quantize([str(net), "--calib", str(pos), *common, "--out", str(ptq)])
    quantize([str(net), *common, "--qat", "--data", str(pos), "--steps", "300", "--lr", "1e-3",
              "--out", str(qat)])
    states = [p.to_state() for p in PositionStore(pos).positions()]
    before, after = fidelity(net, ptq, states), fidelity(net, qat, states)
    assert after < 0.8 * before, (before, after)
    q = read_checkpoint(qat).config.quantization
    assert q["info"]["qat"]["steps"] == 300 and q["info"]["qat"]["target"] == "float"
    assert scheme_of(read_checkpoint(qat).config).weight_max == int(weight_range)


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


def test_a_learned_scale_gets_lsq_gradients_by_hand():
    """d y / d s of y = (clamp(round(x / s) + z) - z) * s: round(x / s) - x / s inside the
    range, the clamp bound minus z outside (Esser et al., LSQ); d y / d x is 1 inside, 0 out."""
    from kosumi.nets.quant import ActQuant
    from kosumi.quantize.qat import fake_quant_act

    x = torch.tensor([0.33, 1.0, 30.0, -0.2], dtype=torch.float64, requires_grad=True)
    s = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    y = fake_quant_act(x, ActQuant(scale=99.0, dtype="uint8"), s)  # the tensor wins
    np.testing.assert_allclose(y.detach().numpy(), [0.3, 1.0, 25.5, 0.0], atol=1e-12)
    grads = []
    for i in range(4):
        gx, gs = torch.autograd.grad(y[i], (x, s), retain_graph=True)
        grads.append((float(gx[i]), float(gs)))
    np.testing.assert_allclose(grads, [(1, 3 - 3.3), (1, 0), (0, 255), (0, 0)], atol=1e-9)
    # a signed value stored as uint8 (zero point 128): below the range the bound is 0 - 128
    x2 = torch.tensor([-20.0, -0.26], dtype=torch.float64)
    y2 = fake_quant_act(x2, ActQuant(scale=1.0, dtype="uint8", zero_point=128), s)
    g = [float(torch.autograd.grad(y2[i], s, retain_graph=True)[0]) for i in range(2)]
    np.testing.assert_allclose(g, [-128, -3 + 2.6], atol=1e-9)


def test_the_written_net_is_the_trained_one_with_its_learned_scales(setup, tmp_path):
    """The QAT state file (the trained torch graph: weights and log-scales, saved as training
    went) is an independent record of what was trained: its weights quantize to the written
    int8 weights, and with its learned scales the fake-quantized graph computes what the
    written net computes on the integer backend. With --qat-scales fixed the scales are
    calibration's, as in the PTQ net."""
    from kosumi.distill.train_state import read_training_state
    from kosumi.nets.quant import ActQuant

    _, net, pos = setup
    ptq, qat, fixed = (tmp_path / f"{k}.safetensors" for k in ("ptq", "qat", "fixed"))
    quantize([str(net), "--calib", str(pos), "--keep-float", "none", "--out", str(ptq)])
    common = [str(net), "--keep-float", "none", "--qat", "--data", str(pos), "--steps", "40",
              "--lr", "1e-2"]
    quantize([*common, "--out", str(qat)])
    quantize([*common, "--qat-scales", "fixed", "--out", str(fixed)])
    calibrated = scheme_of(read_checkpoint(ptq).config).acts
    learned = scheme_of(read_checkpoint(qat).config).acts
    assert {k: a.scale for k, a in scheme_of(read_checkpoint(fixed).config).acts.items()} == \
        {k: a.scale for k, a in calibrated.items()}
    moved = [abs(np.log(learned[k].scale / calibrated[k].scale)) for k in calibrated]
    assert max(moved) > 0.01, moved  # lr 1e-2 x 40 steps moves log-scales visibly

    saved, tensors = read_training_state(Path(str(qat) + ".qat-state"))
    q = read_checkpoint(qat)
    deq = dequantized(q)
    trained = {k[len("model/p."):].replace("__", "."): v for k, v in tensors.items()
               if k.startswith("model/p.")}
    for name, w in trained.items():  # the trained weights are what the int8 net holds
        if name.endswith(".weight") and q.tensors[name].dtype == np.int8:
            np.testing.assert_allclose(fake_quant_weight(w, saved["weight_max"]).numpy(),
                                       deq.tensors[name], rtol=1e-5, atol=1e-7)
    state_scales = {k[len("model/log_scales."):].replace("__", "."): float(torch.exp(v))
                    for k, v in tensors.items() if k.startswith("model/log_scales.")}
    assert state_scales and state_scales.keys() <= learned.keys()
    acts = {k: ActQuant(**{**v, "scale": state_scales.get(k, v["scale"])})
            for k, v in saved["acts"].items()}
    model = FakeQuantGraph(deq, saved["layers"], acts, saved["weight_max"])
    planes, glob = get_feature_set("basic").encode(bench_states(9, 12, seed=41))
    assert_same_outputs(model, q, planes, glob)


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--qat-scales", "maybe", "--qat-scales maybe: use learn or fixed"),
    ("--qat-scale-lr", "0", "--qat-scale-lr 0.0: give a positive share of --lr"),
])
def test_bad_scale_options_are_one_line_errors(setup, tmp_path, flag, value, says):
    _, net, pos = setup
    out = tmp_path / "x.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(net), "--qat", "--data", str(pos), flag, value,
                                 "--out", str(out)])
    assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output
    assert not out.exists()


def test_a_qat_run_that_made_the_net_worse_says_so(setup, tmp_path):
    """A learning rate far too high wrecks the fine-tune: the written net is still the trained
    one, but its report sets its SQNR beside the PTQ net's, and that figure is the one a plain
    `kosumi quantize` of the same choices reports (a separate run)."""
    _, net, pos = setup
    ptq, qat = tmp_path / "ptq.safetensors", tmp_path / "wrecked.safetensors"
    quantize([str(net), "--calib", str(pos), "--keep-float", "none", "--out", str(ptq)])
    r = CliRunner().invoke(app, ["quantize", str(net), "--keep-float", "none", "--qat",
                                 "--data", str(pos), "--steps", "20", "--lr", "0.3",
                                 "--out", str(qat)])
    assert r.exit_code == 0, r.output
    plain = read_checkpoint(ptq).config.quantization["info"]["rounding"]
    info = read_checkpoint(qat).config.quantization["info"]
    assert info["qat"]["ptq"] == {"rounding": plain["chosen"],
                                  "sqnr_db": plain["sqnr_db"][plain["chosen"]]}
    assert info["qat"]["sqnr_db"] < info["qat"]["ptq"]["sqnr_db"] - 3, info["qat"]
    assert info["qat"]["worse_than_ptq"] is True
    assert "QAT made it worse" in " ".join(r.output.split())


def test_the_float_graph_of_a_transformer_net_is_katagos_net(tmp_path):
    """QAT's torch graph runs KataGo's later ops (RMS norm, attention with rotary embeddings and
    grouped KV heads, SiLU, products): unquantized, it is the torch KataGoNet (checked against
    the real KataGo in tests/nets/test_katago.py)."""
    import gzip

    from katago_writer import MODERN, KataGoWriter

    from kosumi.nets.katago import read_katago_model

    path = tmp_path / "v15.bin.gz"
    path.write_bytes(gzip.compress(KataGoWriter(True, seed=4).model(version=15, blocks=MODERN)))
    ckpt = read_katago_model(path)
    graph = inference_graph(ckpt.config)
    layers = {n.name: "float" for n in graph.weighted()}
    plain = FakeQuantGraph(fold(ckpt.config, ckpt.tensors), layers, {}, 127, quantize=False)
    planes, glob = get_feature_set("katago_v7").encode(bench_states(9, 4, seed=3))
    with torch.no_grad():
        a = plain(torch.from_numpy(planes), torch.from_numpy(glob))
        b = build_net(ckpt)(torch.from_numpy(planes), torch.from_numpy(glob))
    for k in b:
        np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), atol=1e-4)
