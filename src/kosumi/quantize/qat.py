"""Quantization-aware training: fine-tune a net through the very quantization it will run with.

``FakeQuantGraph`` runs a net's inference graph (``nets.graph``) in torch over its folded
tensors, with every weight of an int8 layer fake-quantized per output channel (the scale from
the weight's current range, as ``kosumi quantize`` will compute it) and every value the integer
plan quantizes fake-quantized with the scheme's fixed scale and zero point: y = (clamp(round(x /
s) + z) - z) * s, the gradient passed straight through inside the clamp range and zero outside
(the straight-through estimator). ReLUs fused into a uint8 output are ReLUs here. The
activation scales start from calibration and are learned with the weights (LSQ: the scale's
gradient comes through the same formula; learned as log s, so they stay positive), unless
``learn_scales`` is off.

``run_qat`` fine-tunes it on a label folder (``kosumi label``) with distill's trainer
(``distill.loop``: the same loop, schedule (cosine, no warm-up), ``--stop-after`` and resume
state as ``kosumi distill``): the loss is distill's KD loss (policy KL, value cross-entropy,
ownership and score terms) against the teacher's targets, or against the float net's own outputs
(``target="float"``: self-distillation, the labels' positions only). The state (weights, Adam
moments, RNG) is saved atomically every ``save_every`` steps beside the output, and
``resume=True`` continues exactly. The result is quantized again with the same scheme (the
learned activation scales; the weight scales of the trained weights): ``kosumi quantize MODEL
--bits 8 --qat --data LABELS --steps N --out Q``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.nets.config import NetConfig
from kosumi.nets.features import get_feature_set
from kosumi.nets.fold import FoldedNet
from kosumi.nets.quant import ActQuant, integer_plan
from kosumi.quantize.record import QatOutcome, QatRecord, QatStop
from kosumi.runtime.evaluator import legal_with_pass

STATE_SUFFIX = ".qat-state"
ILLEGAL = -1e9


def _key(name: str) -> str:
    return name.replace(".", "__")


class _RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad


def _round_ste(x: torch.Tensor) -> torch.Tensor:
    """round(x) forward, the identity backward (torch types ``Function.apply`` loosely)."""
    return cast(torch.Tensor, _RoundSTE.apply(x))  # type: ignore[no-untyped-call]


def fake_quant_act(x: torch.Tensor, act: ActQuant, scale: torch.Tensor | None = None
                   ) -> torch.Tensor:
    """(clamp(round(x / s) + z) - z) * s, straight-through inside the clamp range. ``scale``: a
    learned s (a tensor) in place of the scheme's; its gradient is then LSQ's (Esser et al.
    2020): (q - z) - x / s inside the range, the clamp bound minus z outside it."""
    s = act.scale if scale is None else scale
    q = _round_ste(x / s) + act.zero_point
    return (torch.clamp(q, act.qmin, act.qmax) - act.zero_point) * s


def fake_quant_weight(w: torch.Tensor, weight_max: int) -> torch.Tensor:
    """Per output channel symmetric, the scale from the current range (no gradient through it)."""
    amax = w.detach().reshape(w.shape[0], -1).abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / weight_max, torch.full_like(amax, 1.0 / weight_max))
    scale = scale.reshape((-1,) + (1,) * (w.dim() - 1))
    return torch.clamp(_round_ste(w / scale), -weight_max, weight_max) * scale


class FakeQuantGraph(nn.Module):
    """The inference graph in torch (NCHW), fake-quantized where the scheme says (see the module
    docstring); ``quantize=False`` runs it in plain float (the float net, for targets)."""

    def __init__(self, net: FoldedNet, layers: dict[str, str], acts: dict[str, ActQuant],
                 weight_max: int, quantize: bool = True, learn_scales: bool = False):
        super().__init__()
        self.config = net.config
        self.graph = net.graph
        plan = integer_plan(self.graph, layers, acts)
        self.source = {v: plan.shared.get(v, v) for v in plan.quantized}
        self.acts = {v: acts[src] for v, src in self.source.items()}
        # the activation scales, learned (as log s) when asked; a flatten shares its input's
        self.log_scales = nn.ParameterDict({_key(src): nn.Parameter(
            torch.tensor(math.log(acts[src].scale), dtype=torch.float32))
            for src in sorted(set(self.source.values()))} if learn_scales else {})
        self.int_layers = {n for n, m in layers.items() if m == "int8"}
        self.weight_max = weight_max
        self.quantize = quantize
        self.p = nn.ParameterDict({_key(k): nn.Parameter(torch.from_numpy(
            np.array(v, dtype=np.float32))) for k, v in net.tensors.items()})

    def tensor(self, name: str) -> torch.Tensor:
        return cast(torch.Tensor, self.p[_key(name)])

    def folded(self) -> FoldedNet:
        """The net with the tensors as trained so far."""
        return FoldedNet(self.config, {k.replace("__", "."): v.detach().cpu().numpy().astype(
            np.float32) for k, v in self.p.items()})

    def learned_acts(self) -> dict[str, ActQuant]:
        """The activation quantizers with the learned scales (empty unless learn_scales)."""
        out = {}
        for v, src in self.source.items():
            if _key(src) in self.log_scales:
                scale = float(torch.exp(self.log_scales[_key(src)].detach()))
                out[src] = replace(self.acts[v], scale=scale)
        return out

    def _fake_quant(self, x: torch.Tensor, name: str) -> torch.Tensor:
        key = _key(self.source[name])
        scale = torch.exp(self.log_scales[key]) if key in self.log_scales else None
        return fake_quant_act(x, self.acts[name], scale)

    def _weight(self, name: str) -> torch.Tensor:
        w = self.tensor(f"{name}.weight")
        return fake_quant_weight(w, self.weight_max) if self.quantize and \
            name in self.int_layers else w

    def forward(self, planes: torch.Tensor, globals: torch.Tensor | None
                ) -> dict[str, torch.Tensor]:
        v: dict[str, torch.Tensor] = {"planes": planes}
        if globals is not None:
            v["globals"] = globals
        for name in ("planes", "globals"):
            if self.quantize and name in self.acts and name in v:
                v[name] = self._fake_quant(v[name], name)
        for n in self.graph.nodes:
            y = self._op(n, [v[x] for x in n.inputs])
            if self.quantize and n.output in self.acts:
                y = self._fake_quant(y, n.output)
            v[n.output] = y
        return {k: v[name] for k, name in self.graph.outputs.items()}

    def _op(self, n: Any, xs: list[torch.Tensor]) -> torch.Tensor:
        op = n.op
        if op == "conv":
            w = self._weight(n.name)
            return F.conv2d(xs[0], w, self.tensor(f"{n.name}.bias"), padding=w.shape[2] // 2)
        if op == "linear":
            return F.linear(xs[0], self._weight(n.name), self.tensor(f"{n.name}.bias"))
        if op == "relu":
            return F.relu(xs[0])
        if op == "add":
            return xs[0] + xs[1]
        if op == "add_bias":
            return xs[0] + xs[1][:, :, None, None]
        if op == "affine":
            s, b = self.tensor(f"{n.name}.scale"), self.tensor(f"{n.name}.bias")
            return xs[0] * s[None, :, None, None] + b[None, :, None, None]
        if op == "mean_max":
            return torch.cat((xs[0].mean(dim=(2, 3)), xs[0].amax(dim=(2, 3))), dim=1)
        if op == "area":
            return xs[0][:, 0].sum(dim=(1, 2)).unsqueeze(1)
        if op in ("kata_gpool", "kata_vpool"):
            x, area = xs
            mean = x.sum(dim=(2, 3)) / area
            off = area.sqrt() - 14.0
            third = x.amax(dim=(2, 3)) if op == "kata_gpool" else mean * (off * off / 100 - 0.1)
            return torch.cat((mean, mean * (off / 10.0), third), dim=1)
        if op == "flatten":
            return xs[0].flatten(1)
        if op == "concat":
            return torch.cat(xs, dim=1)
        if op == "squeeze":
            return xs[0][:, 0]
        return self._transformer_op(n, xs)

    def _transformer_op(self, n: Any, xs: list[torch.Tensor]) -> torch.Tensor:
        """The ops of KataGo's later nets, as ``kosumi.nets.katago_net`` runs them."""
        from kosumi.nets.katago_net import act_fn, attend

        op = n.op
        if op in ("silu", "mish"):
            return cast(torch.Tensor, act_fn(op)(xs[0]))
        if op == "mul":
            return xs[0] * xs[1]
        if op == "rmsnorm":
            dims = (1, 2, 3) if n.attrs["spatial"] else (1,)
            return xs[0] * torch.rsqrt((xs[0] * xs[0]).mean(dim=dims, keepdim=True)
                                       + n.attrs["eps"])
        if op == "attention":
            freqs = self.tensor(f"{n.name}.rope_freqs") if n.attrs["rope"] == "learned" else None
            return attend(xs[0], xs[1], xs[2], n.attrs, freqs)
        raise KosumiError(f"QAT: unknown op {op!r} in layer {n.name}")


