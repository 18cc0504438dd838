"""The numpy int8 backend's arithmetic (kosumi.runtime.numpy_int8): exact integer products and
convolutions."""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.runtime.numpy_int8 import exact_chunk, exact_terms, int_conv_nhwc, int_matmul


def test_chunked_float32_products_are_exact():
    rng = np.random.default_rng(2)
    x = rng.integers(200, 256, size=(64, 1500)).astype(np.float32)  # sums past 2^24
    w = rng.integers(100, 128, size=(32, 1500)).astype(np.float32)
    want = x.astype(np.int64) @ w.astype(np.int64).T
    assert np.array_equal(int_matmul(x, w, 513), want)
    assert not np.array_equal((x @ w.T).astype(np.int64), want)  # one float32 product is not


def test_a_layer_whose_l1_norms_allow_it_is_one_exact_product():
    """Signed weights as a trained 3x3 over 64 channels has them (L1 norms near 20,000, K = 576
    past the worst case's 518): exact_terms allows all 576 in one float32 product, and that
    product equals the int64 one on saturated uint8 inputs. Weights near +127 everywhere (L1
    norm 70,000) fall back to the worst case, where one product would not be exact."""
    rng = np.random.default_rng(5)
    x = rng.integers(240, 256, size=(300, 576)).astype(np.float32)
    trained = np.clip(np.round(rng.normal(0.0, 45.0, size=(64, 576))), -127, 127)
    assert 255 * np.abs(trained).sum(axis=1).max() < 2**24 < 576 * 255 * 127
    assert exact_terms(trained, 255, 127) == 576
    want = x.astype(np.int64) @ trained.astype(np.int64).T
    assert np.array_equal(int_matmul(x, trained.astype(np.float32), 576), want)
    extreme = rng.integers(120, 128, size=(64, 576)).astype(np.float32)
    assert exact_terms(extreme, 255, 127) == exact_chunk(255, 127) == 518
    want = x.astype(np.int64) @ extreme.astype(np.int64).T
    assert np.array_equal(int_matmul(x, extreme, 518), want)
    assert not np.array_equal((x @ extreme.T).astype(np.int64), want)


def conv_by_hand(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The oracle: x [B, N, N, C] int64, w [O, C, k, k] int64, zero padding k//2, one output
    point at a time."""
    b, n = x.shape[:2]
    o, _, k, _ = w.shape
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    out = np.zeros((b, n, n, o), dtype=np.int64)
    for i in range(n):
        for j in range(n):
            patch = xp[:, i:i + k, j:j + k, :]  # [B, k, k, C]
            out[:, i, j, :] = np.einsum("byxc,ocyx->bo", patch, w)
    return out


@pytest.mark.parametrize(("weight_max", "channels", "k"), [(127, 64, 3), (63, 64, 3),
                                                            (127, 400, 3), (127, 16, 5)])
def test_integer_convolution_is_exact_at_the_extremes(weight_max, channels, k):
    """uint8 activations near 255 and weights near the range's ends, so that one float32
    product over all taps would not be exact: the grouped products still are."""
    rng = np.random.default_rng(weight_max + channels)
    x = rng.integers(240, 256, size=(2, 7, 7, channels))
    w = rng.integers(weight_max - 10, weight_max + 1, size=(8, channels, k, k)) * \
        rng.choice([-1, 1], size=(8, 1, 1, 1))
    taps = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k * k, channels, 8),
                                dtype=np.float32)
    chunk = exact_chunk(255, weight_max)
    assert channels <= chunk  # wider inputs go to int_matmul's chunks
    got = int_conv_nhwc(x.astype(np.float32), taps, k, chunk)
    assert got.dtype == np.int32
    assert np.array_equal(got, conv_by_hand(x, w))
