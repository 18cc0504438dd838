"""The search's per-node rules (kosumi.engine.puct): selection, node values, score utility.

Oracles: hand-computed values of the formulas on small nodes, properties (a worse child loses
weight, a bucket's correction reaches its other nodes), numerical integration for the score
utility, and the Python versions against the C ones bit for bit on random nodes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from array import array

import numpy as np
import pytest
from helpers import agg_of, own, records

from kosumi.engine import puct
from kosumi.engine.mcts import SearchConfig
from kosumi.engine.puct import (
    F_N,
    F_U,
    F_U2,
    F_VL,
    F_W,
    F_W2,
    NF,
    NOWN,
    O_BIAS_DELTA,
    O_BIAS_WEIGHT,
    O_U,
    O_W,
)

try:
    from kosumi.engine import _puct
except ImportError:
    _puct = None

IMPLS = [
    pytest.param((puct.py_select_child, puct.py_update_node), id="python"),
    pytest.param(None if _puct is None else (_puct.select_child, _puct.update_node), id="c",
                 marks=pytest.mark.skipif(_puct is None, reason="kosumi.engine._puct not built")),
]


def params(**settings) -> array:
    return SearchConfig(**settings).params()


# ----------------------------------------------------------------------------- select_child
@pytest.mark.parametrize("impl", IMPLS)
def test_a_fresh_node_tries_its_highest_prior_first(impl):
    select, _ = impl
    st = records([{}, {}, {}])
    pri = array("d", [0.2, 0.5, 0.3])
    assert select(st, pri, agg_of(1, 0.1), params(), 0.1, 1.0, 0.0) == 1
    # children sorted by prior, none with a record yet: the first, the best new child
    assert select(array("d"), array("d", [0.5, 0.3, 0.2]), agg_of(1, 0.1), params(), 0.1, 1.0,
                  0.0) == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_the_best_new_child_competes_with_the_reached_ones(impl):
    """Records for the first two children only: the third (the best of those not reached)
    is chosen once the reached ones look bad enough, never the fourth."""
    select, _ = impl
    p = params(c_puct=0.05, c_puct_log=0.0, stdev_scale=0.0, fpu_parent_pow=-1.0)
    pri = array("d", [0.4, 0.3, 0.2, 0.1])
    good = records([{"n": 50, "u": 0.5}, {"n": 50, "u": 0.5}])
    assert select(good, pri, agg_of(101, 0.5), p, 0.5, 1.0, 0.0) == 0
    bad = records([{"n": 50, "u": -0.9}, {"n": 50, "u": -0.9}])
    assert select(bad, pri, agg_of(101, 0.5), p, 0.5, 1.0, 0.0) == 2


@pytest.mark.parametrize("impl", IMPLS)
def test_selection_formula_by_hand(impl):
    """Two visited children and one unvisited, no stdev scaling, no fpu blending: the
    selection values are c * sqrt(tw + 0.01) * p / (1 + w) + sign * u, fpu = parent - red."""
    select, _ = impl
    p = params(c_puct=1.0, c_puct_log=0.0, stdev_scale=0.0, fpu_parent_pow=-1.0,
               fpu_reduction=0.2)
    pri = array("d", [0.5, 0.3, 0.2])
    st = records([{"n": 10, "u": 0.10}, {"n": 2, "u": 0.30}, {}])
    parent = agg_of(13, 0.12)
    tw = 12.0
    scale = math.sqrt(tw + 0.01)
    fpu = 0.12 - 0.2 * math.sqrt(0.8)
    values = [scale * 0.5 / 11 + 0.10, scale * 0.3 / 3 + 0.30, scale * 0.2 + fpu]
    assert select(st, pri, parent, p, 0.0, 1.0, 0.0) == int(np.argmax(values))
    # Black to move: the same children seen with the sign flipped
    fpu_b = -(0.12 + 0.2 * math.sqrt(0.8))
    values_b = [scale * 0.5 / 11 - 0.10, scale * 0.3 / 3 - 0.30, scale * 0.2 + fpu_b]
    assert select(st, pri, parent, p, 0.0, -1.0, 0.0) == int(np.argmax(values_b))


@pytest.mark.parametrize("impl", IMPLS)
def test_black_prefers_low_white_utility_and_virtual_loss_turns_it_away(impl):
    select, _ = impl
    p = params(c_puct=0.01, c_puct_log=0.0)
    pri = array("d", [0.5, 0.5])
    st = records([{"n": 20, "u": 0.4}, {"n": 20, "u": -0.4}])
    parent = agg_of(41, 0.0, 0.16)
    assert select(st, pri, parent, p, 0.0, 1.0, 0.0) == 0  # White: +0.4
    assert select(st, pri, parent, p, 0.0, -1.0, 0.0) == 1  # Black: -0.4 is good for Black
    st[1 * NF + F_VL] = 40.0  # many playouts in flight down child 1 count as losses
    assert select(st, pri, parent, p, 0.0, -1.0, 0.0) == 0


# ----------------------------------------------------------------------------- update_node
@pytest.mark.parametrize("impl", IMPLS)
def test_a_leaf_record_is_its_own_evaluation(impl):
    _, update = impl
    agg = puct.new_record()
    update(records([{}, {}]), array("d", [0.6, 0.4]), own(0.25), params(), 1.0, agg, None, 0,
           0.0, None)
    assert agg[F_N] == 1.0 and agg[F_W] == 1.0 and agg[F_U] == 0.25 and agg[F_W2] == 1.0


@pytest.mark.parametrize("impl", IMPLS)
def test_plain_average_and_copy_into_the_parent(impl):
    _, update = impl
    p = params(value_weight_exponent=0.0, noise_pruning=False)
    st = records([{"n": 3, "u": 0.5}, {"n": 1, "u": -0.5}])
    agg = puct.new_record()
    parent = records([{}, {"vl": 2.0}, {}])
    update(st, array("d", [0.7, 0.3]), own(0.1), p, 1.0, agg, parent, 1, 1.0, None)
    expected = (3 * 0.5 + 1 * -0.5 + 0.1) / 5
    assert agg[F_N] == 5.0 and agg[F_W] == 5.0
    assert agg[F_U] == pytest.approx(expected)
    row = parent[NF: 2 * NF]
    assert row[F_U] == agg[F_U] and row[F_N] == 5.0 and row[F_VL] == 1.0  # one VL released
    assert parent[0] == 0.0 and parent[2 * NF] == 0.0  # other slots untouched


@pytest.mark.parametrize("impl", IMPLS)
def test_value_weighting_moves_the_value_towards_the_best_child(impl):
    """White to move, two children with many visits: the worse one loses weight, so the
    node's value is above the plain average (and Black's view mirrors it)."""
    _, update = impl
    st = records([{"n": 50, "u": 0.3, "u2": 0.3 ** 2 + 0.01},
                  {"n": 50, "u": -0.2, "u2": 0.04 + 0.01}])
    pri = array("d", [0.5, 0.5])
    plain, weighted = puct.new_record(), puct.new_record()
    update(st, pri, own(0.05), params(value_weight_exponent=0.0, noise_pruning=False), 1.0,
           plain, None, 0, 0.0, None)
    update(st, pri, own(0.05), params(noise_pruning=False), 1.0, weighted, None, 0, 0.0, None)
    assert weighted[F_U] > plain[F_U] + 0.02
    assert weighted[F_W] == pytest.approx(plain[F_W])  # weights rescaled to the same total
    black = puct.new_record()
    update(st, pri, own(0.05), params(noise_pruning=False), -1.0, black, None, 0, 0.0, None)
    assert black[F_U] < plain[F_U] - 0.02  # Black's best child is the -0.2 one


@pytest.mark.parametrize("impl", IMPLS)
def test_noise_pruning_takes_weight_from_an_overvisited_bad_child(impl):
    """Child 1 has a tiny prior, far more than twice its policy share of visits, and a value
    below child 0's: its weight shrinks (by 1 - exp(-gap / 0.15) of the excess)."""
    _, update = impl
    st = records([{"n": 40, "u": 0.4}, {"n": 40, "u": 0.1}])
    pri = array("d", [0.9, 0.1])
    agg = puct.new_record()
    update(st, pri, own(0.0), params(value_weight_exponent=0.0), 1.0, agg, None, 0, 0.0, None)
    lenient = 2.0 * 40 * 0.1 / 0.9
    kept = 40 - (40 - lenient) * (1 - math.exp(-0.3 / 0.15))
    assert agg[F_W] == pytest.approx(40 + kept + 1)
    assert agg[F_U] == pytest.approx((40 * 0.4 + kept * 0.1) / (40 + kept + 1))
    assert agg[F_N] == 81.0  # visits stay visits


