"""Fixed-point arithmetic of the quantization scheme (kosumi.nets.quant) against exact
rationals; the scheme's JSON the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

from kosumi.nets.quant import (
    ActQuant,
    add_multipliers,
    integer_add,
    quantize_multiplier,
    requantize,
)


# ---------------------------------------------------------------------------- fixed point
def test_multipliers_and_requantisation_against_exact_rationals():
    rng = np.random.default_rng(0)
    m = np.exp(rng.uniform(np.log(1e-6), np.log(4.0), 200))
    m0, shift = quantize_multiplier(m)
    assert ((m0 >= 2**30) & (m0.astype(np.int64) < 2**31)).all()
    approx = m0.astype(np.float64) * 2.0 ** (-(31 + shift.astype(np.float64)))
    assert np.all(np.abs(approx / m - 1) < 2.0**-30)
    acc = rng.integers(-2**24, 2**24, size=(50, 200), dtype=np.int64)
    act = ActQuant(scale=1.0, dtype="uint8", zero_point=128)
    got = requantize(acc, m0, shift, act)
    for i in range(0, 50, 7):  # round half up of the exact product, then the zero point
        for j in range(0, 200, 13):
            exact = Fraction(int(acc[i, j])) * Fraction(int(m0[j]), 2 ** (31 + int(shift[j])))
            want = int((exact + Fraction(1, 2)).__floor__()) + 128
            assert got[i, j] == min(255, max(0, want))
    relu = requantize(acc, m0, shift, act, relu=True)
    assert relu.min() >= 128  # a fused ReLU clamps at the zero point


def test_integer_add_against_exact_rationals():
    rng = np.random.default_rng(1)
    a_act, b_act = ActQuant(0.02, "uint8"), ActQuant(0.013, "uint8", zero_point=128)
    out = ActQuant(0.031, "uint8")
    p = add_multipliers(a_act.scale / out.scale, b_act.scale / out.scale)
    a = rng.integers(0, 256, 500)
    b = rng.integers(0, 256, 500)
    got = integer_add(a, b, p, a_act, b_act, out, relu=True)
    for i in range(0, 500, 11):
        exact = (Fraction(int(a[i])) * p["ma"] + Fraction(int(b[i]) - 128) * p["mb"]) \
            / 2 ** p["shift"]
        want = max(0, min(255, int((exact + Fraction(1, 2)).__floor__())))
        assert got[i] == want
    # the rescales themselves are within 2^-30 of s_in / s_out
    assert abs(p["ma"] / 2 ** p["shift"] / (a_act.scale / out.scale) - 1) < 2**-28


# ---------------------------------------------------------------------------- the JSON
SCHEME_FROM_A_SET = """
import json
from kosumi.nets.quant import ActQuant, QuantScheme
names = {f"blocks.{i}.conv{j}:relu" for i in range(6) for j in (1, 2)}  # a set, as a plan's
scheme = QuantScheme(acts={n: ActQuant(0.5, "uint8") for n in names},
                     adds={f"blocks.{i}:add": {"ma": 1, "mb": 2, "shift": 3} for i in range(6)})
print(json.dumps(scheme.to_dict()))
"""


def test_a_scheme_built_from_sets_writes_the_same_json_whatever_the_hash_seed():
    # kosumi quantize builds the acts from the plan's set of values: with the hash seed, their
    # order changed from process to process, and so did the bytes of the same quantized net
    out = [subprocess.run([sys.executable, "-c", SCHEME_FROM_A_SET], check=True, text=True,
                          capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
           for seed in ("1", "2", "3")]
    assert out[0] == out[1] == out[2]
