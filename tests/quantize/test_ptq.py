"""Quantization: the fixed-point arithmetic against exact rationals, the integer reference
against the float net, ONNX Runtime's int8 run (its own QLinearConv, and the whole exported
graph) against the integer reference, the rewrites that must not change the float net, the
``kosumi quantize`` command, and bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import random_net_file
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.distill.positions import Position, write_positions
from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import read_checkpoint, save_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.nets.fold import fold_batchnorm
from kosumi.nets.quant import (
    ActQuant,
    QuantScheme,
    add_multipliers,
    integer_add,
    quantize_multiplier,
    requantize,
)
from kosumi.quantize.calibration import collect_stats
from kosumi.quantize.equalize import equalize_blocks, equalize_stream
from kosumi.runtime import load_evaluator
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_backend import NumpyBackend
from kosumi.runtime.numpy_int8 import Int8NumpyBackend, int_matmul


@pytest.fixture(autouse=True)
def onnx_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KOSUMI_ONNX_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "onnx"))


@pytest.fixture(scope="module")
def calib(tmp_path_factory) -> Path:
    """Positions of seeded random games, 9x9 and 19x19 (other games than any test position)."""
    path = tmp_path_factory.mktemp("calib") / "pos"
    states = bench_states(9, 96, seed=5) + bench_states(19, 48, seed=6)
    write_positions(path, [Position.from_state(s, f"calib:{i}") for i, s in enumerate(states)])
    return path


@pytest.fixture(scope="module")
def net(tmp_path_factory) -> Path:
    return random_net_file(tmp_path_factory.mktemp("q") / "b2c16.safetensors", arch="b2c16",
                           seed=3)


@pytest.fixture(scope="module")
def qnet(net, calib, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("q") / "b2c16-int8.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(net), "--bits", "8", "--calib", str(calib),
                                 "--calib-size", "96", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "sensitivity" in r.output and "wrote" in r.output
    return out


# ---------------------------------------------------------------------------- fixed point
def test_multipliers_and_requantisation_against_exact_rationals():
    rng = np.random.default_rng(0)
    m = np.exp(rng.uniform(np.log(1e-6), np.log(4.0), 200))
    m0, shift = quantize_multiplier(m)
    assert ((m0 >= 2**30) & (m0.astype(np.int64) < 2**31)).all()
    approx = m0.astype(np.float64) * 2.0 ** (-(31 + shift.astype(np.float64)))
    assert np.all(np.abs(approx / m - 1) < 2.0**-30)
    acc = rng.integers(-2**24, 2**24, size=(50, 200), dtype=np.int64)
    act = ActQuant(scale=1.0, dtype="uint8", zero_point=128)
    got = requantize(acc, m0, shift, act)
    for i in range(0, 50, 7):  # round half up of the exact product, then the zero point
        for j in range(0, 200, 13):
            exact = Fraction(int(acc[i, j])) * Fraction(int(m0[j]), 2 ** (31 + int(shift[j])))
            want = int((exact + Fraction(1, 2)).__floor__()) + 128
            assert got[i, j] == min(255, max(0, want))
    relu = requantize(acc, m0, shift, act, relu=True)
    assert relu.min() >= 128  # a fused ReLU clamps at the zero point


def test_integer_add_against_exact_rationals():
    rng = np.random.default_rng(1)
    a_act, b_act = ActQuant(0.02, "uint8"), ActQuant(0.013, "uint8", zero_point=128)
    out = ActQuant(0.031, "uint8")
    p = add_multipliers(a_act.scale / out.scale, b_act.scale / out.scale)
    a = rng.integers(0, 256, 500)
    b = rng.integers(0, 256, 500)
    got = integer_add(a, b, p, a_act, b_act, out, relu=True)
    for i in range(0, 500, 11):
        exact = (Fraction(int(a[i])) * p["ma"] + Fraction(int(b[i]) - 128) * p["mb"]) \
            / 2 ** p["shift"]
        want = max(0, min(255, int((exact + Fraction(1, 2)).__floor__())))
        assert got[i] == want
    # the rescales themselves are within 2^-30 of s_in / s_out
    assert abs(p["ma"] / 2 ** p["shift"] / (a_act.scale / out.scale) - 1) < 2**-28


def test_chunked_float32_products_are_exact():
    rng = np.random.default_rng(2)
    x = rng.integers(200, 256, size=(64, 1500)).astype(np.float32)  # sums past 2^24
    w = rng.integers(100, 128, size=(32, 1500)).astype(np.float32)
    want = x.astype(np.int64) @ w.astype(np.int64).T
    assert np.array_equal(int_matmul(x, w, 513), want)
    assert not np.array_equal((x @ w.T).astype(np.int64), want)  # one float32 product is not


# ---------------------------------------------------------------------------- rewrites
def test_equalization_leaves_the_float_net_unchanged(net, calib):
    ckpt = read_checkpoint(net)
    folded = fold_batchnorm(ckpt.config, ckpt.tensors)
    cfg16 = replace(ckpt.config, quantization=QuantScheme(bits=16).to_dict())
    fs = get_feature_set("basic")
    states = bench_states(9, 8, seed=9)
    stats = collect_stats(NumpyBackend(cfg16, folded), fs, states)
    eq, spread = equalize_blocks(ckpt.config, folded, stats)
    eq, _ = equalize_stream(ckpt.config, eq, stats, 1.0)
    assert spread and any(not np.allclose(eq[k], folded[k]) for k in folded)
    planes, glob = fs.encode(states)
    a = NumpyBackend(cfg16, folded).forward(planes, glob)
    b = NumpyBackend(cfg16, eq).forward(planes, glob)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------- the quantized net
def test_int8_net_plays_like_its_float_self(net, qnet):
    states = bench_states(9, 64, seed=21) + bench_states(19, 32, seed=22)
    ref = load_evaluator(net, backend="numpy", cache=False).evaluate(states)
    for backend in ("numpy", "onnxruntime"):
        ev = load_evaluator(qnet, backend=backend, cache=False)
        got = ev.evaluate(states)
        # a random net's policy is nearly flat (ties everywhere): judge the choice tie-aware
        choice = np.mean([a.policy[np.argmax(b.policy)] >= 0.9 * a.policy.max()
                          for a, b in zip(ref, got, strict=True)])
        kl = np.mean([np.sum(a.policy * np.log(np.maximum(a.policy, 1e-30)
                                                / np.maximum(b.policy, 1e-30)))
                      for a, b in zip(ref, got, strict=True)])
        value = np.mean([abs(a.value - b.value) for a, b in zip(ref, got, strict=True)])
        assert choice >= 0.95 and kl < 0.01 and value < 0.02, (backend, choice, kl, value)
    with pytest.raises(KosumiError, match="runs on the numpy and onnxruntime backends"):
        load_evaluator(qnet, backend="torch")
    assert load_evaluator(qnet, cache=False).backend.name == "onnxruntime"  # auto


def test_onnxruntime_int8_run_matches_the_integer_reference(qnet):
    """Every quantized activation of ONNX Runtime's run of the exported Q/DQ graph against the
    integer reference on the same inputs: equal, or 1 LSB apart."""
    from kosumi.nets.graph import inference_graph
    from kosumi.nets.onnx import _QdqBuilder, onnx_model

    q = read_checkpoint(qnet)
    model = onnx_model(q.config, q.tensors)
    builder = _QdqBuilder(inference_graph(q.config), q.tensors, q.config)
    builder.run({"planes": "planes", "globals": "globals"})
    for name in builder.qvals.values():  # expose every quantized tensor
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = Int8NumpyBackend(q.config, q.tensors)
    fused = {n.op_type for n in onnx.load_from_string(model.SerializeToString()).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= fused
    compared = 0
    for size in (9, 19):
        planes, glob = get_feature_set("basic").encode(bench_states(size, 6, seed=size))
        outs = dict(zip([o.name for o in sess.get_outputs()],
                        sess.run(None, {"planes": planes, "globals": glob}), strict=True))
        values = ref._run(planes, glob)
        for value, name in builder.qvals.items():
            mine = values.get(value)
            if not isinstance(mine, tuple):
                continue
            qa = mine[0] if mine[0].ndim != 4 else mine[0].transpose(0, 3, 1, 2)
            diff = np.abs(qa.astype(np.int64) - outs[name].astype(np.int64))
            assert diff.max() <= 1, (value, int(diff.max()))
            compared += 1
    assert compared > 10


def test_onnxruntime_qlinearconv_agrees_layer_by_layer(qnet):
    """ONNX Runtime's own QLinearConv (an op kosumi's export never names) on the integer
    reference's input of each int8 convolution: the same output, or 1 LSB apart."""
    from onnx import TensorProto, helper

    q = read_checkpoint(qnet)
    ref = Int8NumpyBackend(q.config, q.tensors)
    planes, glob = get_feature_set("basic").encode(bench_states(9, 4, seed=3))
    values = ref._run(planes, glob)
    checked = 0
    for st in ref.plan.steps:
        n = st.node
        if not (st.integer and n.op == "conv" and st.requant):
            continue
        x_act, y_act = ref.acts[n.inputs[0]], ref.acts[st.output]
        xq = ref._quant(values, n.inputs[0]).transpose(0, 3, 1, 2).astype(np.uint8)
        w = q.tensors[f"{n.name}.weight"]
        k = w.shape[2]
        init = [helper.make_tensor("xs", TensorProto.FLOAT, [], [x_act.scale]),
                helper.make_tensor("xz", TensorProto.UINT8, [], [x_act.zero_point]),
                onnx.numpy_helper.from_array(w, "w"),
                onnx.numpy_helper.from_array(q.tensors[f"{n.name}.weight_scale"], "ws"),
                onnx.numpy_helper.from_array(np.zeros(w.shape[0], np.int8), "wz"),
                helper.make_tensor("ys", TensorProto.FLOAT, [], [y_act.scale]),
                helper.make_tensor("yz", TensorProto.UINT8, [], [y_act.zero_point]),
                onnx.numpy_helper.from_array(q.tensors[f"{n.name}.bias"], "b")]
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                                ["y"], pads=[k // 2] * 4)
        g = helper.make_graph([node], "one", [helper.make_tensor_value_info(
            "x", TensorProto.UINT8, list(xq.shape))], [helper.make_tensor_value_info(
                "y", TensorProto.UINT8, None)], initializer=init)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": xq})[0]
        mine = values[st.output][0].transpose(0, 3, 1, 2)
        if st.fused is not None:  # ONNX Runtime has no fused ReLU: clamp its output too
            y = np.maximum(y, y_act.zero_point)
        assert np.abs(mine.astype(np.int64) - y.astype(np.int64)).max() <= 1, n.name
        checked += 1
    assert checked >= 4


def test_inspect_shows_the_scheme_per_layer(qnet):
    r = CliRunner().invoke(app, ["inspect", str(qnet), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    scheme = info["quantization"]
    assert scheme["bits"] == 8 and scheme["method"] == "mse"
    layers = scheme["layers"]
    assert layers["blocks.0.conv1"].startswith("int8 w-scale") and "in uint8" in \
        layers["blocks.0.conv1"]
    assert set(scheme["kept_float"]) == {k for k, v in layers.items() if v == "float32"}
    assert info["tensor_types"]["int8"] >= 4 and info["tensor_types"]["int32"] >= 4


def test_fp16(net, calib, tmp_path):
    out = tmp_path / "fp16.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(net), "--bits", "16", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert {t.dtype for t in read_checkpoint(out).tensors.values()} == {np.dtype("float16")}
    states = bench_states(9, 64, seed=31) + bench_states(19, 32, seed=32)
    ref = load_evaluator(net, backend="numpy", cache=False).evaluate(states)
    for backend in ("numpy", "onnxruntime"):
        got = load_evaluator(out, backend=backend, cache=False).evaluate(states)
        assert np.mean([np.argmax(a.policy) == np.argmax(b.policy)
                        for a, b in zip(ref, got, strict=True)]) >= 0.99, backend


# ---------------------------------------------------------------------------- bad input
def one_line_exit_2(args: list[str], *needles: str) -> str:
    r = CliRunner().invoke(app, args)
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and lines and lines[-1].startswith("kosumi: error:"), r.output
    for n in needles:
        assert n in lines[-1], lines[-1]
    return lines[-1]


def test_bad_input_is_one_line_and_writes_nothing(net, qnet, calib, tmp_path):
    out = tmp_path / "out.safetensors"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    nine = random_net_file(tmp_path / "nine.safetensors", arch="b1c8", board_sizes=(9,))
    only19 = tmp_path / "p19"
    write_positions(only19, [Position.from_state(s, "x") for s in bench_states(19, 4)])
    nan = tmp_path / "nan.safetensors"
    ck = read_checkpoint(net)
    bad = dict(ck.tensors)
    bad["blocks.0.conv1.weight"] = bad["blocks.0.conv1.weight"].copy()
    bad["blocks.0.conv1.weight"].flat[0] = np.nan
    with pytest.raises(KosumiError, match="NaN"):
        save_checkpoint(nan, bad, ck.config)  # kosumi refuses to write it; a file made elsewhere:
    from safetensors.numpy import save

    nan.write_bytes(save(bad, metadata={"format": "kosumi-checkpoint",
                                        "kosumi_config": ck.config.to_json()}))
    huge = tmp_path / "huge.safetensors"
    big = dict(ck.tensors)
    big["blocks.0.bn1.bias"] = np.full_like(big["blocks.0.bn1.bias"], 1e30)
    save_checkpoint(huge, big, ck.config)
    cases = [
        (["quantize", str(net), "--calib", str(empty), "--out", str(out)], "empty"),
        (["quantize", str(net), "--out", str(out)], "needs --calib"),
        (["quantize", str(nine), "--calib", str(only19), "--out", str(out)], "19x19"),
        (["quantize", str(qnet), "--calib", str(calib), "--out", str(out)], "already quantized"),
        (["quantize", str(nan), "--calib", str(calib), "--out", str(out)], "NaN"),
        (["quantize", str(huge), "--calib", str(calib), "--calib-size", "16", "--keep-float",
          "none", "--out", str(out)], "overflows int32"),
        (["quantize", str(net), "--calib", str(calib), "--keep-float", "nope", "--out",
          str(out)], "no layer 'nope'"),
        (["quantize", str(net), "--calib", str(tmp_path / "missing"), "--out", str(out)],
         "no such calibration set"),
        (["quantize", str(net), "--bits", "4", "--calib", str(calib), "--out", str(out)],
         "8 or 16"),
    ]
    for args, needle in cases:
        one_line_exit_2(args, needle)
        assert not out.exists(), args


def test_int8_activations_for_tensorrt_and_the_exported_file(net, calib, tmp_path):
    """``--activations int8`` (TensorRT's symmetric int8): every act int8 with zero point 0,
    the ReLUs kept in the graph; its ONNX file (kosumi export) runs in ONNX Runtime like the
    integer reference."""
    out = tmp_path / "s8.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(net), "--calib", str(calib), "--calib-size",
                                 "48", "--activations", "int8", "--out", str(out)])
    assert r.exit_code == 0, r.output
    scheme = QuantScheme.from_dict(read_checkpoint(out).config.quantization)
    assert scheme.activations == "int8"
    assert {(a.dtype, a.zero_point) for a in scheme.acts.values()} == {("int8", 0)}
    onnx_file = tmp_path / "s8.onnx"
    r = CliRunner().invoke(app, ["export", str(out), "--format", "onnx", "--out",
                                 str(onnx_file)])
    assert r.exit_code == 0 and "int8 (explicit Q/DQ" in r.output, r.output
    model = onnx.load(str(onnx_file))
    assert any(n.op_type == "Relu" for n in model.graph.node)
    states = bench_states(9, 24, seed=41)
    a = load_evaluator(out, backend="numpy", cache=False).evaluate(states)
    b = load_evaluator(onnx_file, cache=False).evaluate(states)
    assert max(float(np.abs(x.policy - y.policy).max()) for x, y in zip(a, b, strict=True)) < 0.02
    r = CliRunner().invoke(app, ["export", str(net), "--format", "onnx", "--precision", "int8",
                                 "--out", str(tmp_path / "x.onnx")])
    assert r.exit_code == 2 and "kosumi quantize" in r.output


def test_katago_int8_against_katago_itself(calib, reference_positions, tmp_path):
    """KataGo's g170 net quantized to int8 (every layer int8 but the value head, which
    --keep-float names), judged against the real KataGo engine's outputs."""
    from helpers import replay_reference, shared_path

    from kosumi.quantize import QuantizeOptions, quantize_model

    model = shared_path("models/g170-b6c96-s175395328-d26788732.bin.gz")
    out = tmp_path / "g170-int8.safetensors"
    quantize_model(model, out, QuantizeOptions(keep_float=["v2", "v3", "sv3", "own"],
                                               sensitivity=False), calib=calib, calib_limit=64)
    refs = reference_positions[::3]
    states = [replay_reference(r) for r in refs]
    got = load_evaluator(out, backend="numpy", cache=False).evaluate(states)
    top1, kl = [], []
    for r, e in zip(refs, got, strict=True):
        k = r["katago_raw_nn"]
        p = np.array([0.0 if x is None else x for x in k["policy"]] + [k["policyPass"]])
        top1.append(int(np.argmax(p)) == int(np.argmax(e.policy)))
        kl.append(float(np.sum(np.where(p > 0, p * (np.log(np.maximum(p, 1e-30))
                                                    - np.log(np.maximum(e.policy, 1e-30))), 0))))
    assert np.mean(top1) >= 0.85 and np.mean(kl) <= 0.03, (np.mean(top1), np.mean(kl))
