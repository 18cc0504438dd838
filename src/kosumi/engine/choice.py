"""Which root move to play: KataGo's play-selection weights (``getPlaySelectionValues``).

A child's weight starts as its search weight (its visits, less what noise pruning took). Then

1. *retrospective pruning*: for every child but the "most stably explored" one (``best``, the
   highest ``w * max(0, n - 1) / max(1, n) + 2 * prior``), the weight drops to what the PUCT
   formula would have given it had it known the child's final value: the weight at which its
   selection value equals ``best``'s (visits spent only on exploration are taken back);
2. *lower confidence bound* (``lcb_stdevs`` > 0): each child's utility minus ``lcb_stdevs``
   standard errors (the utility deviation over the effective sample size, with a small prior
   towards the largest deviation possible); among the children with at least
   ``lcb_min_visit_prop`` of ``best``'s weight, the one with the highest bound gets a weight at
   least ``((r + d) / (r + 0.2 d))^2`` times every other's (``d`` how far its bound is above the
   other's, ``r`` the other's radius): so a move with fewer visits but a surely higher value
   is chosen over the most visited one;
3. weights under ``min(1, max / 64)`` drop to 0.

With no child searched (one visit) the weights are the priors: the raw policy's move.
``tempered`` turns weights into probabilities at a temperature.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

import numpy as np

from kosumi.engine.puct import (
    F_N,
    F_U,
    F_U2,
    F_VL,
    F_W,
    F_W2,
    NF,
    P_CPUCT,
    P_CPUCT_BASE,
    P_CPUCT_LOG,
    P_STDEV_PRIOR,
    P_STDEV_PRIOR_WEIGHT,
    P_STDEV_SCALE,
)


@dataclass
class Selection:
    weights: np.ndarray  # per child: the play-selection weight (0: never chosen)
    radius: np.ndarray  # per child: the confidence radius of its utility (lcb = utility - radius)
    lcb: np.ndarray  # per child: the lower confidence bound of its utility (root player's view)


def explore_scaling(rec: np.ndarray, agg: array[float], p: array[float]) -> float:
    """The root's PUCT exploration scale (``puct.select_child``'s ``scaling``)."""
    reached = (rec[:, F_N] > 0) | (rec[:, F_VL] > 0)
    tw = float(rec[reached, F_W].sum())
    parent_u, parent_w = agg[F_U], agg[F_W]
    if agg[F_N] <= 0 or parent_w <= 1.0:
        stdev = p[P_STDEV_PRIOR]
    else:
        u_sq = parent_u * parent_u
        u2 = max(agg[F_U2], u_sq)
        var = ((u_sq + p[P_STDEV_PRIOR] ** 2) * p[P_STDEV_PRIOR_WEIGHT] + u2 * parent_w) \
            / (p[P_STDEV_PRIOR_WEIGHT] + parent_w - 1.0) - u_sq
        stdev = math.sqrt(max(var, 0.0))
    factor = 1.0 + p[P_STDEV_SCALE] * (stdev / p[P_STDEV_PRIOR] - 1.0)
    c = p[P_CPUCT] + p[P_CPUCT_LOG] * math.log((tw + p[P_CPUCT_BASE]) / p[P_CPUCT_BASE])
    return c * math.sqrt(tw + 0.01) * factor


def lcb_and_radius(rec: np.ndarray, sign: float, stdevs: float,
                   radius_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Each child's lower confidence bound on its utility (root player's view) and its radius
    (KataGo's ``getSelfUtilityLCBAndRadius``); children without visits get the widest."""
    k = len(rec)
    wide = 2.0 * radius_max * stdevs
    lcb = np.full(k, -wide)
    radius = np.full(k, wide)
    n, w, w2 = rec[:, F_N], rec[:, F_W], rec[:, F_W2]
    ok = (n > 0) & (w > 0) & (w2 > 0)
    if ok.any():
        w, w2, u, u2 = w[ok], w2[ok], rec[ok, F_U], rec[ok, F_U2]
        ess = w * w / w2
        prior_w = w / (ess * ess * ess)
        u2 = np.maximum(u2, u * u + 1e-8)
        u2 = (u2 * w + (u2 + radius_max * radius_max) * prior_w) / (w + prior_w)
        w = w + prior_w
        w2 = w2 + prior_w * prior_w
        ess = w * w / w2
        r = np.sqrt(np.maximum(u2 - u * u, 0.0) / ess) * stdevs
        radius[ok] = r
        lcb[ok] = sign * u - r
    return lcb, radius


