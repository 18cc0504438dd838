"""The distillation metrics (kosumi.distill.metrics): policy KL, top-k agreement, value and
score losses, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from kosumi.distill import metrics as M

torch.set_num_threads(1)


# ============================================================================ metrics
def test_kl_is_zero_for_identical_distributions():
    p = torch.tensor([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]])
    logits = torch.log(p.clamp_min(1e-30))  # the same distribution as logits
    kl = M.policy_kl(p, logits)
    assert torch.allclose(kl, torch.zeros(2), atol=1e-6)
    assert torch.allclose(M.policy_kl(p, logits, temperature=2.0), torch.zeros(2), atol=1e-6)


def test_kl_matches_a_hand_computed_two_point_example():
    teacher = torch.tensor([[0.5, 0.5]])
    logits = torch.tensor([[math.log(0.8), math.log(0.2)]])  # student (0.8, 0.2)
    want = 0.5 * math.log(0.5 / 0.8) + 0.5 * math.log(0.5 / 0.2)  # 0.2231...
    assert M.policy_kl(teacher, logits).item() == pytest.approx(want, rel=1e-6)
    # the other way round is a different number (KL is not symmetric)
    t2 = torch.tensor([[0.8, 0.2]])
    l2 = torch.log(torch.tensor([[0.5, 0.5]]))
    assert M.policy_kl(t2, l2).item() == pytest.approx(
        0.8 * math.log(0.8 / 0.5) + 0.2 * math.log(0.2 / 0.5), rel=1e-6)
    # temperature 2: teacher (0.9, 0.1) -> (3, 1)/4; student logits (0, 0) -> (0.5, 0.5)
    t3 = torch.tensor([[0.9, 0.1]])
    want3 = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert M.policy_kl(t3, torch.zeros(1, 2), 2.0).item() == pytest.approx(want3, rel=1e-5)
    # a teacher zero contributes nothing, even where the student is very sure
    t4 = torch.tensor([[1.0, 0.0]])
    assert M.policy_kl(t4, torch.tensor([[0.0, 50.0]])).item() == pytest.approx(50.0, rel=1e-5)


def test_agreement_and_value_metrics_hand_values():
    teacher = torch.tensor([[0.1, 0.6, 0.3, 0.0, 0.0, 0.0, 0.0],
                            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    student = torch.tensor([[0.0, 5.0, 1.0, 0.0, 0.0, 0.0, 0.0],   # agrees
                            [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]])  # teacher's move ranked 7th
    assert M.topk_agreement(teacher, student, 1).tolist() == [1.0, 0.0]
    assert M.topk_agreement(teacher, student, 5).tolist() == [1.0, 0.0]
    student[1, 6] = 4.5  # now 3rd
    assert M.topk_agreement(teacher, student, 5).tolist() == [1.0, 1.0]
    assert M.topk_agreement(teacher, student, 1).tolist() == [1.0, 0.0]

    tv = torch.tensor([[0.6, 0.2, 0.2]])  # win prob 0.6 + 0.1 = 0.7
    sv = torch.log(torch.tensor([[0.5, 0.5, 0.0001]]))
    assert M.value_mae(tv, sv, "wdl").item() == pytest.approx(abs(0.5 / 1.0001 + 0.00005 - 0.7),
                                                              abs=1e-4)
    ce = -(0.6 * math.log(0.5 / 1.0001) + 0.2 * math.log(0.5 / 1.0001)
           + 0.2 * math.log(0.0001 / 1.0001))
    assert M.value_loss(tv, sv, "wdl").item() == pytest.approx(ce, rel=1e-4)
    v = torch.tensor([[math.atanh(0.2)]])  # tanh student: win prob 0.6
    assert M.value_mae(tv, v, "tanh").item() == pytest.approx(0.1, abs=1e-6)
    bce = -(0.7 * math.log(0.6) + 0.3 * math.log(0.4))
    assert M.value_loss(tv, v, "tanh").item() == pytest.approx(bce, rel=1e-5)
    # score Huber in 10-point units: error 5 points -> 0.5 * 0.5^2; 30 points -> 3 - 0.5
    assert M.score_huber(torch.tensor([0.0, 0.0]), torch.tensor([5.0, 30.0])).tolist() == \
        pytest.approx([0.125, 2.5])