@pytest.mark.parametrize("impl", IMPLS)
def test_subtree_value_bias_shares_a_correction_through_its_bucket(impl):
    """Node A's children average 0.5 above its own evaluation (0.0): A's share of the bucket is
    0.5 * W**0.85; a fresh leaf B in the same bucket then has its own utility corrected by
    0.45 * 0.5 (A's own is corrected too, by its own share). A second update of A replaces its
    share instead of adding to it."""
    _, update = impl
    p = params(value_weight_exponent=0.0, noise_pruning=False)
    bucket = array("d", [0.0, 0.0])
    st = records([{"n": 8, "u": 0.5}])
    a_own, a_agg = own(0.0), puct.new_record()
    update(st, array("d", [1.0]), a_own, p, 1.0, a_agg, None, 0, 0.0, bucket)
    bw = 8.0 ** 0.85
    assert bucket[0] == pytest.approx(0.5 * bw) and bucket[1] == pytest.approx(bw)
    assert a_own[O_BIAS_DELTA] == pytest.approx(0.5 * bw) and a_own[O_BIAS_WEIGHT] == bw
    assert a_agg[F_U] == pytest.approx((8 * 0.5 + 0.45 * 0.5) / 9)
    update(st, array("d", [1.0]), a_own, p, 1.0, a_agg, None, 0, 0.0, bucket)
    assert bucket[1] == pytest.approx(bw)  # replaced, not added
    b_agg = puct.new_record()
    update(records([{}]), array("d", [1.0]), own(0.1), p, 1.0, b_agg, None, 0, 0.0, bucket)
    assert b_agg[F_U] == pytest.approx(0.1 + 0.45 * 0.5)
    none_agg = puct.new_record()
    update(records([{}]), array("d", [1.0]), own(0.1), params(subtree_bias_factor=0.0), 1.0,
           none_agg, None, 0, 0.0, bucket)
    assert none_agg[F_U] == 0.1


