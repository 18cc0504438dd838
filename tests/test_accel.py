"""kosumi.accel: the C extension (kosumi._speedups), which implementation is in use, and the
argument checks the Python versions share with it (the functions themselves are tested beside
their owners: tests/go/test_board_kernels.py, tests/go/test_benson.py,
tests/nets/test_basic_planes.py, tests/runtime/test_softmax.py).

KOSUMI_ALLOW_PURE_PYTHON=1 accepts a machine where the C extension could not be built;
KOSUMI_NO_SPEEDUPS=1 makes every owner use its Python version.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT

from kosumi import accel
from kosumi.go import board_kernels

try:
    from kosumi import _speedups
except ImportError:  # reported by test_c_extension_is_built
    _speedups = None


# ------------------------------------------------------------------------------------ build
def test_c_extension_is_built():
    """CI must notice a silently failed (optional) build. Set KOSUMI_ALLOW_PURE_PYTHON=1 on a
    machine without a compiler, where the fallbacks are expected."""
    if os.environ.get("KOSUMI_ALLOW_PURE_PYTHON") == "1":
        pytest.skip("KOSUMI_ALLOW_PURE_PYTHON=1: the pure-Python fallbacks are allowed")
    assert _speedups is not None, \
        "kosumi._speedups is not built (pip install -e . needs a C compiler)"
    if os.environ.get("KOSUMI_NO_SPEEDUPS", "").strip() not in ("", "0"):
        assert not accel.HAVE_C  # built, but deliberately not used
        return
    assert accel.HAVE_C and accel.IMPLEMENTATION == "c"
    assert board_kernels.legal_mask is _speedups.legal_mask


def test_env_forces_fallback():
    code = ("import kosumi.accel as a, kosumi.go.board_kernels as k; "
            "print(a.HAVE_C, a.IMPLEMENTATION, k.legal_mask is k.py_legal_mask)")
    env = dict(os.environ, KOSUMI_NO_SPEEDUPS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    assert out == ["False", "python", "True"]


def test_pick_takes_the_extension_function_or_the_fallback():
    def fallback(*args):
        return "python"

    chosen = accel.pick("legal_mask", fallback)
    assert chosen is (fallback if accel.C is None else accel.C.legal_mask)
    assert accel.pick("no_such_function", fallback) is fallback  # an older build lacks it


def test_argument_checks():
    assert accel.check_board(bytearray(b"\x00\x01\x02\x00"), 2) == (2, b"\x00\x01\x02\x00")
    for board, size in ((bytes(4), 1), (bytes(400), 20), (bytes(3), 2), (b"\x00\x03\x00\x00", 2)):
        with pytest.raises(ValueError):
            accel.check_board(board, size)
    with pytest.raises(TypeError):
        accel.check_board([0, 0, 0, 0], 2)
    out = np.zeros(4, np.uint8)
    assert accel.result_bytes(b"\x01\x02\x00\x01", out) is out and out.tolist() == [1, 2, 0, 1]
    assert accel.result_bytes(bytearray(b"\x01"), None) == b"\x01"
    with pytest.raises(ValueError):
        accel.result_bytes(b"\x01\x02", bytes(2))  # read-only
