"""The time manager (kosumi.engine.timecontrol): move budgets computed by hand."""

from __future__ import annotations

import pytest

from kosumi.engine.timecontrol import TimeManager
from kosumi.go.coords import BLACK, WHITE


def test_time_manager_budgets_by_hand():
    tm = TimeManager(lag=0.5)
    assert tm.budget(BLACK, 0, 9) is None  # no clock, no default
    tm.set_settings(300, 0, 0)  # absolute: 300 s for the game
    # expected own moves on 9x9 after 0 moves: 0.7 * 81 / 2 = 28.35; 300 / 28.35 = 10.582
    assert tm.budget(BLACK, 0, 9) == pytest.approx(300 / 28.35 - 0.5)
    # late in the game the floor 0.15 * 81 / 2 = 6.075 moves applies
    assert tm.budget(BLACK, 80, 9) == pytest.approx(300 / 6.075 - 0.5)
    tm.set_settings(0, 30, 5)  # straight into Canadian byo-yomi: 30 s for 5 stones
    assert tm.budget(WHITE, 10, 19) == pytest.approx(6 - 0.5)
    tm.set_time_left(WHITE, 2, 4)  # 2 s for 4 stones: 0.5 s, margin 10% = 0.05
    assert tm.budget(WHITE, 10, 19) == pytest.approx(0.45)
    tm.set_time_left(WHITE, 0, 1)
    assert tm.budget(WHITE, 10, 19) == pytest.approx(0.05)  # never below min_time
    tm.set_settings(60, 10, 1)  # main time then 10 s per move: main share + one stone's share
    assert tm.budget(BLACK, 0, 9) == pytest.approx(60 / 28.35 + 10 - 0.5)
    tm.set_settings(0, 5, 0)  # byo_yomi_time > 0 with 0 stones: no time limit
    assert tm.budget(BLACK, 0, 9) is None
    capped = TimeManager(default_per_move=1.0)
    capped.set_settings(3000, 0, 0)
    assert capped.budget(BLACK, 0, 19) == 1.0
    # our own clock: 10 s of main time, 4 s spent -> 6 s left; then 8 s more -> byo-yomi
    tm.set_settings(10, 20, 2)
    tm.spend(BLACK, 4)
    assert tm.clocks[BLACK].main == pytest.approx(6)
    tm.spend(BLACK, 8)  # 2 s into the first period, which this move counts for
    assert (tm.clocks[BLACK].stones, tm.clocks[BLACK].period) == (1, pytest.approx(18))
    tm.spend(BLACK, 3)  # period complete: a fresh one
    assert (tm.clocks[BLACK].stones, tm.clocks[BLACK].period) == (2, pytest.approx(20))
