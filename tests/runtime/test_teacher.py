"""load_teacher (kosumi.runtime.teacher) on KataGo's net."""

from __future__ import annotations

import torch

from kosumi.go.board import GameState
from kosumi.runtime.teacher import load_teacher

torch.set_num_threads(1)


def test_load_teacher_katago(katago_model):

    model = katago_model
    teacher = load_teacher(model)
    e = teacher.evaluate_one(GameState(19))
    assert e.policy.shape == (362,) and 0 <= e.value <= 1
