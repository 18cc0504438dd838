"""Zeroing small int8 weights (``quantize.zeroing``): exactly the weights asked for, the bias
correction really restores the layers' mean outputs in the integer backend, the pack gets
smaller, and ``kosumi quantize --zero`` records what it did."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import quantized_net_files
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.export.pack import pack_checkpoint
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.quantize.calibration import collect_stats, read_calibration
from kosumi.quantize.zeroing import input_means, zero_small_weights, zeroing_curve
from kosumi.runtime.numpy_int8 import Int8NumpyBackend


@pytest.fixture(scope="module")
def q(tmp_path_factory):
    root = tmp_path_factory.mktemp("zero")
    net, calib, qpath = quantized_net_files(root, seed=7, positions=64)
    return {"net": net, "calib": calib, "q": qpath, "ck": read_checkpoint(qpath),
            "states": read_calibration(calib, None)}


def test_exactly_the_small_weights_become_zero(q):
    ck = q["ck"]
    z, zeroed = zero_small_weights(ck, 3)
    count, total = zeroed.weights, zeroed.of
    int8 = [k for k, v in ck.tensors.items() if v.dtype == np.int8]
    assert total == sum(ck.tensors[k].size for k in int8) and count > 0
    expect = 0
    for k in int8:
        a, b = ck.tensors[k].astype(int), z.tensors[k].astype(int)
        small = (np.abs(a) <= 3) & (a != 0)
        expect += int(small.sum())
        assert not b[small].any() and np.array_equal(a[~small], b[~small]), k
    assert count == expect
    for k, v in ck.tensors.items():  # nothing else changes without means
        if v.dtype != np.int8:
            assert np.array_equal(v, z.tensors[k]), k
    assert (zeroed.threshold, zeroed.bias_corrected) == (3, False)
    assert z.config == ck.config  # the record is the quantizer's to write (quantize --zero)
    with pytest.raises(Exception, match="0 or more"):
        zero_small_weights(ck, -1)


def test_bias_correction_restores_the_mean_outputs(q):
    ck, states = q["ck"], q["states"]
    fs = get_feature_set(ck.config.features)

    def means(c):
        stats = collect_stats(Int8NumpyBackend(c.config, c.tensors), fs, states)
        return {k: v.chan_mean for k, v in stats.items()}

    ref = means(ck)
    plain = means(zero_small_weights(ck, 6)[0])
    fixed = means(zero_small_weights(ck, 6, input_means(ck, states))[0])
    layer = "blocks.0.conv2"  # an int8 layer with an int8 input, no ReLU fused after it
    err_plain = np.abs(plain[layer] - ref[layer]).mean()
    err_fixed = np.abs(fixed[layer] - ref[layer]).mean()
    assert err_fixed < 0.5 * err_plain, (err_fixed, err_plain)


def test_curve_shrinks_the_pack_and_costs_agreement(q):
    rows = zeroing_curve(q["ck"], q["states"][:32], thresholds=(0, 4, 16))
    assert [r["threshold"] for r in rows] == [0, 4, 16]
    assert rows[0]["zeroed"] == 0 and rows[0]["agreement"]["9x9"]["top1"] == 1.0
    assert rows[0]["pack_bytes"] == len(pack_checkpoint(q["ck"])[0])
    assert rows[0]["pack_bytes"] > rows[1]["pack_bytes"] > rows[2]["pack_bytes"]
    assert rows[0]["weights_entropy"] > rows[1]["weights_entropy"] > rows[2]["weights_entropy"]
    assert rows[2]["zeroed"] > rows[1]["zeroed"] > 0
    assert rows[2]["agreement"]["9x9"]["policy_kl"] > rows[1]["agreement"]["9x9"]["policy_kl"]


def test_quantize_zero_records_and_plays(q, tmp_path):
    out = tmp_path / "z.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(q["net"]), "--calib", str(q["calib"]),
                                 "--zero", "2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "--zero 2:" in r.output and "set to zero" in r.output and "zeroed: " in r.output
    z = read_checkpoint(out)
    info = z.config.quantization["info"]["zeroed"]
    assert info["threshold"] == 2 and info["bias_corrected"] and info["weights"] > 0
    for k, v in z.tensors.items():
        if v.dtype == np.int8:
            assert not ((np.abs(v.astype(int)) <= 2) & (v != 0)).any(), k
    r = CliRunner().invoke(app, ["analyze", "--model", str(out), "--size", "9",
                                 "--moves", "B E5", "--backend", "numpy"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["quantize", str(q["net"]), "--bits", "16", "--zero", "2",
                                 "--out", str(tmp_path / "h.safetensors")])
    assert r.exit_code == 2 and "--zero works on int8 weights" in r.output
