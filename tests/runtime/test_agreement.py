"""How closely one net follows another (kosumi.runtime.agreement): ``kl``, ``agreement`` and
``evaluate_all``.

This file is the oracle for that module, so every expectation here is computed by hand on tiny
examples (the numbers are written out in the comments), never with the module's own maths.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kosumi.go.board import GameState
from kosumi.runtime.agreement import TIE, agreement, evaluate_all, kl
from kosumi.runtime.evaluator import Evaluation, Evaluator


def ev(policy, value=0.5) -> Evaluation:
    return Evaluation(policy=np.array(policy, dtype=np.float32), value=value)


def test_kl_by_hand():
    # KL((1/2, 1/2) || (4/5, 1/5)) = 1/2 ln(5/8) + 1/2 ln(5/2) = 1/2 ln(25/16) = ln(5/4)
    assert kl([0.5, 0.5], [0.8, 0.2]) == pytest.approx(math.log(1.25), rel=1e-12)
    # not symmetric: KL((4/5, 1/5) || (1/2, 1/2)) = 4/5 ln(8/5) + 1/5 ln(2/5)
    assert kl([0.8, 0.2], [0.5, 0.5]) == pytest.approx(
        0.8 * math.log(1.6) + 0.2 * math.log(0.4), rel=1e-12)
    assert kl([0.25] * 4, [0.25] * 4) == 0.0
    # a zero of p contributes nothing, wherever q puts its mass
    assert kl([1.0, 0.0], [0.5, 0.5]) == pytest.approx(math.log(2), rel=1e-12)
    # a zero of q under positive p counts as 1e-30: ln(1 / 1e-30) = 30 ln 10
    assert kl([1.0, 0.0], [0.0, 1.0]) == pytest.approx(30 * math.log(10), rel=1e-9)


def test_agreement_by_hand_per_board_size():
    # 19x19 positions 0 and 2, 9x9 positions 1 and 3 (largest size first in the result)
    ref = [ev([0.6, 0.3, 0.1], 0.70), ev([0.5, 0.5], 0.40),
           ev([0.2, 0.2, 0.6], 0.10), ev([0.9, 0.1], 0.55)]
    got = [ev([0.5, 0.4, 0.1], 0.60),   # same best move (0)
           ev([0.49, 0.51], 0.40),      # best 1: ref gives it 0.5 = 100% of its best -> a tie
           ev([0.5, 0.3, 0.2], 0.30),   # best 0: ref gives it 0.2 / 0.6 = 33% -> no tie
           ev([0.1, 0.9], 0.75)]        # best 1: ref gives it 0.1 / 0.9 = 11% -> no tie
    rows = agreement(ref, got, [19, 9, 19, 9])
    assert list(rows) == ["19x19", "9x9"]
    big, small = rows["19x19"], rows["9x9"]
    assert big["positions"] == small["positions"] == 2
    assert big["top1"] == 0.5 and big["top1_tie_aware"] == 0.5
    assert small["top1"] == 0.0 and small["top1_tie_aware"] == 0.5
    # |0.70 - 0.60| = 0.1 and |0.10 - 0.30| = 0.2 -> 0.15; |0| and |0.55 - 0.75| = 0.2 -> 0.1
    assert big["value_mae"] == pytest.approx(0.15, rel=1e-3)
    assert small["value_mae"] == pytest.approx(0.1, rel=1e-3)
    kl0 = 0.6 * math.log(0.6 / 0.5) + 0.3 * math.log(0.3 / 0.4)  # + 0.1 ln 1
    kl2 = 0.2 * math.log(0.2 / 0.5) + 0.2 * math.log(0.2 / 0.3) + 0.6 * math.log(0.6 / 0.2)
    assert big["policy_kl"] == pytest.approx((kl0 + kl2) / 2, rel=1e-2)  # 3 digits kept
    kl1 = 0.5 * math.log(0.5 / 0.49) + 0.5 * math.log(0.5 / 0.51)
    kl3 = 0.9 * math.log(0.9 / 0.1) + 0.1 * math.log(0.1 / 0.9)
    assert small["policy_kl"] == pytest.approx((kl1 + kl3) / 2, rel=1e-2)


def test_the_tie_threshold_is_95_percent():
    assert TIE == 0.95
    ref = [ev([0.40, 0.38, 0.22]), ev([0.40, 0.37, 0.23])]  # 0.38 / 0.4 = 95%, 0.37 / 0.4 < 95%
    got = [ev([0.1, 0.8, 0.1]), ev([0.1, 0.8, 0.1])]
    row = agreement(ref, got, [5, 5])["5x5"]
    assert row["top1"] == 0.0 and row["top1_tie_aware"] == 0.5


class Counting(Evaluator):
    """Policy with all mass on the number of stones on the board (a fixed, known answer)."""

    name = "counting"

    def __init__(self):
        self.batches: list[int] = []

    def evaluate(self, states):
        self.batches.append(len(states))
        out = []
        for s in states:
            pol = np.zeros(s.num_points + 1, np.float32)
            pol[sum(1 for c in s.board if c)] = 1.0
            out.append(Evaluation(policy=pol, value=0.5))
        return out


def test_evaluate_all_keeps_order_in_batches():
    states = []
    for k in range(7):
        s = GameState(5)
        for p in range(k):
            s.play(p * 3 % 25)
        states.append(s)
    counting = Counting()
    out = evaluate_all(counting, states, batch=3)
    assert counting.batches == [3, 3, 1]
    assert [int(np.argmax(e.policy)) for e in out] == list(range(7))
    assert evaluate_all(counting, [], batch=3) == []
