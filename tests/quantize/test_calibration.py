"""Calibration (kosumi.quantize.calibration): which positions, their statistics, and the
clipping range of an activation.

Oracles: spreads and size filters worked out by hand, statistics of small arrays computed with
plain numpy, clipping ranges of distributions whose answer is known (a range without outliers
is its maximum; one huge outlier is clipped by a percentile, not by minmax), and a brute-force
mse search over the same grid.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.quantize.calibration import (
    ValueStats,
    activation_range,
    check_sizes,
    read_calibration,
    read_calibration_for,
    spread,
)


def test_spread_keeps_the_ends_and_spaces_the_rest():
    items = list(range(10))
    assert spread(items, None) == items and spread(items, 10) == items
    assert spread(items, 4) == [0, 3, 6, 9]  # linspace(0, 9, 4) = 0, 3, 6, 9
    assert spread(items, 2) == [0, 9]
    odd = spread(list(range(101)), 50)
    assert len(odd) == 50 and odd[0] == 0 and odd[-1] == 100
    assert {x % 2 for x in odd} == {0, 1}  # both sides to move, never one fixed stride


def test_check_sizes():
    states = [GameState(9), GameState(19), GameState(13), GameState(9)]
    keep, left_out = check_sizes(states, [9, 19], "calib")
    assert [s.size for s in keep] == [9, 19, 9] and left_out == 1
    with pytest.raises(KosumiError, match="calib: calibration positions of 13x13"):
        check_sizes([GameState(13)], [9, 19], "calib")


def test_a_large_set_replays_only_the_positions_it_keeps(tmp_path, monkeypatch):
    """The oracle: every position replayed, those of the net's sizes kept, then spread (the
    old reading). The new one picks the same positions, moves for moves, and replays only
    those ``limit``: a 660k-position label folder no longer costs minutes."""
    from kosumi.distill.positions import Position, write_positions
    from kosumi.runtime.bench import bench_states

    states = bench_states(9, 40, seed=1) + bench_states(13, 7, seed=2) + bench_states(19, 9,
                                                                                   seed=3)
    write_positions(tmp_path / "pos", [Position.from_state(s, f"g:{i}")
                                       for i, s in enumerate(states)])
    whole = [s for s in read_calibration(tmp_path / "pos", None) if s.size in (9, 19)]
    want = spread(whole, 11)
    replayed = []
    real = Position.to_state
    monkeypatch.setattr(Position, "to_state",
                        lambda self: replayed.append(1) or real(self))  # type: ignore[func-returns-value]
    got, skipped = read_calibration_for(tmp_path / "pos", [9, 19], 11)
    assert skipped == 7 and len(replayed) == 11
    assert [(s.size, s.moves) for s in got] == [(s.size, s.moves) for s in want]
    with pytest.raises(KosumiError, match="which the net does not play"):
        read_calibration_for(tmp_path / "pos", [7], 11)


def test_value_stats_by_hand():
    st = ValueStats()
    rng = np.random.default_rng(0)
    a = np.array([[[1.0, -2.0], [3.0, 0.5]]], np.float32)  # [1, 2, 2]: channels last
    b = np.array([[[-4.0, 1.0]]], np.float32)
    st.add(a, rng)
    st.add(b, rng)
    assert (st.lo, st.hi, st.count) == (-4.0, 3.0, 6)
    assert st.chan_max.tolist() == [4.0, 2.0]
    np.testing.assert_allclose(st.chan_mean, [(1 + 3 - 4) / 3, (-2 + 0.5 + 1) / 3])
    assert sorted(st.magnitudes().tolist()) == [0.5, 1, 1, 2, 3, 4]
    assert not st.nonnegative


def stats_of(values: np.ndarray) -> ValueStats:
    st = ValueStats()
    st.add(values.reshape(-1, 1), np.random.default_rng(0))
    return st


def test_activation_ranges_of_known_distributions():
    rng = np.random.default_rng(3)
    flat = rng.uniform(0, 2.0, 20_000).astype(np.float32)
    spiky = np.concatenate([flat, [1000.0]]).astype(np.float32)
    assert activation_range("x", stats_of(flat), "minmax") == pytest.approx(flat.max())
    assert activation_range("x", stats_of(spiky), "minmax") == 1000.0
    assert activation_range("x", stats_of(spiky), "percentile") < 2.0 + 1e-3
    assert activation_range("x", stats_of(spiky), "percentile", 50.0) == pytest.approx(1.0,
                                                                                    abs=0.05)
    # mse never clips below a hundredth of the range, and keeps what minimises the error
    assert 10.0 <= activation_range("x", stats_of(spiky), "mse") <= 1000.0
    assert activation_range("planes", stats_of(spiky), "mse") == 1000.0  # inputs: minmax
    with pytest.raises(KosumiError, match="--method 'max'"):
        activation_range("x", stats_of(flat), "max")


def test_mse_clip_is_the_best_of_its_grid():
    rng = np.random.default_rng(5)
    m = np.abs(rng.standard_normal(5000)).astype(np.float32)
    c = activation_range("x", stats_of(m), "mse")

    def err(clip):
        s = clip / 255
        return float(np.mean((m - np.minimum(np.rint(m / s), 255) * s) ** 2))

    grid = np.linspace(m.max() / 100, m.max(), 100)
    assert err(c) <= min(err(g) for g in grid) + 1e-12
    assert err(c) < err(float(m.max()))  # better than no clipping


def test_read_calibration_from_a_jsonl_file(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"board_size": 9, "komi": 7, "moves": [["B", v]]}) + "\n"
                            for v in ("E5", "C3", "G7", "D4")))
    states = read_calibration(path, limit=3)
    assert [len(s.moves) for s in states] == [1, 1, 1]
    # linspace(0, 3, 3) = 0, 1.5, 3 rounds to 0, 2, 3: E5 (40), G7 (2 * 9 + 6), D4 (5 * 9 + 3)
    assert [s.board.index(1) for s in states] == [40, 24, 48]
    with pytest.raises(KosumiError, match="no such calibration set"):
        read_calibration(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(KosumiError, match="not a positions or label folder"):
        read_calibration(tmp_path / "empty")
