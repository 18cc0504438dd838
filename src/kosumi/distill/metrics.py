"""How close a student is to its teacher: the per-sample quantities distillation trains and reports.

All functions take torch tensors of one batch and return PER-SAMPLE values (shape ``[B]``), so a
caller can mask, sum across batches or across processes, and divide once. Teacher targets are
probabilities; student outputs are the RAW outputs of ``KosumiNet`` (logits / pre-tanh values).

policy_kl        KL(teacher || student) over points + pass, in nats, with an optional temperature
                 applied to both distributions (teacher ``p ** (1/T)`` renormalised, student
                 ``softmax(logits / T)``); 0 * log 0 counts as 0. The training loss multiplies it
                 by ``T**2`` (Hinton et al.), so that its gradients keep their size as T changes.
topk_agreement   1 where the teacher's favourite move (argmax) is among the student's k best.
                 k = 1 is "top-1 agreement" (both pick the same move); ties in the teacher are
                 broken towards the lower index, as ``argmax`` does.
win_probability  a value output -> the side to move's win probability: ``win + noResult / 2``
                 for wdl (3 probabilities or logits), ``(1 + tanh(v)) / 2`` for a tanh value.
value_mae        |student win probability - teacher win probability|.
value_loss       cross-entropy against the teacher's win/loss/noResult (wdl student), or binary
                 cross-entropy against its win probability (tanh student).
ownership_mse    mean over points of (tanh(student) - teacher)^2, teacher ownership in [-1, 1].
score_huber      Huber loss on the score lead in units of ``SCORE_UNIT`` points (delta 1).

``MetricSums`` accumulates sums and counts of named per-sample values (masked where a target is
missing) and turns them into means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F

SCORE_UNIT = 10.0  # the score Huber loss measures errors in units of 10 points


def teacher_log_probs(teacher: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log of the teacher distribution at ``temperature`` (``-inf`` where it is 0)."""
    logp = torch.log(teacher.clamp_min(0.0))
    if temperature != 1.0:
        logp = torch.log_softmax(logp / temperature, dim=-1)
    else:
        logp = logp - torch.logsumexp(logp, dim=-1, keepdim=True)
    return logp


def policy_kl(teacher: torch.Tensor, student_logits: torch.Tensor,
              temperature: float = 1.0) -> torch.Tensor:
    """KL(teacher || student) per sample, in nats (see the module docstring)."""
    p_t = teacher_log_probs(teacher, temperature).exp()
    log_s = torch.log_softmax(student_logits / temperature, dim=-1)
    # xlogy(0, 0) = 0: where the teacher gives 0 the term is 0, whatever the student says
    return (torch.special.xlogy(p_t, p_t) - p_t * log_s).sum(dim=-1)


def topk_agreement(teacher: torch.Tensor, student_logits: torch.Tensor, k: int = 1) -> torch.Tensor:
    """1.0 where the teacher's argmax is among the student's ``k`` highest logits, else 0.0."""
    best = teacher.argmax(dim=-1, keepdim=True)
    k = min(k, student_logits.shape[-1])
    if k == 1:
        return (student_logits.argmax(dim=-1, keepdim=True) == best).squeeze(-1).float()
    top = student_logits.topk(k, dim=-1).indices
    return (top == best).any(dim=-1).float()


def win_probability(value: torch.Tensor, kind: str, logits: bool = True) -> torch.Tensor:
    """A value output -> win probability of the side to move, per sample.

    kind "wdl": ``value`` is [B, 3] (logits if ``logits`` else probabilities) -> win + noResult/2;
    kind "tanh": ``value`` is [B, 1] or [B] pre-tanh -> (1 + tanh(v)) / 2.
    """
    if kind == "wdl":
        p = torch.softmax(value, dim=-1) if logits else value
        return p[..., 0] + 0.5 * p[..., 2]
    if kind == "tanh":
        v = value.reshape(value.shape[0])
        return 0.5 * (1.0 + torch.tanh(v))
    raise ValueError(f"unknown value kind {kind!r}")


