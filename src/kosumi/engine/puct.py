"""The search's per-node rules: which child a playout descends to, and what a node is worth.

These are KataGo's rules (its ``docs/KataGoMethods.md`` and ``cpp/search/``), restated here for
kosumi's tree. Everything is a *utility* from White's view:

    utility = win/loss in [-1, 1]
              + static  * E[2/pi atan(score / (2 sqrt(area)))]
              + dynamic * E[2/pi atan((score - center) / (0.75 sqrt(area)))]

over the net's score distribution (mean ``score_mean``, deviation ``score_stdev``; a point
estimate for nets without one), where ``center`` is the root's expected score shrunk towards 0
(``score_center``). At a node the player to move maximises ``sign * utility`` (``sign`` +1 for
White, -1 for Black).

**Records.** A node's children are sorted by prior, highest first; it keeps one record of
``NF`` float64 fields for each of its first children in ``st`` (those a playout has reached:
a prefix, as a playout reaches a new child in prior order, grown as needed) and one for itself
in ``agg``: ``F_N`` visits, ``F_VL``
virtual losses in flight, ``F_W`` weight (visits, less what noise pruning took), ``F_W2``
summed squared weights, then weighted averages ``F_U`` utility, ``F_U2`` utility squared,
``F_WL`` win/loss, ``F_SM`` score mean, ``F_SM2`` score mean squared, ``F_LD`` lead. ``own``
is the node's own evaluation (``O_WL``, ``O_SM``, ``O_SM2``, ``O_LD``, ``O_U``, ``O_W``).

**select_child(st, priors, agg, params, own_utility, sign, is_root)** returns
``argmax_i scaling * prior_i / (1 + w_i) + sign * u_i`` over the children with records and the
first one without (the best new child), where, over the children already reached (a visit or
a virtual loss), ``mass`` is their summed prior and ``tw`` their summed weight, and

* ``scaling = (c_puct + c_puct_log * log((tw + base) / base)) * sqrt(tw + 0.01) * factor``,
  ``factor = 1 + stdev_scale * (stdev / stdev_prior - 1)`` with ``stdev`` the node's utility
  deviation, shrunk towards ``stdev_prior`` with weight ``stdev_prior_weight`` (cPUCT that grows
  with visits and with how much the values disagree);
* a child without visits gets the first-play urgency ``fpu = a * agg.U + (1 - a) *
  own_utility - sign * reduction * sqrt(mass)``, ``a = min(1, mass ** fpu_parent_pow)`` (the
  node's average blended with its own evaluation; ``fpu_parent_pow < 0``: the average alone),
  ``reduction`` = ``root_fpu_reduction`` at the root, ``fpu_reduction`` below;
* a child with visits gets its record's ``u = U``, ``w = W``; virtual losses pull ``u``
  towards a loss by ``vlw / (vlw + max(0.25, w))`` and add ``vlw = VL * vl_weight`` to ``w``.

Ties go to the lowest index.

**update_node(st, priors, own, params, sign, agg, parent_st, slot, vl_release, bias)**
recomputes ``agg`` after a playout: the children with visits, each weighted by its ``W``, then

1. *noise pruning* (``noise_prune``): in prior order, a child whose ``sign * U`` is below the
   weighted average of those before it, by ``gap``, keeps at most twice its raw-policy share of
   their weight plus ``exp(-gap / noise_scale)`` of the excess;
2. *value weighting* (``value_weight_exp`` e != 0): each weight times ``(T3(z) + 1e-4) ** e``,
   ``z`` the child's distance to the weighted mean in units of ``sqrt(1e-8 + 1/(1.5 sqrt(w)))``
   and ``T3`` Student's t CDF with 3 degrees of freedom; then rescaled to the total of step 1;

and the node's own evaluation with weight ``O_W``: ``agg`` holds the weighted averages,
``N`` = 1 + the children's visits, ``W`` = the weights' total. The record is then copied into
``parent_st`` at ``slot`` (``parent_st`` None: the root), all but ``F_VL``, which drops by
``vl_release``.

*Subtree value bias* (``bias``: the node's bucket, ``[delta sum, weight sum]``, shared by the
nodes reached by the same local move, ``bias_factor`` != 0): the children's average utility
minus the node's own, times ``(children's weight) ** bias_exp``, is the node's share of its
bucket (``own``'s ``O_BIAS_DELTA``/``O_BIAS_WEIGHT`` remember the last share, which the new one
replaces); the node's own utility is then corrected by ``bias_factor`` times the bucket's
average, before it enters ``agg``. The net's errors on a local tactic, once a deeper search
has seen them, correct its other evaluations of the same tactic (KataGo's subtree value bias
correction).

``children`` (a node's children, sorted by prior), ``score_utility``, ``select_child`` and
``update_node`` are C (``kosumi.engine._puct``) when it is built; the ``py_`` versions here
give the same bits (the C build does not contract floating-point
operations). ``KOSUMI_NO_SPEEDUPS=1`` before the first import forces the Python versions.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, MutableSequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from kosumi.accel import extension

if TYPE_CHECKING:
    from typing_extensions import Buffer

# a child's record (and a node's own, ``agg``): NF float64 fields
F_N, F_VL, F_W, F_W2, F_U, F_U2, F_WL, F_SM, F_SM2, F_LD = range(10)
NF = 10
# a node's own evaluation, and its last share of its subtree value bias bucket
O_WL, O_SM, O_SM2, O_LD, O_U, O_W, O_BIAS_DELTA, O_BIAS_WEIGHT = range(8)
NOWN = 8
# a subtree value bias bucket
B_DELTA, B_WEIGHT = range(2)
NBIAS = 2
# the settings select_child and update_node read, in this order
PARAM_NAMES = (
    "c_puct", "c_puct_log", "c_puct_base", "stdev_prior", "stdev_prior_weight", "stdev_scale",
    "fpu_reduction", "root_fpu_reduction", "fpu_parent_pow", "vl_weight", "radius",
    "value_weight_exp", "noise_prune", "noise_scale", "bias_factor", "bias_exp",
)
(P_CPUCT, P_CPUCT_LOG, P_CPUCT_BASE, P_STDEV_PRIOR, P_STDEV_PRIOR_WEIGHT, P_STDEV_SCALE, P_FPU,
 P_ROOT_FPU, P_FPU_POW, P_VL_WEIGHT, P_RADIUS, P_VALUE_WEIGHT_EXP, P_NOISE_PRUNE,
 P_NOISE_SCALE, P_BIAS_FACTOR, P_BIAS_EXP) = range(16)
NPARAMS = 16


_ZERO = array("d", [0.0])


def new_record() -> array[float]:
    """An empty record (a node not yet visited)."""
    return _ZERO * NF


def new_records(k: int) -> array[float]:
    """``k`` empty child records."""
    return _ZERO * (NF * k)


# --------------------------------------------------------------------------- score utility
# E[f(X)], X ~ N(m, s^2), as sum w_i f(m + s z_i) over z in [-5, 5] by steps of 0.1 with
# normal-density weights (KataGo's table uses the same grid; within 1e-6 of the integral for
# atan, where a Gauss-Hermite rule is far off once s is a few times the scale); computed like
# the C version, operation for operation
_Z = [-5.0 + 0.1 * i for i in range(101)]
_ZW = [math.exp(-0.5 * z * z) for z in _Z]
_ZSUM = 0.0
for _w in _ZW:
    _ZSUM += _w
_ZW = [w / _ZSUM for w in _ZW]
_TWO_OVER_PI = 0.6366197723675814


def score_value(mean: float, stdev: float, center: float, scale: float) -> float:
    """E[2/pi * atan((X - center) / scale)] for X ~ N(mean, stdev^2) (stdev 0: the point)."""
    if stdev <= 0.0:
        return math.atan((mean - center) / scale) * _TWO_OVER_PI
    acc = 0.0
    for i in range(101):
        acc += _ZW[i] * math.atan((mean + stdev * _Z[i] - center) / scale)
    return acc * _TWO_OVER_PI


def py_score_utility(mean: float, stdev: float, center: float, static: float,
                     static_scale: float, dynamic: float, dynamic_scale: float, /) -> float:
    """The score part of the utility (White's view): ``static`` times the score value around 0
    at ``static_scale`` (2 sqrt(area)) plus ``dynamic`` times the score value around
    ``center`` at ``dynamic_scale`` (0.75 sqrt(area))."""
    out = 0.0
    if static != 0.0:
        out += static * score_value(mean, stdev, 0.0, static_scale)
    if dynamic != 0.0:
        out += dynamic * score_value(mean, stdev, center, dynamic_scale)
    return out


def py_children(policy: np.ndarray, /) -> tuple[bytes, bytes]:
    """A node's children from a float32 policy over points + pass (pass last): the indices with
    policy > 0 and always pass (int16), their priors normalised to sum 1 (summed in index
    order; float64), sorted by prior, highest first, ties by index."""
    pol = np.asarray(policy)
    if pol.dtype != np.float32 or pol.ndim != 1 or not pol.flags.c_contiguous:
        raise ValueError("policy must be a C-contiguous float32 buffer")
    k = len(pol)
    if not 1 <= k <= 32767:
        raise ValueError(f"policy must have 1..32767 entries, not {k}")
    values = pol.tolist()
    kept = [i for i in range(k) if values[i] > 0.0 or i == k - 1]
    total = 0.0
    for i in kept:
        total += values[i] if values[i] > 0.0 else 0.0
    scale = 1.0 / total if total > 0.0 else 0.0
    kept.sort(key=lambda i: (-values[i] if values[i] > 0.0 else 0.0, i))
    priors = [(values[i] if values[i] > 0.0 else 0.0) * scale for i in kept]
    if total <= 0.0:
        priors[0] = 1.0
    return (np.array(kept, dtype=np.int16).tobytes(),
            np.array(priors, dtype=np.float64).tobytes())


def score_center(score_mean: float, size: int, zero_weight: float = 0.2,
                 scale: float = 0.75) -> float:
    """The dynamic utility's center: the root's expected score shrunk towards 0 by
    ``zero_weight``, at most ``scale`` sqrt(area) away from it."""
    center = score_mean * (1.0 - zero_weight)
    cap = size * scale
    return min(max(center, score_mean - cap), score_mean + cap)


# --------------------------------------------------------------------------- the two rules
def t3_cdf(z: float) -> float:
    """Student's t CDF with 3 degrees of freedom."""
    x = z / 1.7320508075688772
    return 0.5 + (x / (1.0 + x * x) + math.atan(x)) / 3.141592653589793


def _f64(buf: Buffer | array[float], name: str, want: int = -1,
         writable: bool = False) -> MutableSequence[float]:
    """A flat float64 memoryview of ``buf`` (checked like the C version)."""
    try:
        mv = memoryview(buf)
    except TypeError:
        raise ValueError(f"{name} must be a C-contiguous float64 buffer") from None
    if mv.format not in ("d", "@d", "=d") or mv.itemsize != 8:
        raise ValueError(f"{name} must be a float64 buffer (got format '{mv.format}')")
    if not mv.c_contiguous or (writable and mv.readonly):
        raise ValueError(f"{name} must be a {'writable ' if writable else ''}C-contiguous "
                         "float64 buffer")
    flat: Any = mv if mv.ndim == 1 else mv.cast("B").cast("d")
    if want >= 0 and len(flat) != want:
        raise ValueError(f"{name} must hold {want} float64 items (got {len(flat)})")
    return cast("MutableSequence[float]", flat)


def _children(st: Buffer | array[float], priors: Buffer | array[float], writable: bool = False
              ) -> tuple[MutableSequence[float], MutableSequence[float], int, int]:
    """(records, priors, children, children with records)."""
    pr = _f64(priors, "priors")
    k = len(pr)
    if k < 1:
        raise ValueError("a node needs at least one child")
    s = _f64(st, "st", writable=writable)
    if len(s) % NF or len(s) > k * NF:
        raise ValueError(f"st must hold {NF} fields for each of the first children (at most "
                         f"{k} children: {k * NF} items, got {len(s)})")
    return s, pr, k, len(s) // NF


def py_select_child(st: Buffer | array[float], priors: Buffer | array[float],
                    agg: Buffer | array[float], params: Buffer | array[float],
                    own_utility: float, sign: float, is_root: float, /) -> int:
    """Python version of ``select_child`` (see the module docstring)."""
    s, pr, k, r = _children(st, priors)
    a = _f64(agg, "agg", NF)
    p = _f64(params, "params", NPARAMS)
    own_u, sign = float(own_utility), float(sign)
    mass = 0.0
    tw = 0.0
    for i in range(r):
        b = i * NF
        if s[b + F_N] > 0.0 or s[b + F_VL] > 0.0:
            mass += pr[i]
            tw += s[b + F_W]
    parent_u = a[F_U]
    parent_w = a[F_W]
    if a[F_N] <= 0.0 or parent_w <= 1.0:
        stdev = p[P_STDEV_PRIOR]
    else:
        u_sq = parent_u * parent_u
        prior_var = p[P_STDEV_PRIOR] * p[P_STDEV_PRIOR]
        u2 = a[F_U2]
        if u2 < u_sq:
            u2 = u_sq
        var = ((u_sq + prior_var) * p[P_STDEV_PRIOR_WEIGHT] + u2 * parent_w) \
            / (p[P_STDEV_PRIOR_WEIGHT] + parent_w - 1.0) - u_sq
        stdev = math.sqrt(var if var > 0.0 else 0.0)
    factor = 1.0 + p[P_STDEV_SCALE] * (stdev / p[P_STDEV_PRIOR] - 1.0)
    if p[P_FPU_POW] >= 0.0:
        w_avg = math.pow(mass, p[P_FPU_POW])
        if w_avg > 1.0:
            w_avg = 1.0
        fpu_parent = w_avg * parent_u + (1.0 - w_avg) * own_u
    else:
        fpu_parent = parent_u
    red = (p[P_ROOT_FPU] if is_root else p[P_FPU]) * math.sqrt(mass)
    fpu = fpu_parent - sign * red
    scaling = (p[P_CPUCT] + p[P_CPUCT_LOG] * math.log((tw + p[P_CPUCT_BASE]) / p[P_CPUCT_BASE])) \
        * math.sqrt(tw + 0.01) * factor
    best_i, best = 0, 0.0
    for i in range(min(r + 1, k)):  # the children with records, then the best new child
        b = i * NF
        if i == r or s[b + F_N] <= 0.0 or s[b + F_W] <= 0.0:
            u, w = fpu, 0.0
        else:
            u, w = s[b + F_U], s[b + F_W]
        vl = s[b + F_VL] if i < r else 0.0
        if vl > 0.0:
            vlw = vl * p[P_VL_WEIGHT]
            vlu = -sign * p[P_RADIUS]
            frac = vlw / (vlw + (w if w > 0.25 else 0.25))
            u = u + (vlu - u) * frac
            w = w + vlw
        v = scaling * pr[i] / (1.0 + w) + sign * u
        if i == 0 or v > best:
            best, best_i = v, i
    return best_i


def _noise_prune(su: list[float], wa: list[float], priors: list[float], scale: float) -> float:
    """Noise pruning of ``update_node`` (in place on the weights ``wa``); the new total."""
    u_so_far = w_so_far = pol_so_far = 0.0
    for j in range(len(su)):
        u = su[j]
        old_w = wa[j]
        raw = priors[j] if priors[j] > 1e-30 else 1e-30
        new_w = old_w
        if w_so_far > 0.0 and pol_so_far > 0.0:
            gap = u_so_far / w_so_far - u
            if gap > 0.0:
                lenient = 2.0 * (w_so_far * raw / pol_so_far)
                if old_w > lenient:
                    excess = old_w - lenient
                    new_w = old_w - excess * (1.0 - math.exp(-gap / scale))
                    wa[j] = new_w
        u_so_far += u * new_w
        w_so_far += new_w
        pol_so_far += raw
    return w_so_far


def _value_weight(su: list[float], wa: list[float], cur_tw: float, exponent: float) -> None:
    """Value weighting of ``update_node`` (in place on the weights ``wa``)."""
    simple = 0.0
    for j in range(len(su)):
        simple += su[j] * wa[j]
    simple = simple / cur_tw
    total = 0.0
    for j in range(len(su)):
        precision = 1.5 * math.sqrt(wa[j])
        stdev = math.sqrt(0.00000001 + 1.0 / precision)
        z = (su[j] - simple) / stdev
        cdf = t3_cdf(z) + 0.0001
        wa[j] = wa[j] * math.pow(cdf, exponent)
        total += wa[j]
    scale = cur_tw / total
    for j in range(len(su)):
        wa[j] = wa[j] * scale


def py_update_node(st: Buffer | array[float], priors: Buffer | array[float],
                   own: Buffer | array[float], params: Buffer | array[float], sign: float,
                   agg: Buffer | array[float], parent_st: Buffer | array[float] | None,
                   slot: int, vl_release: float, bias: Buffer | array[float] | None, /) -> None:
    """Python version of ``update_node`` (see the module docstring)."""
    s, pr, _, r = _children(st, priors)
    o = _f64(own, "own", NOWN, writable=True)
    p = _f64(params, "params", NPARAMS)
    sign = float(sign)
    a = _f64(agg, "agg", NF, writable=True)
    pst = None
    if parent_st is not None:
        pst = _f64(parent_st, "parent_st", writable=True)
        slot = int(slot)
        if slot < 0 or (slot + 1) * NF > len(pst):
            raise ValueError(f"slot {slot} is outside parent_st ({len(pst) // NF} children)")
    bucket = None if bias is None else _f64(bias, "bias", NBIAS, writable=True)
    idx: list[int] = []
    su: list[float] = []
    wa: list[float] = []
    orig_tw = 0.0
    visits = 0.0
    for i in range(r):
        b = i * NF
        if s[b + F_N] <= 0.0 or s[b + F_W] <= 0.0:
            continue
        idx.append(i)
        su.append(sign * s[b + F_U])
        wa.append(s[b + F_W])
        orig_tw += s[b + F_W]
        visits += s[b + F_N]
    cur_tw = orig_tw
    if p[P_NOISE_PRUNE] != 0.0 and len(idx) > 1 and orig_tw > 0.00001:
        cur_tw = _noise_prune(su, wa, [pr[i] for i in idx], p[P_NOISE_SCALE])
    if p[P_VALUE_WEIGHT_EXP] != 0.0 and idx and cur_tw > 0.0:
        _value_weight(su, wa, cur_tw, p[P_VALUE_WEIGHT_EXP])
    s_wl = s_sm = s_sm2 = s_ld = s_u = s_u2 = s_w2 = 0.0
    for j in range(len(idx)):
        b = idx[j] * NF
        w = wa[j]
        ws = w / s[b + F_W]
        s_wl += w * s[b + F_WL]
        s_sm += w * s[b + F_SM]
        s_sm2 += w * s[b + F_SM2]
        s_ld += w * s[b + F_LD]
        s_u += w * s[b + F_U]
        s_u2 += w * s[b + F_U2]
        s_w2 += ws * ws * s[b + F_W2]
    ow, ou = o[O_W], o[O_U]
    if bucket is not None and p[P_BIAS_FACTOR] != 0.0:
        if cur_tw > 1e-10:
            bw = math.pow(orig_tw, p[P_BIAS_EXP])
            delta = (s_u / cur_tw - ou) * bw
            bucket[B_DELTA] += delta - o[O_BIAS_DELTA]
            bucket[B_WEIGHT] += bw - o[O_BIAS_WEIGHT]
            o[O_BIAS_DELTA] = delta
            o[O_BIAS_WEIGHT] = bw
        if bucket[B_WEIGHT] > 0.001:
            ou = ou + p[P_BIAS_FACTOR] * bucket[B_DELTA] / bucket[B_WEIGHT]
    s_wl += o[O_WL] * ow
    s_sm += o[O_SM] * ow
    s_sm2 += o[O_SM2] * ow
    s_ld += o[O_LD] * ow
    s_u += ou * ow
    s_u2 += ou * ou * ow
    s_w2 += ow * ow
    wsum = cur_tw + ow
    a[F_N] = visits + 1.0
    a[F_W] = wsum
    a[F_W2] = s_w2
    a[F_U] = s_u / wsum
    a[F_U2] = s_u2 / wsum
    a[F_WL] = s_wl / wsum
    a[F_SM] = s_sm / wsum
    a[F_SM2] = s_sm2 / wsum
    a[F_LD] = s_ld / wsum
    if pst is not None:
        b = slot * NF
        vl = pst[b + F_VL] - float(vl_release)
        for j in range(NF):
            pst[b + j] = a[j]
        pst[b + F_VL] = vl
    a[F_VL] = 0.0


# --------------------------------------------------------------------------- implementation
_c: ModuleType | None = extension("kosumi.engine._puct")

HAVE_C: bool = _c is not None
children: Callable[..., tuple[bytes, bytes]] = _c.children if _c is not None else py_children
score_utility: Callable[..., float] = (_c.score_utility if _c is not None
                                       else py_score_utility)
select_child: Callable[..., int] = _c.select_child if _c is not None else py_select_child
update_node: Callable[..., Any] = _c.update_node if _c is not None else py_update_node
