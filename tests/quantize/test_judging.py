"""``quantize.judging``: the SQNR, top-1 and largest policy error of ``compare_outputs`` on
outputs worked out by hand, and ``judge_batches``' positions."""

from __future__ import annotations

import math

import numpy as np

from kosumi.quantize.judging import compare_outputs, judge_batches


def test_compare_outputs_on_numbers_worked_out_by_hand():
    # row 1: [1, -1] against [1, -1.2]; row 2: [0, 2] against [3, 2] (its top move flips)
    ref = [{"policy": np.array([[1.0, -1.0], [0.0, 2.0]]), "value": np.array([[0.5], [0.25]])}]
    got = [{"policy": np.array([[1.0, -1.2], [3.0, 2.0]]), "value": np.array([[0.5], [0.5]])}]
    c = compare_outputs(ref, got)
    # policy: signal of the row-centred logits 2 + 2, noise 0.04 + 9
    assert c["sqnr_policy"] == round(10 * math.log10(4 / 9.04), 2)
    # value (one column: centred on its mean over rows, 0.375): 2 * 0.125^2 against 0.0625
    assert c["sqnr_value"] == round(10 * math.log10(0.03125 / 0.0625), 2)
    assert c["sqnr_db"] == min(c["sqnr_policy"], c["sqnr_value"])
    assert c["top1"] == 0.5
    p_ref = 1 / (1 + math.exp(-2.0))  # row 2's float probability of its best move
    p_got = 1 / (1 + math.exp(-1.0))
    assert math.isclose(c["max_policy_error"], p_ref - (1 - p_got), rel_tol=1e-9)


def test_judge_batches_spreads_the_count_and_groups_by_size():
    from kosumi.nets.features import get_feature_set
    from kosumi.runtime.bench import bench_states

    states = bench_states(9, 30, seed=1) + bench_states(19, 10, seed=2)
    judge, batches = judge_batches(get_feature_set("basic"), states, 8)
    assert len(judge) == 8 and all(any(j is s for s in states) for j in judge)
    assert {j.size for j in judge} == {9, 19}  # a stride over both parts, not the first 8
    assert sum(len(p) for p, _ in batches) == 8
    assert all(p.shape[-1] in (9, 19) for p, _ in batches)