@pytest.mark.parametrize("seed", range(3))
def test_c_and_python_give_the_same_bits(seed):
    if _puct is None:
        pytest.skip("kosumi.engine._puct not built")
    rng = np.random.default_rng(seed)
    for _ in range(400):
        k = int(rng.integers(1, 120))
        st = puct.new_records(k)
        rec = np.frombuffer(st).reshape(k, NF)
        visited = rng.random(k) < rng.random()
        rec[:, F_N] = np.where(visited, rng.integers(1, 300, k), 0)
        rec[:, F_VL] = np.where(rng.random(k) < 0.1, rng.integers(1, 4, k), 0)
        rec[:, F_W] = rec[:, F_N] * rng.uniform(0.5, 1.0, k)
        rec[:, F_W2] = rec[:, F_N]
        rec[:, F_U] = rng.uniform(-1.2, 1.2, k)
        rec[:, F_U2] = rec[:, F_U] ** 2 + rng.uniform(0, 0.2, k)
        rec[:, 6:] = rng.normal(0, 3, (k, NF - 6))
        pri = rng.random(k) ** 3
        pri = array("d", (pri / pri.sum()).tobytes())
        cfg = SearchConfig(c_puct=float(rng.uniform(0.5, 2)),
                           value_weight_exponent=float(rng.choice([0.0, 0.25, 0.5])),
                           noise_pruning=bool(rng.random() < 0.7),
                           fpu_parent_pow=float(rng.choice([-1.0, 1.0, 2.0])))
        p = cfg.params()
        o = array("d", rng.normal(0, 0.5, NOWN).tobytes())
        o[O_W] = 1.0
        a = agg_of(float(rec[:, F_N].sum() + 1), float(rng.uniform(-1, 1)),
                   float(rng.uniform(0, 1)))
        sign = float(rng.choice([-1.0, 1.0]))
        root = float(rng.random() < 0.5)
        assert _puct.select_child(st, pri, a, p, o[O_U], sign, root) == \
            puct.py_select_child(st, pri, a, p, o[O_U], sign, root)
        out_c, out_py = puct.new_record(), puct.new_record()
        par_c, par_py = puct.new_records(3), puct.new_records(3)
        o_c, o_py = array("d", o), array("d", o)
        b_c = array("d", [float(rng.normal()), float(rng.uniform(0, 30))])
        b_py = array("d", b_c)
        _puct.update_node(st, pri, o_c, p, sign, out_c, par_c, 2, 1.0, b_c)
        puct.py_update_node(st, pri, o_py, p, sign, out_py, par_py, 2, 1.0, b_py)
        assert out_c.tobytes() == out_py.tobytes()
        assert par_c.tobytes() == par_py.tobytes()
        assert o_c.tobytes() == o_py.tobytes() and b_c.tobytes() == b_py.tobytes()


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_arguments_are_value_errors(impl):
    select, update = impl
    p = params()
    with pytest.raises(ValueError, match="at least one child"):
        select(puct.new_records(0), array("d"), puct.new_record(), p, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="fields for each of the first children"):
        select(puct.new_records(4), array("d", [0.5, 0.3, 0.2]), puct.new_record(), p, 0.0,
               1.0, 0.0)  # more records than children
    with pytest.raises(ValueError, match="fields for each of the first children"):
        select(array("d", [0.0] * (puct.NF + 1)), array("d", [0.5, 0.5]), puct.new_record(), p,
               0.0, 1.0, 0.0)  # not whole records
    with pytest.raises(ValueError, match="params"):
        select(puct.new_records(1), array("d", [1.0]), puct.new_record(), array("d", [1.0]),
               0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="float64"):
        select(np.zeros(NF, np.float32), array("d", [1.0]), puct.new_record(), p, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="slot"):
        update(puct.new_records(1), array("d", [1.0]), own(0.0), p, 1.0, puct.new_record(),
               puct.new_records(2), 2, 1.0, None)


