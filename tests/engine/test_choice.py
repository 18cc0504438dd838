"""The move choice (kosumi.engine.choice): KataGo's play-selection weights and the LCB.

Oracles: hand-made root records whose answer is known (a surer move with fewer visits, a
child below the visit floor, no child searched), and a temperature computed by hand.
"""

from __future__ import annotations

from array import array

import numpy as np
from helpers import agg_of, records

from kosumi.engine import choice
from kosumi.engine.mcts import SearchConfig


def test_lcb_chooses_a_surer_move_over_the_most_visited():
    """Child 0: 100 visits, utility 0.10 with a wide spread; child 1: 60 visits, utility 0.30
    with a narrow one. Both pass the 15% visit floor: the lower bound picks child 1."""
    st = records([{"n": 100, "u": 0.10, "u2": 0.10 ** 2 + 0.25},
                  {"n": 60, "u": 0.30, "u2": 0.30 ** 2 + 0.001}])
    pri = array("d", [0.6, 0.4])
    agg = agg_of(161, 0.17, 0.2)
    cfg = SearchConfig()
    sel = choice.play_selection(st, pri, agg, cfg.params(), 1.0, 5.0, 0.15, cfg.utility_radius)
    assert int(np.argmax(sel.weights)) == 1
    assert sel.lcb[1] > sel.lcb[0]
    off = choice.play_selection(st, pri, agg, cfg.params(), 1.0, 0.0, 0.15, cfg.utility_radius)
    assert int(np.argmax(off.weights)) == 0  # without the bound: the most visited


def test_lcb_ignores_a_child_below_the_visit_floor():
    st = records([{"n": 100, "u": 0.10, "u2": 0.01 + 0.25}, {"n": 10, "u": 0.9, "u2": 0.81}])
    pri = array("d", [0.6, 0.4])
    cfg = SearchConfig()
    sel = choice.play_selection(st, pri, agg_of(111, 0.2, 0.2), cfg.params(), 1.0, 5.0, 0.15,
                                cfg.utility_radius)
    assert int(np.argmax(sel.weights)) == 0


def test_a_line_goes_on_by_the_lower_bound_not_by_visits():
    """The principal variation below the root (KataGo's appendPV): the surer child of the first
    test wins over the most visited one; the one under the floor does not; without the bound
    the most weighted, the first of equals; nothing searched: no child."""
    cfg = SearchConfig()
    sure = records([{"n": 100, "u": 0.10, "u2": 0.10 ** 2 + 0.25},
                    {"n": 60, "u": 0.30, "u2": 0.30 ** 2 + 0.001}])
    pri = array("d", [0.6, 0.4])
    assert choice.line_child(sure, pri, 1.0, 5.0, 0.15, cfg.utility_radius) == 1
    assert choice.line_child(sure, pri, 1.0, 0.0, 0.15, cfg.utility_radius) == 0
    floor = records([{"n": 100, "u": 0.10, "u2": 0.01 + 0.25}, {"n": 10, "u": 0.9, "u2": 0.81}])
    assert choice.line_child(floor, pri, 1.0, 5.0, 0.15, cfg.utility_radius) == 0
    ties = records([{"n": 5, "u": 0.2}, {"n": 5, "u": 0.2}])
    assert choice.line_child(ties, pri, 1.0, 0.0, 0.15, cfg.utility_radius) == 0
    assert choice.line_child(records([{}, {}]), pri, 1.0, 5.0, 0.15, cfg.utility_radius) is None


def test_one_visit_plays_the_raw_policy():
    st = records([{}, {}, {}])
    pri = array("d", [0.2, 0.7, 0.1])
    cfg = SearchConfig()
    sel = choice.play_selection(st, pri, agg_of(1, 0.0), cfg.params(), 1.0, 5.0, 0.15,
                                cfg.utility_radius)
    assert int(np.argmax(sel.weights)) == 1


def test_retrospective_pruning_takes_back_exploration_visits():
    """Child 1 got 30 visits at a utility far below child 0's: PUCT with hindsight would have
    given it fewer, so its weight drops below its visits; child 0 keeps its own."""
    st = records([{"n": 100, "u": 0.3, "u2": 0.09 + 0.01}, {"n": 30, "u": -0.3, "u2": 0.1}])
    pri = array("d", [0.5, 0.5])
    cfg = SearchConfig()
    sel = choice.play_selection(st, pri, agg_of(131, 0.16, 0.1), cfg.params(), 1.0, 5.0, 0.15,
                                cfg.utility_radius)
    assert sel.weights[0] >= 100 and sel.weights[1] < 30


def test_tempered_weights():
    probs = choice.tempered(np.array([4.0, 2.0, 0.0]), 0.5)
    np.testing.assert_allclose(probs, [0.8, 0.2, 0.0])
