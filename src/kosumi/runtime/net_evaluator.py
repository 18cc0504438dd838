"""``NetEvaluator``: an ``Evaluator`` over any backend, doing the network-independent work once.

For a batch of positions it: splits the batch by board size; encodes the config's feature set;
optionally stacks the 8 (or fewer) symmetric versions of every position into one forward call;
runs the backend; maps outputs back through the inverse symmetries; masks illegal points
(``GameState.legal_mask``; pass is always legal) BEFORE the softmax, so they get exactly 0;
turns the value into the side to move's win probability; and averages over the symmetries.

Value conventions (side to move's view):

- ``wdl``: p = softmax(win, loss, noResult); winrate = win + noResult / 2 (a no-result counts as
  half a win, i.e. 0.5 + (win - loss) / 2, KataGo's utility scale mapped to [0, 1]).
- ``tanh``: winrate = (1 + tanh(v)) / 2 (Leela Zero). A config with ``value_view`` "black"
  (Leela Zero version-2 weights) has its raw value negated where White is to move first.
- ``score_lead`` is in points; ``ownership`` = tanh(raw), +1 = the side to move owns the point.

The ``katago`` head adapter applies KataGo's own post-processing to its raw outputs, the same
for every backend: without simple ko (positional superko) there is no "no result", so its logit
is dropped before the softmax; score mean = raw0 * 20, stdev = softplus(raw1) * 20, lead =
raw2 * 20 (20: each multiplier of model versions before 13; later files give their own, kept in
the config's ``katago.post``), mean and lead then multiplied by (1 - noResult) (a no-result
scores 0), as KataGo reports them.

With ``symmetries=8`` the result is exactly equivariant: evaluating a transformed position gives
the transformed policy/ownership (up to float rounding) and the same value. ``symmetries=k < 8``
uses the first k symmetries 0..k-1 (cheaper, not equivariant); a sequence of indices uses those
(``(4,)``: the net on the transposed board, mapped back). ``symmetries=0`` evaluates every
position under one symmetry drawn at random (a seeded generator per evaluator), like KataGo's
``nnRandomize``: a search then sees the net's orientation errors as noise that averages out
over its nodes, at the cost of one evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kosumi.errors import KosumiError
from kosumi.go.board import KO_SIMPLE, GameState
from kosumi.go.coords import WHITE, symmetry_permutation
from kosumi.nets.config import NetConfig
from kosumi.nets.features import get_feature_set
from kosumi.nets.katago_layout import DEFAULT_POST, has_attention
from kosumi.runtime.backend import Backend
from kosumi.runtime.evaluator import (
    Evaluation,
    Evaluator,
    legal_with_pass,
    map_same_size,
    symmetric_inputs,
    to_original_frame,
)
from kosumi.runtime.softmax import legal_softmax


def wdl_probabilities(value: np.ndarray) -> np.ndarray:
    """Raw wdl logits [..., 3] -> (win, loss, noResult) probabilities, float64."""
    v = value.astype(np.float64)
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    p: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return p




ATTENTION_BUDGET = 16 * 361 * 361  # score-matrix entries per head per forward pass


def _softplus(x: np.ndarray) -> np.ndarray:
    y: np.ndarray = np.logaddexp(0.0, x)
    return y


def win_probability(value: np.ndarray, kind: str) -> np.ndarray:
    """Raw value outputs [..., 3] (wdl logits) or [..., 1] (pre-tanh) -> win probability [...]."""
    if kind == "wdl":
        p = wdl_probabilities(value)
        w = p[..., 0] + 0.5 * p[..., 2]
    else:
        w = 0.5 * (1.0 + np.tanh(value[..., 0].astype(np.float64)))
    return np.clip(w, 0.0, 1.0)


class NetEvaluator(Evaluator):
    """Evaluate positions with a network run by ``backend`` and described by ``config``."""

    def __init__(self, backend: Backend, config: NetConfig, symmetries: int | Sequence[int] = 1,
                 name: str = "net", max_batch: int = 256):
        self.random_symmetry = False
        if not isinstance(symmetries, Sequence):  # a count: the first k symmetries
            if not 0 <= int(symmetries) <= 8:
                raise KosumiError(f"symmetries must be 0..8 (0: a random one), not {symmetries}")
            self.random_symmetry = int(symmetries) == 0
            syms = tuple(range(max(1, int(symmetries))))
        else:  # chosen symmetries, e.g. (4,): the transpose alone
            syms = tuple(int(j) for j in symmetries)
            if not syms or not all(0 <= j < 8 for j in syms):
                raise KosumiError(f"symmetries must be indices 0..7, not {list(symmetries)}")
        self.backend = backend
        self.config = config
        post = config.katago.get("post", DEFAULT_POST)  # mean, stdev, lead are predicted / these
        self._score_mult = (post["score_mean"], post["score_stdev"], post["lead"])
        self.features = get_feature_set(config.features)
        self.symmetries = syms
        self.name = name
        self.max_batch = max(1, int(max_batch))
        self._attention = config.head == "katago" and has_attention(config.katago)
        self._rng = np.random.default_rng(0)

    def supports_size(self, size: int) -> bool:
        return self.config.supports_size(size)

    def evaluate(self, states: Sequence[GameState]) -> list[Evaluation]:
        for size in {s.size for s in states}:
            if not self.supports_size(size):
                sizes = ",".join(map(str, self.config.board_sizes))
                raise KosumiError(f"{self.name}: this net does not play {size}x{size} "
                                  f"(board sizes: {sizes})")
        return map_same_size(states, self.batch_for, self._evaluate_same_size)

    def batch_for(self, size: int) -> int:
        """Positions per forward pass on this board size: ``max_batch``, or for a net with
        attention as many as keep its score matrices (positions x points^2 per head) within
        those of 16 positions on 19x19 (16 on 19x19, 73 on 13x13, ``max_batch`` on 9x9), which
        bounds the memory (4.9 GB labelling 256 19x19 positions with the b10c384, 0.56 GB at
        16) at no cost in speed."""
        if not self._attention:
            return self.max_batch
        return max(1, min(self.max_batch, ATTENTION_BUDGET // (size * size) ** 2))

    def _evaluate_same_size(self, states: list[GameState]) -> list[Evaluation]:
        n = states[0].size
        nn = n * n
        bsz = len(states)
        syms = self.symmetries
        k = len(syms)
        planes, glob = self.features.encode(states)
        drawn = None
        if self.random_symmetry:  # one random symmetry per position: permute its planes
            drawn = self._rng.integers(0, 8, bsz)
            flat = planes.reshape(bsz, planes.shape[1], nn)
            for i, sym in enumerate(drawn):
                if sym:
                    turned = np.empty_like(flat[i])
                    turned[:, symmetry_permutation(n, int(sym))] = flat[i]
                    flat[i] = turned
        out = self.backend.forward(*symmetric_inputs(planes, glob, syms))
        legal = legal_with_pass(states)
        logits = out["policy"].reshape(k, bsz, nn + 1)
        own_raw = out.get("ownership")
        own = None if own_raw is None else np.tanh(own_raw.reshape(k, bsz, nn))
        if syms != (0,):  # back to the original frame (any symmetry but the identity alone)
            logits = logits.copy()
            to_original_frame(n, syms, logits, own)
        if drawn is not None and drawn.any():
            logits = logits.copy()
            for i, sym in enumerate(drawn):
                if sym:
                    perm = symmetry_permutation(n, int(sym))
                    logits[0, i, :nn] = logits[0, i, perm]
                    if own is not None:
                        own[0, i] = own[0, i, perm]
        policy = legal_softmax(logits, legal[None])
        raw_value = out["value"].reshape(k, bsz, -1)
        if self.config.value_view == "black":  # Leela Zero v2: Black's view -> side to move's
            white = np.array([s.to_move == WHITE for s in states])
            raw_value = np.where(white[None, :, None], -raw_value, raw_value)
        katago = self.config.head == "katago"
        if katago:  # no "no result" without simple ko (KataGo: superko rules)
            simple = np.array([s.rules.ko == KO_SIMPLE for s in states])
            if not simple.all():
                raw_value = raw_value.astype(np.float64)
                raw_value[:, ~simple, 2] = -np.inf
        # (this runs at every search leaf, where each numpy call on a small array costs
        # microseconds: few calls, no reductions that a Python loop does cheaper)
        wdl = None
        if self.config.value == "wdl":  # one softmax gives both the wdl and the win probability
            wdl_k = wdl_probabilities(raw_value)
            value_k = wdl_k[..., 0] + 0.5 * wdl_k[..., 2]
            wdl = wdl_k[0] if k == 1 else wdl_k.mean(axis=0)
        else:
            value_k = win_probability(raw_value, self.config.value)
        lead = out.get("score_lead")
        lead = None if lead is None else lead.reshape(k, bsz)
        means = stdevs = None
        if katago:
            sc = out["score"].reshape(k, bsz, -1).astype(np.float64)
            keep = 1.0 - wdl_k[..., 2]
            mean_mult, stdev_mult, lead_mult = self._score_mult
            lead = sc[..., 2] * lead_mult * keep
            means = (sc[..., 0] * mean_mult * keep).mean(axis=0).tolist()
            stdevs = (_softplus(sc[..., 1]) * stdev_mult).mean(axis=0).tolist()
        if k == 1:
            policy = policy[0]
            values = value_k[0].tolist()
            leads = None if lead is None else lead[0].tolist()
            own = None if own is None else own[0].astype(np.float32, copy=False)
        else:  # average over the symmetries
            policy = policy.mean(axis=0, dtype=np.float64)
            policy = (policy / policy.sum(axis=1, keepdims=True)).astype(np.float32)
            values = value_k.mean(axis=0).tolist()
            leads = None if lead is None else lead.mean(axis=0).tolist()
            own = None if own is None else own.mean(axis=0).astype(np.float32)
        return [
            Evaluation(
                policy=policy[i],
                value=min(max(values[i], 0.0), 1.0),
                score_lead=None if leads is None else leads[i],
                ownership=None if own is None else own[i],
                wdl=None if wdl is None else wdl[i],
                score_mean=None if means is None else means[i],
                score_stdev=None if stdevs is None else stdevs[i],
            )
            for i in range(bsz)
        ]

    def close(self) -> None:
        self.backend.close()
