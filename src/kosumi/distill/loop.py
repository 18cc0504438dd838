"""The one training loop: distillation (``distill.train``) and QAT (``quantize.qat``) both run it.

``run_steps`` runs optimiser steps ``start`` .. ``total - 1`` with one schedule (``Schedule``:
linear warm-up, then cosine decay to 0 at ``total``), calls ``save`` every ``save_every`` steps
and at the step it ends on, and ends early in one way only: ``stop_after`` steps into this
invocation (``--stop-after``: the state is saved, the schedule still runs to ``total``, and
``--resume`` continues it) or when ``interrupted()`` turns true (Ctrl-C: the step in flight is
finished and saved). It returns where it ended; what a step is (the batch, the loss, the
optimiser) and what a save writes (the resume state, ``distill.train_state``) are the caller's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kosumi.errors import KosumiError

Loss = TypeVar("Loss")  # what a step returns (a float, or a tensor not yet read back)


def learning_rate(step: int, total: int, base: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps to ``base``, then cosine decay to 0 at ``total``:
    base / 2 * (1 + cos(pi * (step - warmup) / (total - warmup)))."""
    if warmup > 0 and step < warmup:
        return base * (step + 1) / warmup
    span = max(1, total - warmup)
    if step - warmup >= span:
        return 0.0
    return base * 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / span))


def default_warmup(total: int) -> int:
    return min(1000, max(1, total // 20))


@dataclass(frozen=True)
class Schedule:
    """The learning rate of every step (``learning_rate``)."""

    total: int
    base: float
    warmup: int = 0

    def lr(self, step: int) -> float:
        return learning_rate(step, self.total, self.base, self.warmup)


@dataclass(frozen=True)
class LoopEnd:
    """Where ``run_steps`` ended: ``step`` steps done in all; ``stopped``: before the
    schedule's end, on purpose (``stop_after``) or interrupted."""

    step: int
    stopped: bool
    interrupted: bool = False


def stop_step(start: int, total: int, stop_after: int | None) -> int:
    """The step this invocation ends on (``--stop-after K``: K steps after ``start``)."""
    if stop_after is None:
        return total
    if stop_after < 1:
        raise KosumiError(f"--stop-after must be at least 1, not {stop_after}")
    return min(total, start + stop_after)


def run_steps(start: int, schedule: Schedule, step: Callable[[int, float], Loss],
              save: Callable[[int, bool], None], save_every: int, stop_after: int | None = None,
              after: Callable[[int, Loss, bool], None] | None = None,
              interrupted: Callable[[], bool] = lambda: False) -> LoopEnd:
    """See the module docstring. ``step(k, lr)`` runs optimiser step k (0-based) and returns
    its loss; ``after(done, loss, last)`` follows each step (progress), ``save(done, last)``
    follows it every ``save_every`` steps and at the end (``last``: the step this invocation
    ends on)."""
    end = stop_step(start, schedule.total, stop_after)
    done, stopped_by_hand = start, False
    while done < end:
        loss = step(done, schedule.lr(done))
        done += 1
        if interrupted():
            end, stopped_by_hand = done, True  # save this step, then stop
        if after is not None:
            after(done, loss, done == end)
        if done % save_every == 0 or done == end:
            save(done, done == end)
    return LoopEnd(step=done, stopped=done < schedule.total, interrupted=stopped_by_hand)