def teacher_win_probability(value: torch.Tensor) -> torch.Tensor:
    """The teacher's [B, 3] win/loss/noResult probabilities -> win + noResult / 2."""
    return win_probability(value, "wdl", logits=False)


def value_mae(teacher_value: torch.Tensor, student_value: torch.Tensor, kind: str) -> torch.Tensor:
    """|student - teacher| win probability per sample."""
    return (win_probability(student_value, kind) - teacher_win_probability(teacher_value)).abs()


def value_loss(teacher_value: torch.Tensor, student_value: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-sample value loss: CE against win/loss/noResult (wdl) or BCE on win prob (tanh)."""
    if kind == "wdl":
        return -(teacher_value * torch.log_softmax(student_value, dim=-1)).sum(dim=-1)
    if kind == "tanh":
        # P(win) = (1 + tanh v) / 2 = sigmoid(2 v)
        v = student_value.reshape(student_value.shape[0])
        target = teacher_win_probability(teacher_value)
        return F.binary_cross_entropy_with_logits(2.0 * v, target, reduction="none")
    raise ValueError(f"unknown value kind {kind!r}")


def ownership_mse(teacher_ownership: torch.Tensor, student_ownership: torch.Tensor) -> torch.Tensor:
    """Mean over points of (tanh(student) - teacher)^2, per sample."""
    return (torch.tanh(student_ownership) - teacher_ownership).square().mean(dim=-1)


def score_huber(teacher_score: torch.Tensor, student_score: torch.Tensor) -> torch.Tensor:
    """Huber loss (delta 1) on the score-lead error measured in units of ``SCORE_UNIT`` points."""
    return F.huber_loss(student_score / SCORE_UNIT, teacher_score / SCORE_UNIT,
                        reduction="none", delta=1.0)


class MetricSums:
    """Sums and counts of named per-sample values; ``means()`` divides them.

    ``add(name, values, mask=None)`` adds ``values.sum()`` (only where ``mask``) and the number of
    samples counted. Sums stay tensors on the values' device until ``means()`` (no host sync
    per training step on a GPU). ``as_tensor``/``from_tensor`` pack the sums into one float64
    tensor (in ``names`` order) so that processes can all-reduce them in one call.
    """

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, torch.Tensor] = {}

    def add(self, name: str, values: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        values = values.detach().to(torch.float64)
        if mask is not None:
            m = mask.to(values.dtype)
            total, count = (values * m).sum(), m.sum()
        else:
            total = values.sum()
            count = torch.tensor(float(values.numel()), dtype=torch.float64, device=values.device)
        if name in self.sums:
            self.sums[name] = self.sums[name] + total
            self.counts[name] = self.counts[name] + count
        else:
            self.sums[name], self.counts[name] = total, count

    def means(self) -> dict[str, float]:
        """name -> mean (names with no counted sample are left out)."""
        out = {}
        for k in sorted(self.sums):
            c = float(self.counts[k])
            if c > 0:
                out[k] = float(self.sums[k]) / c
        return out

    def as_tensor(self, names: list[str]) -> torch.Tensor:
        zero = torch.zeros((), dtype=torch.float64)
        vals = [self.sums.get(n, zero).cpu() for n in names] + [
            self.counts.get(n, zero).cpu() for n in names]
        return torch.stack(vals) if vals else torch.zeros(0, dtype=torch.float64)

    @classmethod
    def from_tensor(cls, names: list[str], packed: torch.Tensor) -> MetricSums:
        out = cls()
        for i, n in enumerate(names):
            out.sums[n] = packed[i]
            out.counts[n] = packed[len(names) + i]
        return out

    def __bool__(self) -> bool:
        return any(float(c) > 0 for c in self.counts.values())


def finite_or_none(values: Mapping[str, float]) -> dict[str, float | None]:
    """JSON-safe copy: NaN/inf become None."""
    return {k: (float(v) if math.isfinite(v) else None) for k, v in values.items()}