@dataclass
class QatOptions:
    """How to fine-tune (see the module docstring)."""

    steps: int = 500
    batch: int = 128
    lr: float = 2e-5  # 1e-4 drifted a b6c64 away from its float self (benchmarks/RESULTS.md)
    target: str = "float"  # "float" (the float net's outputs) | "teacher" (the labels)
    seed: int = 0
    save_every: int = 100
    ownership_weight: float = 0.5
    score_weight: float = 0.1
    threads: int | None = None
    stop_after: int | None = None  # stop this invocation after K steps (then resume)
    learn_scales: bool = True  # learn the activation scales too (LSQ), not only the weights
    scale_lr: float = 0.1  # the log-scales' learning rate, as a share of ``lr``


@dataclass
class QatData:
    """Training positions and, for ``target="teacher"``, their labels, grouped by board size."""

    states: dict[int, list[GameState]]
    policy: dict[int, np.ndarray]
    value: dict[int, np.ndarray]
    score: dict[int, np.ndarray | None]
    ownership: dict[int, np.ndarray | None]
    content_hash: str

    @property
    def count(self) -> int:
        return sum(len(s) for s in self.states.values())


def read_qat_data(path: str | os.PathLike[str], board_sizes: list[int],
                  need_labels: bool = True) -> QatData:
    """A label folder's positions and targets of the board sizes the net plays (a positions
    folder too when ``need_labels`` is False: self-distillation needs positions only)."""
    from kosumi.distill.labels import LabelRecord, LabelStore

    path = Path(path)
    try:
        fmt = json.loads((path / "manifest.json").read_text()).get("format")
    except (OSError, ValueError):
        fmt = None
    if fmt == "kosumi-positions" and not need_labels:
        from kosumi.distill.positions import PositionStore

        records: Any = [LabelRecord(position=p, policy=np.zeros(1, np.float32),
                                    value=np.zeros(3, np.float32), score_lead=None,
                                    ownership=None, key=k)
                        for k, p in PositionStore(path).items()]
    else:
        if fmt == "kosumi-positions":
            raise KosumiError(f"{path}: a positions folder has no teacher targets; label it "
                              "(kosumi label) or use --qat-target float")
        records = LabelStore(path).records()
    h = hashlib.sha256()
    groups: dict[int, list[Any]] = {}
    for rec in records:
        if rec.position.board_size in board_sizes:
            groups.setdefault(rec.position.board_size, []).append(rec)
            h.update(int(rec.key).to_bytes(8, "little"))
    if not groups:
        raise KosumiError(f"{path}: no labelled positions of a board size the net plays "
                          f"({','.join(map(str, board_sizes))})")
    data = QatData({}, {}, {}, {}, {}, h.hexdigest())
    for n, recs in sorted(groups.items()):
        data.states[n] = [r.position.to_state() for r in recs]
        if not need_labels:
            continue
        data.policy[n] = np.stack([r.policy for r in recs]).astype(np.float32)
        data.value[n] = np.stack([r.value for r in recs]).astype(np.float32)
        leads = [r.score_lead for r in recs]
        data.score[n] = None if all(x is None for x in leads) else np.array(
            [np.nan if x is None else x for x in leads], np.float32)
        owns = [r.ownership for r in recs]
        data.ownership[n] = None if all(o is None for o in owns) else np.stack(
            [np.full(n * n, np.nan, np.float32) if o is None else o for o in owns])
    return data


