"""Elo and SPRT against hand-computed values (logistic model, normal approximation)."""

from __future__ import annotations

import json
import math

import pytest

from kosumi.engine.elo import (
    CONTINUE,
    H0,
    H1,
    SPRT_MIN_GAMES,
    elo_estimate,
    elo_from_score,
    expected_score,
    parse_sprt,
    sprt,
    sprt_bounds,
    sprt_llr,
)


def test_elo_from_score_hand_values():
    # 75%: -400 * log10(1/0.75 - 1) = 400 * log10(3) = 190.849
    assert elo_from_score(0.75) == pytest.approx(190.8485, abs=1e-3)
    assert elo_from_score(0.25) == pytest.approx(-190.8485, abs=1e-3)
    assert elo_from_score(0.5) == 0.0
    # 10/11 score: 400 * log10(10) = 400
    assert elo_from_score(10 / 11) == pytest.approx(400.0, abs=1e-9)
    assert expected_score(400.0) == pytest.approx(10 / 11)
    assert expected_score(0.0) == 0.5


def test_extremes_are_clamped_not_infinite():
    assert elo_from_score(1.0) == pytest.approx(1199.83, abs=0.1)  # 400 * log10(999)
    assert elo_from_score(0.0) == pytest.approx(-1199.83, abs=0.1)


def test_interval_75_percent():
    # s = 0.75, per-game variance 0.75 * 0.25 = 0.1875, se = sqrt(0.1875 / 100) = 0.0433;
    # 0.75 -/+ 1.96 * 0.0433 = 0.6651 / 0.8349 -> 119.21 / 281.52 Elo
    e = elo_estimate(75, 0, 25)
    assert e.score == 0.75 and e.games == 100
    assert e.elo == pytest.approx(190.85, abs=0.01)
    assert e.low == pytest.approx(119.21, abs=0.01)
    assert e.high == pytest.approx(281.52, abs=0.01)
    assert not e.capped


def test_draws_shrink_the_interval():
    # 30 wins, 40 draws, 30 losses: variance (30 * 0.25 + 30 * 0.25) / 100 = 0.15 (not 0.25)
    e = elo_estimate(30, 40, 30)
    assert e.elo == 0.0
    assert e.high == pytest.approx(53.16, abs=0.01)
    assert e.low == pytest.approx(-53.16, abs=0.01)


def test_perfect_score_is_capped_with_a_finite_interval():
    # 10/10: variance from s moved half a game: 0.95 * 0.05; se = sqrt(0.0475 / 10) = 0.0689;
    # lower bound 1 - 1.96 * 0.0689 = 0.8649 -> 322.55 Elo
    e = elo_estimate(10, 0, 0)
    assert e.capped
    assert e.elo == pytest.approx(1199.83, abs=0.1)
    assert e.low == pytest.approx(322.55, abs=0.01)
    assert math.isfinite(e.high)
    z = elo_estimate(0, 0, 10)
    assert z.elo == pytest.approx(-1199.83, abs=0.1) and z.high == pytest.approx(-322.55, abs=0.01)
    json.dumps(e.to_dict(), allow_nan=False)
    json.dumps(elo_estimate(0, 0, 0).to_dict(), allow_nan=False)


def test_sprt_bounds():
    lower, upper = sprt_bounds(0.05, 0.05)
    assert lower == pytest.approx(-2.944, abs=1e-3)  # log(0.05 / 0.95)
    assert upper == pytest.approx(2.944, abs=1e-3)  # log(0.95 / 0.05)


def test_sprt_llr_hand_value():
    # 60-0-40, H0 elo 0 (s0 = 0.5), H1 elo 50 (s1 = 0.571463), variance 0.24:
    # LLR = 100 * (s1 - s0) * (2 * 0.6 - s0 - s1) / (2 * 0.24) = 1.9137
    assert sprt_llr(60, 0, 40, 0.0, 50.0) == pytest.approx(1.9137, abs=1e-4)
    assert sprt(60, 0, 40, 0.0, 50.0).verdict == CONTINUE


def test_sprt_verdicts():
    assert sprt(80, 0, 20, 0.0, 50.0).verdict == H1
    assert sprt(40, 0, 60, 0.0, 50.0).verdict == H0
    assert sprt(1, 0, 1, 0.0, 50.0).verdict == CONTINUE
    # all wins: variance from 3.5/4 -> 0.109375; LLR(4 games, [0, 200]) = 3.516 >= 2.944, but
    # no verdict before SPRT_MIN_GAMES: six wins and a draw once stopped a [0, 25] match
    assert sprt_llr(4, 0, 0, 0.0, 200.0) == pytest.approx(3.516, abs=1e-3)
    assert sprt(4, 0, 0, 0.0, 200.0).verdict == CONTINUE
    assert sprt_llr(6, 1, 0, 0.0, 25.0) > 2.944 and sprt(6, 1, 0, 0.0, 25.0).verdict == CONTINUE
    assert sprt(SPRT_MIN_GAMES, 0, 0, 0.0, 200.0).verdict == H1
    assert sprt(SPRT_MIN_GAMES - 1, 0, 0, 0.0, 200.0).verdict == CONTINUE
    with pytest.raises(ValueError):
        sprt(1, 0, 0, 50.0, 0.0)


def test_parse_sprt():
    assert parse_sprt("0,50") == (0.0, 50.0)
    assert parse_sprt(" -10 , 5.5 ") == (-10.0, 5.5)
    for bad in ("50", "a,b", "50,0", "1,2,3"):
        with pytest.raises(ValueError):
            parse_sprt(bad)
