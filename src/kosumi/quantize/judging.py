"""Judging a quantized net against its float self, on batches of positions: the numbers
``kosumi quantize`` chooses by (the sensitivity table, the rounding, QAT against PTQ) and
reports.

- ``compare_outputs(ref, got)``: each raw output's SQNR (``sqnr_db`` the worst of them), the
  largest policy probability error and the policy's top-1 agreement;
- ``judge_batches(fs, states, count)``: the positions judged on (``count`` spread over the
  calibration set) and their encoded same-size batches;
- ``agreement_with_float(float_net, q, states)``: ``compare_outputs`` of an int8 net against the
  float net it came from, on those positions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kosumi.go.board import GameState
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.nets.fold import fold
from kosumi.runtime.backend import Backend


def net_outputs(backend: Backend, batches: list[tuple[np.ndarray, np.ndarray | None]]
                ) -> list[dict[str, np.ndarray]]:
    return [backend.forward(p, g) for p, g in batches]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return np.asarray(e / e.sum(axis=1, keepdims=True))


def compare_outputs(ref: list[dict[str, np.ndarray]], got: list[dict[str, np.ndarray]]
                    ) -> dict[str, float]:
    """Against the float net, pooled over batches of any board sizes: the SQNR (dB) of each
    raw output (``sqnr_db`` the smallest of them), the largest policy probability error and the
    policy's top-1 agreement (raw logits, no legality mask: a property of the net itself)."""
    with np.errstate(over="ignore", invalid="ignore"):  # a broken net: inf, reported as such
        return _compare(ref, got)


def _compare(ref: list[dict[str, np.ndarray]], got: list[dict[str, np.ndarray]]
             ) -> dict[str, float]:
    noise: dict[str, float] = {}
    signal: dict[str, float] = {}
    top1, rows, worst = 0, 0, 0.0
    for r_out, g_out in zip(ref, got, strict=True):
        for key, r in r_out.items():
            g = g_out[key]
            r2 = r.reshape(r.shape[0], -1)
            centred = r2 - r2.mean(axis=1, keepdims=True) if r2.shape[1] > 1 else r2 - r2.mean()
            noise[key] = noise.get(key, 0.0) + float(np.sum((r - g) ** 2))
            signal[key] = signal.get(key, 0.0) + float(np.sum(centred ** 2))
        pr, pg = _softmax(r_out["policy"]), _softmax(g_out["policy"])
        worst = max(worst, float(np.abs(pr - pg).max()))
        top1 += int(np.sum(pr.argmax(axis=1) == pg.argmax(axis=1)))
        rows += pr.shape[0]
    per = {k: (10 * math.log10(signal[k] / noise[k]) if noise[k] > 0 and signal[k] > 0
               else float("inf")) for k in noise}
    out = {"sqnr_db": round(min(per.values()), 2), "max_policy_error": worst,
           "top1": top1 / max(1, rows)}
    out.update({f"sqnr_{k}": round(v, 2) for k, v in per.items()})
    return out


def judge_batches(fs: Any, states: list[GameState], count: int
                  ) -> tuple[list[GameState], list[tuple[np.ndarray, np.ndarray | None]]]:
    """The positions the sensitivity and the agreement are judged on (``count`` spread over the
    calibration set) and their encoded same-size batches."""
    from kosumi.runtime.evaluator import same_size_chunks

    judge = states[:: max(1, len(states) // count)][:count]
    return judge, [fs.encode([judge[i] for i in chunk]) for chunk in same_size_chunks(judge, 64)]


def agreement_with_float(float_net: Checkpoint, q: Checkpoint, states: list[GameState],
                         count: int = 128) -> dict[str, float]:
    """``compare_outputs`` of an int8 net against the float net it came from, on the positions
    ``quantize_net`` judges on."""
    from kosumi.runtime.numpy_backend import NumpyBackend
    from kosumi.runtime.numpy_int8 import Int8NumpyBackend

    _, batches = judge_batches(get_feature_set(float_net.config.features), states, count)
    ref = net_outputs(NumpyBackend.folded(fold(float_net.config, float_net.tensors)), batches)
    return compare_outputs(ref, net_outputs(Int8NumpyBackend(q.config, q.tensors), batches))
