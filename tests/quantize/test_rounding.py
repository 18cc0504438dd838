"""``quantize.rounding`` (GPTQ): its input statistics against a by-hand im2col, the rounding
against round to nearest on the layer's own output error, and the choice ``kosumi quantize``
makes between them."""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.quantize.rounding import gptq_round, quantize_weights
from kosumi.runtime.numpy_ops import im2col_nhwc


def _by_hand_patches(x: np.ndarray, k: int) -> np.ndarray:
    """im2col by explicit loops: rows (b, y, x), columns (c, ky, kx), zeros off the board."""
    b, n, m, c = x.shape
    p = k // 2
    rows = []
    for bi in range(b):
        for y in range(n):
            for xx in range(m):
                row = []
                for ci in range(c):
                    for dy in range(k):
                        for dx in range(k):
                            yy, xs = y + dy - p, xx + dx - p
                            row.append(x[bi, yy, xs, ci] if 0 <= yy < n and 0 <= xs < m else 0.0)
                rows.append(row)
    return np.array(rows)


def test_patches_match_explicit_im2col_and_the_weight_layout():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 5, 3)).astype(np.float32)
    cols = im2col_nhwc(x, 3)  # what GPTQ's input statistics are taken over
    np.testing.assert_allclose(cols, _by_hand_patches(x, 3))
    # a convolution by hand (zero padding) equals the patches times weight.reshape(O, -1)
    w = rng.normal(size=(4, 3, 3, 3))
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    by_hand = np.zeros((2, 5, 5, 4))
    for dy in range(3):
        for dx in range(3):
            by_hand += np.einsum("bhwc,oc->bhwo", xp[:, dy:dy + 5, dx:dx + 5, :], w[:, :, dy, dx])
    np.testing.assert_allclose(cols @ w.reshape(4, -1).T, by_hand.reshape(-1, 4), atol=1e-5)


def _correlated_inputs(rng, rows=4000, k=48, mix_seed=0):
    """Inputs that mostly live in 8 directions (like a layer's channels), plus a little
    noise; the same distribution for every ``rng``."""
    mix = np.random.default_rng(mix_seed).normal(size=(8, k))
    return rng.normal(size=(rows, 8)) @ mix + 0.1 * rng.normal(size=(rows, k))


@pytest.mark.parametrize("weight_max", [127, 63, 7])
def test_gptq_lowers_the_layer_output_error_of_round_to_nearest(weight_max):
    rng = np.random.default_rng(weight_max)
    x = _correlated_inputs(rng)
    w = rng.normal(size=(16, x.shape[1])).astype(np.float32)
    h = x.T @ x / len(x)
    nearest, scale = quantize_weights(w, weight_max)
    q = gptq_round(w, scale, h, weight_max)
    assert q.dtype == np.int8 and np.abs(q.astype(int)).max() <= weight_max

    def output_error(qw):
        return float(np.mean((x @ (w - qw * scale[:, None]).T) ** 2))

    # judged on fresh inputs of the same distribution, not the ones H came from
    x = _correlated_inputs(np.random.default_rng(99))
    assert output_error(q) < 0.5 * output_error(nearest)
    # the same scales, and each weight within a few steps of its nearest level
    assert np.abs(q.astype(int) - nearest.astype(int)).max() <= max(3, weight_max // 8)


def test_gptq_with_uncorrelated_inputs_is_round_to_nearest():
    # a diagonal H passes no error on: every column is rounded alone
    rng = np.random.default_rng(3)
    w = rng.normal(size=(8, 20)).astype(np.float32)
    h = np.diag(rng.uniform(0.5, 2.0, size=20))
    nearest, scale = quantize_weights(w, 63)
    np.testing.assert_array_equal(gptq_round(w, scale, h, 63), nearest)


def test_gptq_rounds_never_seen_inputs_to_nearest():
    rng = np.random.default_rng(4)
    x = _correlated_inputs(rng, k=12)
    x[:, 5] = 0.0  # an input plane that is never on in calibration
    w = rng.normal(size=(6, 12)).astype(np.float32)
    nearest, scale = quantize_weights(w, 127)
    q = gptq_round(w, scale, x.T @ x / len(x), 127)
    np.testing.assert_array_equal(q[:, 5], nearest[:, 5])


def test_kosumi_quantize_keeps_the_rounding_whose_net_agrees_better(calib_positions, tmp_path):
    """GPTQ and round to nearest of the embedded ``default`` net (a trained net: its inputs
    are correlated as GPTQ expects), same calibration; the scheme says which one ``kosumi
    quantize`` kept, and that one agrees at least as well with the float net on positions of
    other games (KL of the policy, both sizes)."""
    from typer.testing import CliRunner

    from kosumi.cli import app
    from kosumi.models import DEFAULT_MODEL  # what `quantize default` quantizes: the set's base
    from kosumi.nets.checkpoint import read_checkpoint
    from kosumi.runtime import load_evaluator
    from kosumi.runtime.agreement import kl
    from kosumi.runtime.bench import bench_states

    nets = {}
    for rounding in ("gptq", "nearest"):
        out = tmp_path / f"{rounding}.safetensors"
        r = CliRunner().invoke(app, ["quantize", "default", "--calib", str(calib_positions),
                                     "--calib-size", "48", "--keep-float", "none", "--rounding",
                                     rounding, "--out", str(out)])
        assert r.exit_code == 0, r.output
        # ONNX Runtime runs the GPTQ integers like any others: each int8 convolution equal
        # to the integer reference or 1 LSB apart, checked by kosumi quantize on this CPU
        assert "convolution equal to the integer reference or 1 LSB apart" in " ".join(
            r.output.split())
        nets[rounding] = out
    info = read_checkpoint(nets["gptq"]).config.quantization["info"]["rounding"]
    assert info["asked"] == "gptq" and set(info["sqnr_db"]) == {"gptq", "nearest"}
    assert read_checkpoint(nets["nearest"]).config.quantization["info"]["rounding"][
        "chosen"] == "nearest"
    states = bench_states(9, 48, seed=77) + bench_states(19, 16, seed=78)
    ref = load_evaluator(DEFAULT_MODEL, backend="numpy", cache=False).evaluate(states)
    mean_kl = {}
    for rounding, path in nets.items():
        got = load_evaluator(path, backend="numpy", cache=False).evaluate(states)
        mean_kl[rounding] = float(np.mean([kl(a.policy, b.policy) for a, b in zip(ref, got,
                                                                                  strict=True)]))
    # kept: the rounding of the better output SQNR on the calibration positions (GPTQ for
    # default versions 1-4, round to nearest for version 5); either way, asking for GPTQ never
    # leaves a net that agrees worse with the float one on positions of other games
    assert info["chosen"] == max(info["sqnr_db"], key=info["sqnr_db"].get), info
    assert mean_kl["gptq"] <= mean_kl["nearest"] * 1.0001, (info, mean_kl)
