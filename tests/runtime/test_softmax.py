"""kosumi.runtime.softmax: the policy's softmax over legal moves, in C (the extension) and
numpy.

Oracles: rows computed by hand (including huge logit gaps), and the two versions against each
other on random rows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kosumi.runtime.softmax import legal_softmax, py_masked_softmax

try:
    from kosumi import _speedups
except ImportError:  # reported by tests/test_accel.py
    _speedups = None


@pytest.mark.parametrize("fn", [
    pytest.param(_speedups and _speedups.masked_softmax, id="c",
                 marks=pytest.mark.skipif(_speedups is None, reason="kosumi._speedups not built")),
    pytest.param(py_masked_softmax, id="python"),
])
def test_masked_softmax_hand_checked_and_bad_arguments(fn):
    logits = np.array([[0.0, math.log(3.0), 50.0, 0.0],  # the 50 is illegal: ignored
                       [-1000.0, -1000.0, -999.0, 2.0]], np.float32)  # huge gaps: no overflow
    legal = np.array([[1, 1, 0, 0], [1, 0, 1, 0]], np.bool_)
    out = np.full_like(logits, 7.0)
    assert fn(logits, legal, 4, out) is out
    np.testing.assert_allclose(out[0], [0.25, 0.75, 0.0, 0.0], rtol=1e-6)
    e = 1 / (1 + math.e)
    np.testing.assert_allclose(out[1], [e, 0.0, 1 - e, 0.0], rtol=1e-6)
    assert out[0, 2] == 0.0 and out[1, 3] == 0.0  # exactly
    inplace = logits.copy()
    fn(inplace, legal, 4, inplace)  # out may be the logits
    np.testing.assert_array_equal(inplace, out)
    with pytest.raises(ValueError, match="row 1 has no legal entry"):
        fn(logits, np.array([[1, 0, 0, 0], [0, 0, 0, 0]], np.bool_), 4, out)
    with pytest.raises(ValueError):
        fn(logits, legal, 3, out)  # 8 is not a whole number of rows of 3
    with pytest.raises(ValueError):
        fn(logits, legal[:1], 4, out)  # mask too short
    with pytest.raises(ValueError):
        fn(logits.astype(np.float64), legal, 4, out)
    with pytest.raises(ValueError):
        fn(logits, legal, 4, np.empty(7, np.float32))
    with pytest.raises(ValueError):
        fn(logits, legal, 0, out)


@pytest.mark.skipif(_speedups is None, reason="kosumi._speedups not built")
def test_masked_softmax_c_equals_fallback():
    rng = np.random.default_rng(3)
    for rows, k in ((1, 5), (16, 82), (3, 362)):
        logits = (rng.standard_normal((rows, k)) * 8).astype(np.float32)
        legal = rng.random((rows, k)) < 0.7
        legal[:, -1] = True
        a = _speedups.masked_softmax(logits, legal, k, np.empty_like(logits))
        b = py_masked_softmax(logits, legal, k, np.empty_like(logits))
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-12)
        np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-6)
        assert not a[~legal].any()


def test_legal_softmax_broadcasts_the_mask():
    logits = np.array([[0.0, math.log(3.0), 5.0], [1.0, 1.0, 1.0]], np.float32)
    out = legal_softmax(logits, np.array([True, True, False]))
    np.testing.assert_allclose(out, [[0.25, 0.75, 0.0], [0.5, 0.5, 0.0]], rtol=1e-6)
