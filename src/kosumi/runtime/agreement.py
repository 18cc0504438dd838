"""How closely one net's evaluations follow another's on the same positions.

``agreement(ref, got, sizes)`` compares two lists of ``Evaluation`` (the same positions, in
order) per board size: the policy's top-1 agreement, the same allowing a near tie (the other
net's move has at least 95% of the reference's best probability), the mean KL divergence of
the policies KL(ref || got), and the value's mean absolute error. ``evaluate_all`` runs an
evaluator over positions in same-size batches. ``kl`` and ``same_top_move`` compare two policy
vectors (a NaN in the reference marks a point it gives no probability: an illegal move), and
``raw_nn_policy`` reads one from KataGo's ``kata-raw-nn`` answer (the reference files). Used by
``kosumi viz``, the benchmarks and the tests; training has its own differentiable versions on
torch tensors (``distill.metrics``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kosumi.runtime.evaluator import Evaluation, Evaluator

TIE = 0.95  # a move within 5% of the reference's best probability counts as a tie


def kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) in nats; q's zeros where p is positive count as 1e-30, p's NaNs as 0."""
    p = np.nan_to_num(np.asarray(p, np.float64), nan=0.0)
    q = np.asarray(q, np.float64)
    return float(np.sum(np.where(p > 0, p * (np.log(np.maximum(p, 1e-30))
                                             - np.log(np.maximum(q, 1e-30))), 0.0)))


def same_top_move(ref: np.ndarray, got: np.ndarray) -> bool:
    """Do both policies put their largest probability on the same move (NaNs in ``ref``
    ignored)?"""
    return int(np.nanargmax(ref)) == int(np.argmax(got))


def raw_nn_policy(raw: dict[str, Any]) -> np.ndarray:
    """The policy of a ``kata-raw-nn`` answer in kosumi's order (the points row by row from the
    top, then pass), float64, NaN where KataGo gives none (an illegal point)."""
    return np.array([np.nan if x is None else x for x in raw["policy"]] + [raw["policyPass"]],
                    dtype=np.float64)


def evaluate_all(evaluator: Evaluator, states: Sequence[Any], batch: int = 32
                 ) -> list[Evaluation]:
    out: list[Evaluation] = []
    for i in range(0, len(states), batch):
        out.extend(evaluator.evaluate(states[i:i + batch]))
    return out


def agreement(ref: Sequence[Evaluation], got: Sequence[Evaluation], sizes: Sequence[int]
              ) -> dict[str, dict[str, float]]:
    """Per board size ("19x19", ...; largest first), see the module docstring."""
    rows = {}
    for n in sorted(set(sizes), reverse=True):
        idx = [i for i, s in enumerate(sizes) if s == n]
        best = [int(np.argmax(got[i].policy)) for i in idx]
        top1 = [int(np.argmax(ref[i].policy)) == b for i, b in zip(idx, best, strict=True)]
        tie = [ref[i].policy[b] >= TIE * ref[i].policy.max()
               for i, b in zip(idx, best, strict=True)]
        rows[f"{n}x{n}"] = {
            "positions": len(idx),
            "top1": round(float(np.mean(top1)), 4),
            "top1_tie_aware": round(float(np.mean(tie)), 4),
            "policy_kl": float(f"{np.mean([kl(ref[i].policy, got[i].policy) for i in idx]):.3g}"),
            "value_mae": float(f"{np.mean([abs(ref[i].value - got[i].value) for i in idx]):.3g}"),
        }
    return rows
