"""Compressibility of a net's weights (kosumi.export.compressibility): the entropy floor by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.export.compressibility import compressibility, entropy_bytes


def test_entropy_floor_by_hand():
    arr = np.array([0, 0, 0, 1], np.int8)  # H = 0.811 bits per value
    assert entropy_bytes(arr) == pytest.approx(4 * 0.8112781244591328 / 8)
    rows = compressibility({"w": np.zeros((16, 16), np.int8)}, ("zstd-19", "xz-9"))
    assert rows[0].entropy == 0.0 and rows[0].best(("zstd-19",))[2] < 30
