"""Post-training quantization (kosumi.quantize.ptq, ``kosumi quantize``): the integer net
against its float self and against KataGo, fp16, TensorRT activations, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import random_net_file
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.distill.positions import Position, write_positions
from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import read_checkpoint, save_checkpoint
from kosumi.nets.quant import (
    QuantScheme,
)
from kosumi.runtime import load_evaluator
from kosumi.runtime.agreement import kl
from kosumi.runtime.bench import bench_states


# ---------------------------------------------------------------------------- the quantized net
def test_int8_net_plays_like_its_float_self(float_net_b2c16, int8_net_b2c16):
    states = bench_states(9, 64, seed=21) + bench_states(19, 32, seed=22)
    ref = load_evaluator(float_net_b2c16, backend="numpy", cache=False).evaluate(states)
    for backend in ("numpy", "onnxruntime"):
        ev = load_evaluator(int8_net_b2c16, backend=backend, cache=False)
        got = ev.evaluate(states)
        # a random net's policy is nearly flat (ties everywhere): judge the choice tie-aware
        choice = np.mean([a.policy[np.argmax(b.policy)] >= 0.9 * a.policy.max()
                          for a, b in zip(ref, got, strict=True)])
        mean_kl = np.mean([kl(a.policy, b.policy) for a, b in zip(ref, got, strict=True)])
        value = np.mean([abs(a.value - b.value) for a, b in zip(ref, got, strict=True)])
        assert choice >= 0.95 and mean_kl < 0.01 and value < 0.02, (backend, choice, mean_kl,
                                                                     value)
    with pytest.raises(KosumiError, match="runs on the numpy and onnxruntime backends"):
        load_evaluator(int8_net_b2c16, backend="torch")
    assert load_evaluator(int8_net_b2c16, cache=False).backend.name == "onnxruntime"  # auto


def test_auto_keeps_the_sensitive_ends_and_trunk_layers_within_the_budget():
    """Hand-built sensitivity rows of a tiny net (the b2c16's shape: the stem alone is 14% of
    the parameters): every sensitive layer outside ``blocks.`` stays float whatever the budget,
    insensitive ones never do, and trunk layers are taken most sensitive first while their
    parameters fit the budget."""
    from kosumi.quantize.ptq import LayerSensitivity, choose_float_layers

    rows = [LayerSensitivity("input_conv", 1584, 40.2, 0.01, 0.984),
            LayerSensitivity("global_linear", 64, 37.0, 0.01, 1.0),
            LayerSensitivity("blocks.0.conv1", 2304, 39.3, 0.01, 0.992),
            LayerSensitivity("blocks.0.conv2", 2304, 44.0, 0.01, 1.0),
            LayerSensitivity("blocks.1.conv1", 2304, 46.2, 0.01, 0.99),
            LayerSensitivity("blocks.1.conv2", 2304, 48.9, 0.01, 1.0),
            LayerSensitivity("policy_conv", 128, 42.0, 0.01, 0.992),
            LayerSensitivity("policy_pass", 16, 72.3, 0.002, 1.0),
            LayerSensitivity("value_fc1", 256, 39.3, 0.0, 1.0)]
    total = sum(r.parameters for r in rows)  # 11,264
    ends = {"global_linear", "value_fc1", "input_conv", "policy_conv"}
    assert set(choose_float_layers(rows, 0.0)) == ends
    assert set(choose_float_layers(rows, 0.05)) == ends  # 563 parameters: no trunk layer fits
    # 2,304 fit: the most sensitive trunk layer (39.3 dB) before the next (44.0 dB)
    assert set(choose_float_layers(rows, 2304 / total)) == ends | {"blocks.0.conv1"}
    # 46.2 dB but it alone changes a top move: sensitive; 48.9 dB and no change: never float
    assert set(choose_float_layers(rows, 1.0)) == ends | {"blocks.0.conv1", "blocks.0.conv2",
                                                          "blocks.1.conv1"}


def test_inspect_shows_the_scheme_per_layer(int8_net_b2c16):
    r = CliRunner().invoke(app, ["inspect", str(int8_net_b2c16), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    scheme = info["quantization"]
    assert scheme["bits"] == 8 and scheme["method"] == "mse"
    layers = scheme["layers"]
    assert layers["blocks.0.conv1"].startswith("int8 w-scale") and "in uint8" in \
        layers["blocks.0.conv1"]
    assert set(scheme["kept_float"]) == {k for k, v in layers.items() if v == "float32"}
    assert info["tensor_types"]["int8"] >= 4 and info["tensor_types"]["int32"] >= 4


def test_fp16(float_net_b2c16, calib_positions, tmp_path):
    out = tmp_path / "fp16.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(float_net_b2c16), "--bits", "16", "--out",
                                 str(out)])
    assert r.exit_code == 0, r.output
    assert {t.dtype for t in read_checkpoint(out).tensors.values()} == {np.dtype("float16")}
    states = bench_states(9, 64, seed=31) + bench_states(19, 32, seed=32)
    ref = load_evaluator(float_net_b2c16, backend="numpy", cache=False).evaluate(states)
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


def test_bad_input_is_one_line_and_writes_nothing(float_net_b2c16, int8_net_b2c16,
                                                  calib_positions, tmp_path):
    out = tmp_path / "out.safetensors"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    nine = random_net_file(tmp_path / "nine.safetensors", arch="b1c8", board_sizes=(9,))
    only19 = tmp_path / "p19"
    write_positions(only19, [Position.from_state(s, "x") for s in bench_states(19, 4)])
    nan = tmp_path / "nan.safetensors"
    ck = read_checkpoint(float_net_b2c16)
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
        (["quantize", str(float_net_b2c16), "--calib", str(empty), "--out", str(out)], "empty"),
        (["quantize", str(float_net_b2c16), "--out", str(out)], "needs --calib"),
        (["quantize", str(nine), "--calib", str(only19), "--out", str(out)], "19x19"),
        (["quantize", str(int8_net_b2c16), "--calib", str(calib_positions), "--out", str(out)],
         "already quantized"),
        (["quantize", str(nan), "--calib", str(calib_positions), "--out", str(out)], "NaN"),
        (["quantize", str(huge), "--calib", str(calib_positions), "--calib-size", "16",
          "--keep-float", "none", "--out", str(out)], "overflows int32"),
        (["quantize", str(float_net_b2c16), "--calib", str(calib_positions), "--keep-float",
          "nope", "--out", str(out)], "no layer 'nope'"),
        (["quantize", str(float_net_b2c16), "--calib", str(tmp_path / "missing"), "--out",
          str(out)], "no such calibration set"),
        (["quantize", str(float_net_b2c16), "--bits", "4", "--calib", str(calib_positions),
          "--out", str(out)], "8 or 16"),
        (["quantize", str(float_net_b2c16), "--calib", str(calib_positions), "--rounding",
          "stochastic", "--out", str(out)], "--rounding stochastic"),
    ]
    for args, needle in cases:
        one_line_exit_2(args, needle)
        assert not out.exists(), args


def test_int8_activations_for_tensorrt_and_the_exported_file(float_net_b2c16, calib_positions,
                                                             tmp_path):
    """``--activations int8`` (TensorRT's symmetric int8): every act int8 with zero point 0,
    the ReLUs kept in the graph; its ONNX file (kosumi export) runs in ONNX Runtime like the
    integer reference."""
    out = tmp_path / "s8.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(float_net_b2c16), "--calib", str(calib_positions),
                                 "--calib-size", "48", "--activations", "int8", "--out",
                                 str(out)])
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
    r = CliRunner().invoke(app, ["export", str(float_net_b2c16), "--format", "onnx",
                                 "--precision", "int8", "--out", str(tmp_path / "x.onnx")])
    assert r.exit_code == 2 and "kosumi quantize" in r.output


def test_quantized_outputs_run_as_one_int8_op_in_onnx_runtime(float_net_b2c16, int8_net_b2c16,
                                                              calib_positions, tmp_path):
    """``--quantize-outputs on``: every int8 layer requantizes its output, also where only float
    ops read it. ONNX Runtime's own optimizer is the oracle for what that buys: in its
    optimized graph no int8 layer is left as a float Conv/Gemm (DQ-Conv without a Q after it
    stays float), and the run still matches the integer reference. Without it (the default) a
    net quantizes as before."""
    import onnxruntime as ort

    from kosumi.nets.graph import WEIGHTED_OPS, inference_graph
    from kosumi.nets.quant import integer_plan

    out = tmp_path / "qo.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(float_net_b2c16), "--calib", str(calib_positions),
                                 "--calib-size", "96", "--quantize-outputs", "on", "--out",
                                 str(out)])
    assert r.exit_code == 0, r.output

    def float_ops_in_ort(model: Path) -> tuple[int, int]:
        onnx_file = tmp_path / f"{model.stem}.onnx"
        r = CliRunner().invoke(app, ["export", str(model), "--format", "onnx", "--out",
                                     str(onnx_file)])
        assert r.exit_code == 0, r.output
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(tmp_path / f"{model.stem}.opt.onnx")
        ort.InferenceSession(str(onnx_file), so, providers=["CPUExecutionProvider"])
        ops = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
        # less the export's exact identity convolution that starts an int8 stream after a float
        # stem (nets.onnx, _stream_identity): not a layer of the net
        identities = sum(t.name.endswith(".identity_q")
                         for t in onnx.load(str(onnx_file)).graph.initializer)
        return (sum(o in ("Conv", "FusedConv", "Gemm", "MatMul", "FusedGemm") for o in ops),
                sum(o in ("QLinearConv", "QLinearMatMul", "QGemm") for o in ops) - identities)

    q = read_checkpoint(out)
    scheme = QuantScheme.from_dict(q.config.quantization)
    graph = inference_graph(q.config)
    plan = integer_plan(graph, scheme.layers, scheme.acts)
    int_steps = [st for st in plan.steps if st.integer and st.node.op in WEIGHTED_OPS]
    assert int_steps and all(st.requant for st in int_steps)
    kept_float = sum(1 for n in graph.weighted() if scheme.layers[n.name] == "float")
    float_on, int_on = float_ops_in_ort(out)
    float_auto, int_auto = float_ops_in_ort(int8_net_b2c16)
    assert float_on == kept_float < float_auto and int_on == len(int_steps) > int_auto
    auto = QuantScheme.from_dict(read_checkpoint(int8_net_b2c16).config.quantization)
    auto_plan = integer_plan(inference_graph(q.config), auto.layers, auto.acts)
    assert auto.info.get("quantize_outputs") is False
    assert not all(st.requant for st in auto_plan.steps
                   if st.integer and st.node.op in WEIGHTED_OPS)
    states = bench_states(9, 24, seed=43)
    a = load_evaluator(out, backend="numpy", cache=False).evaluate(states)
    b = load_evaluator(out, backend="onnxruntime", cache=False).evaluate(states)
    assert max(float(np.abs(x.policy - y.policy).max()) for x, y in zip(a, b, strict=True)) < 0.02
    r = CliRunner().invoke(app, ["quantize", str(float_net_b2c16), "--calib", str(calib_positions),
                                 "--quantize-outputs", "maybe", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--quantize-outputs maybe" in r.output


def test_katago_int8_against_katago_itself(calib_positions, katago_model, reference_positions,
                                          tmp_path):
    """KataGo's g170 net quantized to int8 (every layer int8 but the value head, which
    --keep-float names), judged against the real KataGo engine's outputs."""
    from helpers import katago_policy, replay_reference

    from kosumi.quantize import QuantizeOptions, quantize_model

    model = katago_model
    out = tmp_path / "g170-int8.safetensors"
    quantize_model(model, out, QuantizeOptions(keep_float=["v2", "v3", "sv3", "own"],
                                               sensitivity=False),
                   calib=calib_positions, calib_limit=64)
    refs = reference_positions[::3]
    states = [replay_reference(r) for r in refs]
    got = load_evaluator(out, backend="numpy", cache=False).evaluate(states)
    top1, kls = [], []
    for r, e in zip(refs, got, strict=True):
        p = katago_policy(r)
        top1.append(int(np.argmax(p)) == int(np.argmax(e.policy)))
        kls.append(kl(p, e.policy))
    assert np.mean(top1) >= 0.85 and np.mean(kls) <= 0.03, (np.mean(top1), np.mean(kls))
