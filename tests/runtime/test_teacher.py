"""load_teacher (kosumi.runtime.teacher) on KataGo's net."""

from __future__ import annotations

import torch

from kosumi.go.board import GameState
from kosumi.runtime.teacher import load_teacher

torch.set_num_threads(1)


def test_load_teacher_katago():
    from helpers import shared_path

    model = shared_path("models/g170-b6c96-s175395328-d26788732.bin.gz")
    teacher = load_teacher(model)
    e = teacher.evaluate_one(GameState(19))
    assert e.policy.shape == (362,) and 0 <= e.value <= 1
