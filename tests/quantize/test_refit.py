"""``quantize.refit``: each int8 layer's refit against an independent least-squares solve on the
inputs the finished quantized net really feeds it, a layer on exact inputs left as it was, and
``kosumi quantize --rounding refit`` choosing among refit, GPTQ and round to nearest."""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.models import resolve_model
from kosumi.nets.features import get_feature_set
from kosumi.nets.fold import fold
from kosumi.nets.formats import read_net
from kosumi.nets.quant import integer_plan
from kosumi.quantize.calibration import collect_stats
from kosumi.quantize.ptq import build_quantized, make_acts
from kosumi.quantize.refit import refit_layers
from kosumi.quantize.rounding import DAMP, quantize_weights
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_backend import NumpyBackend
from kosumi.runtime.numpy_int8 import Int8NumpyBackend
from kosumi.runtime.numpy_ops import im2col_nhwc


@pytest.fixture(scope="module")
def refit_default():
    """``default`` (a trained net), every layer int8, refit on 128 9x9 positions in 4 batches
    of 32 (2,592 rows each: none sampled away)."""
    ckpt = read_net(resolve_model("default"), what="test")
    net = fold(ckpt.config, ckpt.tensors)
    graph = net.graph
    fs = get_feature_set(net.config.features)
    states = bench_states(9, 128, seed=11)
    stats = collect_stats(NumpyBackend.folded(net), fs, states)
    layers = {n.name: "int8" for n in graph.weighted()}
    wanted = integer_plan(graph, layers).quantized | {n.inputs[0] for n in graph.weighted()}
    acts = make_acts(net, stats, {v for v in wanted if v in stats}, "mse", 99.99)

    def build(refit_net, rounded):
        return build_quantized(refit_net, layers, acts, 127, None, None, (), rounded)

    batches = [fs.encode(states[i:i + 32]) for i in range(0, 128, 32)]
    result = refit_layers(net, build, batches, 127)
    return net, build, batches, result


@pytest.mark.parametrize("layer", ["blocks.0.conv1", "blocks.0.conv2"])
def test_refit_is_the_least_squares_fit_to_the_quantized_nets_own_inputs(refit_default, layer):
    """The oracle: the finished net's dequantized inputs of the layer (everything before it
    already refit and rounded) against the float net's output, solved by np.linalg.lstsq with
    the ridge towards the float weights written as extra rows; then the rounding's mean shift
    over those inputs added to the bias."""
    net, build, batches, result = refit_default
    folded = net.tensors
    q = build(result.net, result.rounded)
    int8, float_net = Int8NumpyBackend(q.config, q.tensors), NumpyBackend.folded(net)
    x_name = next(n for n in float_net.graph.nodes if n.output == layer).inputs[0]
    w = folded[f"{layer}.weight"].astype(np.float64)
    W, b = w.reshape(w.shape[0], -1), folded[f"{layer}.bias"].astype(np.float64)
    xq = np.concatenate([im2col_nhwc(int8.values(p, g)[x_name], 3) for p, g in batches])
    xf = np.concatenate([im2col_nhwc(float_net.values(p, g)[x_name], 3) for p, g in batches])
    xq, xf = xq.astype(np.float64), xf.astype(np.float64)
    rows, k = xq.shape
    assert rows == 128 * 81
    lam = DAMP * float(np.mean(np.sum(xq * xq, axis=0) / rows))
    design = np.concatenate([
        np.concatenate([xq, np.ones((rows, 1))], axis=1) / np.sqrt(rows),
        np.sqrt(lam) * np.eye(k, k + 1)])
    target = np.concatenate([(xf @ W.T + b) / np.sqrt(rows), np.sqrt(lam) * W.T])
    sol = np.linalg.lstsq(design, target, rcond=None)[0]
    w_fit, b_fit = sol[:k].T, sol[k]
    got = result.net.tensors[f"{layer}.weight"].astype(np.float64).reshape(W.shape)
    err = np.linalg.norm(got - w_fit) / np.linalg.norm(w_fit)
    moved = np.linalg.norm(w_fit - W) / np.linalg.norm(W)
    assert err < 2e-3 and moved > 10 * err, (err, moved)
    # the stored bias: the fit's, plus the mean output the GPTQ rounding took away
    _, scale = quantize_weights(result.net.tensors[f"{layer}.weight"], 127)
    qs = result.rounded[layer].reshape(W.shape).astype(np.float64) * scale[:, None]
    expect = b_fit + (got - qs) @ xq.mean(axis=0)
    np.testing.assert_allclose(result.net.tensors[f"{layer}.bias"], expect,
                               atol=2e-3 * float(np.abs(expect).max()))


def test_a_layer_on_exact_inputs_is_left_as_it_was(refit_default):
    """The stem reads the binary input planes, which uint8 holds exactly: nothing to refit."""
    net, _, _, result = refit_default
    assert "input_conv" in result.rounded
    w = net.weight("input_conv")
    # float32 sums: the targets W x + b are float32 products, whose rounding depends on the
    # CPU's BLAS kernel (an AVX-512 one moved one of 6,336 weights by 1.4e-4 of the largest);
    # the whole layer moved less than 1e-4 (below)
    np.testing.assert_allclose(result.net.tensors["input_conv.weight"], w,
                               atol=5e-4 * float(np.abs(w).max()))
    assert result.moved["input_conv"] < 1e-4 < min(result.moved["blocks.0.conv1"],
                                                   result.moved["blocks.0.conv2"])


def test_kosumi_quantize_refit_tries_gptq_and_nearest_too(calib_positions, tmp_path):
    """``--rounding refit`` (the default) builds the refit, GPTQ and round-to-nearest nets and
    keeps the best judged; its GPTQ figure is a separate ``--rounding gptq`` run's (the same
    statistics), and ONNX Runtime runs the refit integers like any others."""
    from typer.testing import CliRunner

    from kosumi.cli import app
    from kosumi.nets.checkpoint import read_checkpoint

    info = {}
    for rounding in ("refit", "gptq"):
        out = tmp_path / f"{rounding}.safetensors"
        args = ["quantize", "default", "--calib", str(calib_positions), "--calib-size", "64",
                "--keep-float", "none", "--out", str(out)]
        r = CliRunner().invoke(app, args + (["--rounding", "gptq"] if rounding == "gptq" else []))
        assert r.exit_code == 0, r.output
        assert "convolution equal to the integer reference or 1 LSB apart" in " ".join(
            r.output.split())
        info[rounding] = read_checkpoint(out).config.quantization["info"]["rounding"]
    refit = info["refit"]
    assert refit["asked"] == "refit" and set(refit["sqnr_db"]) == {"refit", "gptq", "nearest"}
    assert refit["sqnr_db"]["gptq"] == info["gptq"]["sqnr_db"]["gptq"]
    assert refit["chosen"] == max(refit["sqnr_db"], key=refit["sqnr_db"].get)
    assert refit["refit_layers"] >= 12  # the convolutions; the pooled dense layers are not
