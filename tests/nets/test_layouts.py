"""Weight layouts (kosumi.nets.layouts): every layout undone exactly, for every dtype."""

from __future__ import annotations

import numpy as np

from kosumi.nets.layouts import apply_layout, similar_order, undo_layout


def test_layouts_round_trip_every_dtype():
    rng = np.random.default_rng(0)
    cases = [rng.integers(-127, 128, (8, 4, 3, 3)).astype(np.int8),
             rng.integers(-2**31, 2**31 - 1, 40, dtype=np.int64).astype(np.int32),
             rng.normal(size=(6, 5)).astype(np.float32),
             rng.normal(size=(4, 3, 3, 3)).astype(np.float16),
             np.array([3, 3, 7, 3, -1], np.int32)]
    for arr in cases:
        for steps in ([{"kind": "transpose", "axes": list(range(arr.ndim))[::-1]}],
                      [{"kind": "permute", "order": similar_order(arr)}],
                      [{"kind": "byteplanes"}], [{"kind": "delta"}] if arr.dtype.kind == "i"
                      else [], [{"kind": "permute", "order": similar_order(arr)},
                                {"kind": "byteplanes"}]):
            back = undo_layout(apply_layout(arr, steps), steps, arr.dtype, list(arr.shape))
            assert back.dtype == arr.dtype and np.array_equal(back, arr), steps
