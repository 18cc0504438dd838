"""The numpy int8 backend's arithmetic (kosumi.runtime.numpy_int8): exact integer products."""

from __future__ import annotations

import numpy as np

from kosumi.runtime.numpy_int8 import int_matmul


def test_chunked_float32_products_are_exact():
    rng = np.random.default_rng(2)
    x = rng.integers(200, 256, size=(64, 1500)).astype(np.float32)  # sums past 2^24
    w = rng.integers(100, 128, size=(32, 1500)).astype(np.float32)
    want = x.astype(np.int64) @ w.astype(np.int64).T
    assert np.array_equal(int_matmul(x, w, 513), want)
    assert not np.array_equal((x @ w.T).astype(np.int64), want)  # one float32 product is not