# ----------------------------------------------------------------------------- score utility
def test_score_value_matches_numerical_integration():
    x = np.linspace(-400, 400, 400_001)
    for mean, stdev, center, scale in [(3.0, 0.0, 0.0, 18.0), (-5.0, 8.0, 1.0, 6.75),
                                       (40.0, 20.0, 35.0, 6.75), (0.5, 2.0, 0.0, 38.0)]:
        if stdev == 0:
            exact = 2 / math.pi * math.atan((mean - center) / scale)
        else:
            pdf = np.exp(-0.5 * ((x - mean) / stdev) ** 2)
            exact = float((2 / math.pi * np.arctan((x - center) / scale) * pdf).sum() / pdf.sum())
        assert puct.score_value(mean, stdev, center, scale) == pytest.approx(exact, abs=1e-6)
        util = puct.py_score_utility(mean, stdev, center, 0.0, 1.0, 0.3, scale)
        assert util == pytest.approx(0.3 * exact, abs=1e-6)


def test_score_utility_c_and_python_give_the_same_bits():
    if _puct is None:
        pytest.skip("kosumi.engine._puct not built")
    rng = np.random.default_rng(5)
    for _ in range(500):
        args = (float(rng.normal(0, 30)), float(rng.choice([0.0, rng.uniform(0, 40)])),
                float(rng.normal(0, 10)), float(rng.choice([0.0, 0.1])), 18.0,
                float(rng.choice([0.0, 0.3])), 6.75)
        assert _puct.score_utility(*args) == puct.py_score_utility(*args)


# ----------------------------------------------------------------------------- children
def test_children_are_sorted_by_prior_and_keep_pass():
    for impl in (puct.py_children, *([_puct.children] if _puct is not None else [])):
        moves, priors = impl(np.array([0.1, 0.5, 0, 0.25, 0.1, 0], dtype=np.float32))
        assert np.frombuffer(moves, np.int16).tolist() == [1, 3, 0, 4, 5]  # ties by index
        np.testing.assert_allclose(np.frombuffer(priors), [0.5 / 0.95, 0.25 / 0.95,
                                                           0.1 / 0.95, 0.1 / 0.95, 0.0])
        moves, priors = impl(np.zeros(10, dtype=np.float32))  # nothing: pass alone, prior 1
        assert np.frombuffer(moves, np.int16).tolist() == [9]
        assert np.frombuffer(priors).tolist() == [1.0]
        with pytest.raises(ValueError, match="float32"):
            impl(np.zeros(5, dtype=np.float64))


def test_children_c_and_python_give_the_same_bits():
    if _puct is None:
        pytest.skip("kosumi.engine._puct not built")
    rng = np.random.default_rng(4)
    for _ in range(300):
        k = int(rng.integers(2, 363))
        pol = rng.random(k).astype(np.float32) * (rng.random(k) < 0.7)
        pol[rng.random(k) < 0.2] = np.float32(0.125)  # exact ties
        pol /= max(pol.sum(), 1e-9)
        assert _puct.children(pol) == puct.py_children(pol)


def test_score_center_shrinks_towards_zero_within_a_cap():
    assert puct.score_center(10.0, 9) == pytest.approx(8.0)
    assert puct.score_center(100.0, 9) == pytest.approx(93.25)  # capped at 0.75 * 9 below


def test_the_python_versions_search_the_same_tree():
    """KOSUMI_NO_SPEEDUPS=1 (an install without a compiler) runs the Python versions: the same
    bits, so the same search: every root child's visits and value equal to the C build's."""
    code = (
        "import json, sys; from kosumi.engine import puct; "
        "from kosumi.engine.mcts import MCTS, SearchConfig; from kosumi.go.board import "
        "GameState; from kosumi.runtime.evaluator import UniformEvaluator; "
        "r = MCTS(UniformEvaluator(), SearchConfig(visits=300, batch=4, seed=3, "
        "stdev_scale=0.0)).search(GameState(7, 7.5)); "
        "print(json.dumps([puct.HAVE_C, [(m.move, m.visits, m.utility) for m in r.moves]]))"
    )
    runs = {}
    for env in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env=dict(os.environ, KOSUMI_NO_SPEEDUPS=env))
        runs[env] = json.loads(out.stdout)
    assert runs["1"][0] is False
    if runs["0"][0] is False:
        pytest.skip("kosumi.engine._puct not built: nothing to compare")
    assert runs["0"][1] == runs["1"][1] and len(runs["0"][1]) > 5
