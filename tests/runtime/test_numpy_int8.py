"""The numpy int8 backend's arithmetic (kosumi.runtime.numpy_int8): exact integer products and
convolutions."""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.runtime.numpy_int8 import exact_chunk, int_conv_nhwc, int_matmul


def test_chunked_float32_products_are_exact():
    rng = np.random.default_rng(2)
    x = rng.integers(200, 256, size=(64, 1500)).astype(np.float32)  # sums past 2^24
    w = rng.integers(100, 128, size=(32, 1500)).astype(np.float32)
    want = x.astype(np.int64) @ w.astype(np.int64).T
    assert np.array_equal(int_matmul(x, w, 513), want)
    assert not np.array_equal((x @ w.T).astype(np.int64), want)  # one float32 product is not


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