def padded(st: array[float], k: int) -> np.ndarray:
    """A node's child records as a [k, NF] array: the children without records (not reached)
    as zeros."""
    rec = np.zeros((k, NF))
    got = np.frombuffer(st).reshape(-1, NF) if len(st) else rec[:0]
    rec[: len(got)] = got
    return rec


def play_selection(st: array[float], priors: array[float], agg: array[float],
                   params: array[float], sign: float, lcb_stdevs: float,
                   lcb_min_visit_prop: float, radius_max: float) -> Selection:
    """The root children's play-selection weights (see the module docstring); one entry per
    child."""
    pri = np.frombuffer(priors)
    rec = padded(st, len(pri))
    k = len(rec)
    n, w = rec[:, F_N], rec[:, F_W]
    searched = (n > 0) & (w > 0)
    weights = np.where(searched, w, 0.0)
    lcb, radius = lcb_and_radius(rec, sign, max(lcb_stdevs, 1e-9), radius_max)
    if not searched.any():
        return Selection(pri.copy(), radius, lcb)
    goodness = weights * np.maximum(0.0, n - 1.0) / np.maximum(1.0, n) + 2.0 * pri
    best = int(np.argmax(goodness))
    best_weight = float(weights[best])
    # 1. retrospective pruning of exploration visits
    scaling = explore_scaling(rec, agg, params)
    self_u = sign * rec[:, F_U]
    best_value = scaling * pri[best] / (1.0 + w[best]) + self_u[best]
    explore = best_value - self_u
    with np.errstate(divide="ignore", invalid="ignore"):
        wanted = np.where(explore > 0, np.maximum(scaling * pri / explore - 1.0, 0.0), 1e100)
    reduced = np.ceil(np.minimum(weights, wanted))
    reduced[best] = best_weight
    weights = np.where(searched, reduced, 0.0)
    # 2. lower confidence bound
    if lcb_stdevs > 0:
        eligible = (weights > 0) & (weights >= lcb_min_visit_prop * best_weight)
        if eligible.any():
            masked = np.where(eligible, lcb, -np.inf)
            top = int(np.argmax(masked))
            excess = lcb[top] - lcb
            use = (excess >= 0) & (np.arange(k) != top)
            if use.any():
                rf = (radius[use] + excess[use]) / (radius[use] + 0.2 * excess[use])
                weights[top] = max(float(weights[top]), float((rf * rf * weights[use]).max()))
    # 3. drop the crumbs
    top_weight = float(weights.max())
    weights = np.where(weights < min(1.0, top_weight / 64.0), 0.0, weights)
    return Selection(weights, radius, lcb)


def line_child(st: array[float], priors: array[float], sign: float, lcb_stdevs: float,
               lcb_min_visit_prop: float, radius_max: float) -> int | None:
    """The child a principal variation goes on to below the root (KataGo's ``appendPV``: the
    highest play-selection value, without the root's retrospective pruning): among the
    children with at least ``lcb_min_visit_prop`` of the most stably explored one's weight, the
    one with the highest lower confidence bound (``lcb_stdevs`` 0: the highest weight); ties to
    the first, the highest prior. None: no child searched. Plain Python over the few children
    a node has reached (a pv is walked for every root move of every analysis line)."""
    weights: list[float] = []
    best_goodness, best_weight = -math.inf, 0.0
    for k in range(len(st) // NF):
        n, w = st[k * NF + F_N], st[k * NF + F_W]
        wk = w if n > 0 and w > 0 else 0.0
        weights.append(wk)
        goodness = wk * max(0.0, n - 1.0) / max(1.0, n) + 2.0 * priors[k]
        if goodness > best_goodness:
            best_goodness, best_weight = goodness, wk
    top = max(weights, default=0.0)
    if top <= 0:
        return None
    if lcb_stdevs <= 0:
        return weights.index(top)
    eligible = [k for k, wk in enumerate(weights)
                if wk > 0 and wk >= lcb_min_visit_prop * best_weight]
    if len(eligible) == 1:
        return eligible[0]
    rec = np.frombuffer(st).reshape(-1, NF)[eligible]
    lcb, _ = lcb_and_radius(rec, sign, lcb_stdevs, radius_max)
    return eligible[int(np.argmax(lcb))]


def tempered(weights: np.ndarray, temperature: float) -> np.ndarray:
    """Probabilities proportional to ``weights ** (1 / temperature)`` (0 stays 0)."""
    w = np.asarray(weights, dtype=np.float64)
    pos = w > 0
    out = np.zeros_like(w)
    logs = np.log(w[pos] / w.max()) / temperature
    out[pos] = np.exp(logs)
    return out / out.sum()