def _masked(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    return torch.where(legal, logits, torch.full_like(logits, ILLEGAL))


class QatTargets(TypedDict):
    """What QAT learns: the float net's outputs or the labels' teacher targets."""

    policy: torch.Tensor
    value: torch.Tensor
    ownership: torch.Tensor | None
    score: torch.Tensor | None


def qat_loss(config: NetConfig, out: dict[str, torch.Tensor], legal: torch.Tensor,
             targets: QatTargets, options: QatOptions
             ) -> tuple[torch.Tensor, dict[str, float]]:
    """distill's KD loss on raw outputs (masked policy) against soft targets."""
    from kosumi.distill import metrics as M

    logits = _masked(out["policy"], legal)
    kl = M.policy_kl(targets["policy"], logits)
    parts = {"policy_kl": kl.mean()}
    value = out["value"]
    parts["value"] = M.value_loss(targets["value"], value, config.value).mean()
    loss = parts["policy_kl"] + parts["value"]
    own, t_own = out.get("ownership"), targets.get("ownership")
    if own is not None and t_own is not None and options.ownership_weight > 0:
        ok = ~torch.isnan(t_own).any(dim=1)
        if ok.any():
            parts["ownership"] = M.ownership_mse(t_own[ok], own[ok]).mean()
            loss = loss + options.ownership_weight * parts["ownership"]
    lead = out.get("score_lead")
    if lead is None and "score" in out:  # KataGo: the raw lead / 20
        lead = out["score"][:, 2] * 20.0
    t_lead = targets.get("score")
    if lead is not None and t_lead is not None and options.score_weight > 0:
        ok = ~torch.isnan(t_lead)
        if ok.any():
            parts["score"] = M.score_huber(t_lead[ok], lead[ok]).mean()
            loss = loss + options.score_weight * parts["score"]
    return loss, {k: float(v.detach()) for k, v in parts.items()}


def _float_targets(config: NetConfig, out: dict[str, torch.Tensor], legal: torch.Tensor
                   ) -> QatTargets:
    """The float net's outputs as soft targets (policy over legal points, wdl probabilities
    or the win probability as [win, loss, 0], tanh ownership, the lead)."""
    with torch.no_grad():
        policy = torch.softmax(_masked(out["policy"], legal), dim=-1)
        if config.value == "wdl":
            value = torch.softmax(out["value"], dim=-1)
        else:
            w = 0.5 * (1 + torch.tanh(out["value"].reshape(-1)))
            value = torch.stack((w, 1 - w, torch.zeros_like(w)), dim=1)
        own = torch.tanh(out["ownership"]) if "ownership" in out else None
        lead = out.get("score_lead")
        if lead is None and "score" in out:
            lead = out["score"][:, 2] * 20.0
    return {"policy": policy, "value": value, "ownership": own, "score": lead}


def _optimizer(model: FakeQuantGraph, options: QatOptions) -> torch.optim.Optimizer:
    """Adam over the weights and (at ``scale_lr`` of the rate) the log-scales; each group's
    ``rate`` scales the schedule's learning rate."""
    groups: list[dict[str, Any]] = [{"params": list(model.p.parameters()), "rate": 1.0}]
    if len(model.log_scales):
        groups.append({"params": list(model.log_scales.parameters()),
                       "rate": options.scale_lr})
    return torch.optim.Adam(groups, lr=options.lr)


def _identity(options: QatOptions, data: QatData, layers: dict[str, str],
              acts: dict[str, ActQuant], weight_max: int) -> dict[str, Any]:
    """What a resumed run must share with the run it continues (saved in its state)."""
    return {"options": asdict(options), "data_hash": data.content_hash, "layers": layers,
            "acts": {k: v.to_dict() for k, v in acts.items()}, "weight_max": weight_max}


def _resume(state_path: Path, identity: dict[str, Any], model: FakeQuantGraph,
            optimizer: torch.optim.Optimizer) -> tuple[int, list[dict[str, float]]]:
    """Put a saved run back (``distill.train_state``'s state file): (its step, its history)."""
    from kosumi.distill.train_state import load_training_state, read_training_state

    saved, tensors = read_training_state(state_path)
    for key in ("data_hash", "layers", "acts", "weight_max"):
        if json.dumps(saved.get(key), sort_keys=True) != json.dumps(identity[key],
                                                                    sort_keys=True):
            raise KosumiError(f"{state_path}: --resume with another {key.replace('_', ' ')}"
                              " than the run it continues")
    load_training_state(state_path, saved, tensors, model, optimizer)
    return int(saved["step"]), list(saved.get("history", []))


def _targets(config: NetConfig, data: QatData, n: int, idx: np.ndarray, options: QatOptions,
             float_net: FakeQuantGraph, x: torch.Tensor, g: torch.Tensor | None,
             legal: torch.Tensor) -> QatTargets:
    """A batch's targets: the float net's outputs, or the labels' teacher targets."""
    if options.target == "float":
        return _float_targets(config, float_net(x, g), legal)
    score, ownership = data.score[n], data.ownership[n]
    return {"policy": torch.from_numpy(data.policy[n][idx]),
            "value": torch.from_numpy(data.value[n][idx]),
            "score": None if score is None else torch.from_numpy(score[idx]),
            "ownership": None if ownership is None else torch.from_numpy(ownership[idx])}


def _record(options: QatOptions, data: QatData, history: list[dict[str, float]],
            learned: dict[str, ActQuant], acts: dict[str, ActQuant]) -> QatRecord:
    record = QatRecord(steps=options.steps, target=options.target, lr=options.lr,
                       batch=options.batch, positions=data.count,
                       final_loss_terms={k: float(np.mean([h[k] for h in history if k in h]))
                                         for k in (history[0] if history else {})})
    if learned:
        moved = [abs(math.log(a.scale / acts[k].scale)) for k, a in learned.items()]
        record.scales_learned = len(learned)
        record.largest_scale_change = round(math.exp(max(moved)), 3)
    return record


def run_qat(net: FoldedNet, layers: dict[str, str], acts: dict[str, ActQuant], weight_max: int,
            data: QatData, options: QatOptions, state_path: Path, resume: bool = False,
            progress: bool = False, say: Any = None) -> QatOutcome | QatStop:
    """Fine-tune (see the module docstring): the trained net, the learned activation
    quantizers (empty with ``learn_scales`` off) and the run's record; or, stopped by
    ``stop_after``, where it stopped (its state saved)."""
    from kosumi.distill.loop import Schedule, run_steps
    from kosumi.distill.train_state import save_training_state
    from kosumi.progress import progress_bar

    say = say or (lambda m: None)
    if options.target not in ("teacher", "float"):
        raise KosumiError(f"--qat-target {options.target!r}: use teacher or float")
    if options.steps < 1 or options.batch < 1 or not options.lr > 0:
        raise KosumiError("--steps, --qat-batch and --lr must be positive")
    if options.threads:
        torch.set_num_threads(int(options.threads))
    torch.manual_seed(options.seed)
    config = net.config
    model = FakeQuantGraph(net, layers, acts, weight_max, learn_scales=options.learn_scales)
    float_net = FakeQuantGraph(net, layers, acts, weight_max, quantize=False).eval()
    for p in float_net.parameters():
        p.requires_grad_(False)
    optimizer = _optimizer(model, options)
    identity = _identity(options, data, layers, acts, weight_max)
    start = 0
    history: list[dict[str, float]] = []  # the loss terms of the last steps (kept on resume)
    if resume:
        start, history = _resume(state_path, identity, model, optimizer)
        say(f"resuming QAT at step {start}")
    fs = get_feature_set(config.features)
    sizes = sorted(data.states)
    weights = np.array([len(data.states[n]) for n in sizes], dtype=np.float64)
    weights /= weights.sum()

    def step(k: int, lr: float) -> float:
        nonlocal history
        rng = np.random.default_rng([options.seed, k])
        n = sizes[int(rng.choice(len(sizes), p=weights))]
        idx = rng.choice(len(data.states[n]), size=min(options.batch, len(data.states[n])),
                         replace=False)
        states = [data.states[n][i] for i in idx]
        planes, glob = fs.encode(states)
        legal = torch.from_numpy(legal_with_pass(states))
        x = torch.from_numpy(planes)
        g = None if glob is None else torch.from_numpy(glob)
        targets = _targets(config, data, n, idx, options, float_net, x, g, legal)
        model.train()
        for group in optimizer.param_groups:
            group["lr"] = lr * group["rate"]
        loss, parts = qat_loss(config, model(x, g), legal, targets, options)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        history = [*history[-49:], parts]
        return float(loss.detach())

    def save(done: int) -> None:
        save_training_state(state_path, model, optimizer,
                            {**identity, "step": done, "history": history})

    with progress_bar(options.steps - start, "QAT", unit="step", enabled=progress) as bar:
        end = run_steps(start, Schedule(options.steps, options.lr), step,
                        lambda done, last: save(done), options.save_every, options.stop_after,
                        after=lambda done, loss, last: bar.advance(1, info=f"loss {loss:.4f}"))
        if end.stopped:
            bar.discard()
    if end.stopped:
        return QatStop(end.step, str(state_path))
    learned = model.learned_acts()
    return QatOutcome(model.folded(), learned, _record(options, data, history, learned, acts))
