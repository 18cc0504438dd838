"""The one training loop: its schedule against hand-computed rates, where it saves and stops."""

from __future__ import annotations

import itertools
import math

import pytest

from kosumi.distill.loop import Schedule, default_warmup, learning_rate, run_steps
from kosumi.errors import KosumiError


def test_learning_rate_schedule():
    total, base, warm = 1000, 1e-3, default_warmup(1000)
    assert warm == 50
    lrs = [learning_rate(s, total, base, warm) for s in range(total)]
    assert lrs[0] == pytest.approx(base / warm) and lrs[warm - 1] == pytest.approx(base)
    assert all(a < b for a, b in itertools.pairwise(lrs[:warm]))  # linear warm-up
    assert all(a >= b for a, b in itertools.pairwise(lrs[warm:]))  # cosine decay
    assert lrs[warm + (total - warm) // 2] == pytest.approx(base / 2, rel=1e-2)
    assert lrs[-1] < base * 1e-4


def test_without_warm_up_the_rate_is_the_plain_cosine():
    # QAT's schedule before it ran on this loop: lr * 0.5 * (1 + cos(pi * step / steps)), bit
    # for bit (a QAT run writes the same bytes through the loop as through its old one)
    for step in range(0, 20):
        assert Schedule(20, 2e-5).lr(step) == 2e-5 * 0.5 * (1 + math.cos(math.pi * step / 20))


def run(start: int, total: int, every: int, stop_after: int | None = None,
        interrupt_at: int | None = None) -> tuple[list[tuple[int, float]], list[int], object]:
    steps: list[tuple[int, float]] = []
    saves: list[int] = []

    def step(k: int, lr: float) -> float:
        steps.append((k, lr))
        return 0.0

    def save(done: int, last: bool) -> None:
        saves.append(done)
        assert last == (done == len(steps) + start and (
            done == total or (stop_after is not None and done == start + stop_after)
            or (interrupt_at is not None and len(steps) >= interrupt_at)))

    end = run_steps(start, Schedule(total, 1.0), step, save, every, stop_after,
                    interrupted=lambda: interrupt_at is not None and len(steps) >= interrupt_at)
    return steps, saves, end


def test_the_loop_saves_every_k_steps_and_at_its_end():
    steps, saves, end = run(0, 10, 4)
    assert [k for k, _ in steps] == list(range(10))
    assert saves == [4, 8, 10]
    assert end.step == 10 and not end.stopped


def test_stop_after_saves_and_keeps_the_schedule_of_the_whole_run():
    steps, saves, end = run(0, 10, 4, stop_after=3)
    assert [k for k, _ in steps] == [0, 1, 2] and saves == [3]
    assert end.step == 3 and end.stopped and not end.interrupted
    rest, saves2, end2 = run(3, 10, 4)
    assert [k for k, _ in rest] == list(range(3, 10)) and saves2 == [4, 8, 10]
    whole, _, _ = run(0, 10, 4)
    assert steps + rest == whole  # the same rates as an uninterrupted run
    assert end2.step == 10 and not end2.stopped


def test_an_interrupt_finishes_the_step_saves_and_stops():
    steps, saves, end = run(0, 10, 100, interrupt_at=2)
    assert len(steps) == 2 and saves == [2] and end.stopped and end.interrupted


def test_a_stop_after_below_one_is_an_error():
    with pytest.raises(KosumiError, match="--stop-after must be at least 1"):
        run(0, 10, 4, stop_after=0)


def test_nothing_to_do_when_the_run_is_already_done():
    steps, saves, end = run(10, 10, 4)
    assert steps == [] and saves == [] and end.step == 10 and not end.stopped
