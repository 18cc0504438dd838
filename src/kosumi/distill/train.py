"""``kosumi distill``: train a small student network on a teacher's labels.

    kosumi distill --data LABELS [--teacher TEACHER] --student b6c64 --out student.safetensors \\
        [--steps N | --epochs E] [--batch 256] [--lr 2e-3] [--seed 0] [--resume] ...

Loss, per position, averaged over the global batch::

    T^2 * KL(teacher_T || student_T)         policy; both distributions at temperature T
  + value loss                               CE against the teacher's (win, loss, noResult)
                                             (wdl student) or BCE against its win probability
                                             win + noResult/2 (tanh student)
  + ownership_weight * mean (tanh(o) - o_teacher)^2        where the labels have ownership
  + score_weight * Huber((s - s_teacher) / 10 points)      where the labels have a score lead

The student's ownership / score-lead outputs exist when its head can have them (``conv``), the
labels provide them, and their weight is not 0 (default weights 0.5 and 0.1). Every sample gets
one of the 8 board symmetries (planes, policy and ownership transformed together) unless
``--no-augment``. Optimiser: AdamW (weight decay on conv/linear weights only), linear warm-up
(``--warmup``, default 5% of the steps, at most 1000) then cosine decay to 0, gradient-norm
clipping (``--clip``). ``--batch`` is the GLOBAL batch (all processes together).

Data and split: ``kosumi.distill.dataset`` encodes the labels for the student's feature set
(cached), holds out whole games (``--val-fraction``, by ``--seed``) and fixes the content of
every batch as a function of (seed, step). Every ``--eval-every`` steps and at the end the
trainer measures, on the held-out positions (no augmentation, eval-mode BatchNorm): top-1 and
top-5 agreement with the teacher's favourite move, policy KL (T = 1), value MAE (win
probability), value loss, and ownership MSE / score MAE where present.

Files, for ``--out DIR/NAME.safetensors`` (without the ``.safetensors`` suffix, the whole name
is the stem)::

    DIR/NAME.safetensors          the student: a kosumi checkpoint (nets/checkpoint.py) whose
                                  config provenance records teacher, data, command, steps and
                                  the last metrics; written atomically at each evaluation
    DIR/NAME.state.safetensors    the training state for --resume: model + AdamW tensors and
                                  torch RNG states as safetensors tensors, everything else
                                  (step, settings, data identity, numpy/python RNG states) as
                                  JSON in the safetensors metadata; never pickled; atomic
    DIR/NAME.metrics.jsonl        one JSON object per evaluation: step, samples, epoch, lr,
                                  samples_per_s, elapsed_s, train {...} (means since the last
                                  line), val {...}
    DIR/NAME.curves.png           learning curves (kosumi.viz.curves), redrawn at most once a
                                  minute and at the end

Resume: ``--resume`` continues EXACTLY from the state file: the same weights, optimiser moments,
schedule position and batches as an uninterrupted run (bitwise on the CPU). Settings that change
the math (student, features, head, value, board sizes, batch, lr, weight decay, warm-up,
clipping, seed, temperature, loss weights, val fraction, augmentation) are taken from the state;
giving a different one is an error naming it, and so is a change of the label data. ``--steps``
/ ``--epochs`` may be raised to train longer (the cosine then stretches to the new end).
Without ``--resume``, an existing student or state file is an error (no silent overwrite).
``--stop-after K`` ends an invocation after K steps (saving everything) while the schedule still
runs to ``--steps``: time-sliced or preemptible jobs resume it later with ``--resume``.

Teacher: ``--teacher`` (a model file, or a SHA-256 hex prefix) must be the teacher recorded in
the label manifest (same SHA-256); omitted, the labels' teacher is used. In a folder with labels
of several teachers, ``--teacher`` selects that teacher's labels.

Multi-process / multi-machine: run the same command under ``torchrun`` (see
``kosumi.distill.ddp`` for the commands and what makes it equivalent to one process).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from kosumi.distill import metrics as M
from kosumi.distill.dataset import (
    BatchPlan,
    DistillDataset,
    SizeData,
    augment,
    load_dataset,
    split_by_game,
)
from kosumi.distill.ddp import DistContext, init_distributed, unwrap, wrap_model
from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import atomic_write, save_checkpoint
from kosumi.nets.config import LZ_BOARD_SIZE, NetConfig, parse_arch
from kosumi.nets.features import get_feature_set
from kosumi.nets.resnet import KosumiNet

STATE_FORMAT = "kosumi-training-state"
STATE_VERSION = 1
DEFAULT_OWNERSHIP_WEIGHT = 0.5
DEFAULT_SCORE_WEIGHT = 0.1
EVAL_BATCH = 512
PLOT_EVERY_S = 60.0  # redraw the learning curves at most this often (and at the end)

#: settings that change the math: saved with the state, compared on --resume
DEFAULTS: dict[str, Any] = {
    "student": "b6c64", "features": "basic", "head": "conv", "batch": 256, "lr": 2e-3,
    "weight_decay": 0.01, "clip": 1.0, "seed": 0, "policy_temperature": 1.0,
    "val_fraction": 0.05, "augment": True,
}
COMPARED = ("student", "features", "head", "value", "board_sizes", "batch", "lr", "weight_decay",
            "warmup", "clip", "seed", "policy_temperature", "ownership_weight", "score_weight",
            "val_fraction", "augment")


# ---------------------------------------------------------------------------- options
@dataclass
class DistillOptions:
    """What ``kosumi distill`` was asked (None = default, or the saved value on --resume)."""

    data: str | os.PathLike
    out: str | os.PathLike
    teacher: str | None = None
    student: str | None = None
    features: str | None = None
    head: str | None = None
    value: str | None = None
    board_sizes: list[int] | None = None
    steps: int | None = None
    epochs: float | None = None
    batch: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    warmup: int | None = None
    clip: float | None = None
    seed: int | None = None
    policy_temperature: float | None = None
    ownership_weight: float | None = None
    score_weight: float | None = None
    val_fraction: float | None = None
    augment: bool | None = None
    eval_every: int = 500
    stop_after: int | None = None  # stop this invocation after K steps (resume later)
    threads: int | None = None
    device: str = "auto"
    resume: bool = False
    cache_dir: str | os.PathLike | None = None
    progress: bool = True
    argv: list[str] = field(default_factory=lambda: list(sys.argv[1:]))


@dataclass
class RunPaths:
    checkpoint: Path
    state: Path
    metrics: Path
    curves: Path

    @classmethod
    def for_out(cls, out: str | os.PathLike) -> RunPaths:
        out = Path(out)
        stem = out.name.removesuffix(".safetensors")
        base = out.parent
        return cls(checkpoint=out, state=base / f"{stem}.state.safetensors",
                   metrics=base / f"{stem}.metrics.jsonl", curves=base / f"{stem}.curves.png")


@dataclass
class DistillResult:
    """What a run did (returned on rank 0; other ranks get the same minus metrics)."""

    checkpoint: Path
    steps: int
    samples: int
    train: dict[str, float]
    val: dict[str, float]
    seconds: float
    samples_per_s: float
    config: NetConfig | None = None


# ---------------------------------------------------------------------------- schedule
def learning_rate(step: int, total: int, base: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps to ``base``, then cosine decay to 0 at ``total``."""
    if warmup > 0 and step < warmup:
        return base * (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return base * 0.5 * (1.0 + math.cos(math.pi * progress))


def default_warmup(total: int) -> int:
    return min(1000, max(1, total // 20))


# ---------------------------------------------------------------------------- teacher identity
def _is_hex(text: str) -> bool:
    return re.fullmatch(r"[0-9a-fA-F]{8,64}", text) is not None


def _describe(t: dict[str, Any]) -> str:
    sha = t.get("sha256")
    return (f"{t.get('name', '?')} ({t.get('format', '?')}, "
            f"{'sha256 ' + str(sha)[:12] + '...' if sha else 'no sha256 recorded'})")


def check_teacher(teacher: str | os.PathLike | None, store: Any) -> tuple[dict[str, Any], int | None]:
    """The labels' teacher identity, checked against ``--teacher``.

    Returns (identity, teacher index to select, or None to use every record). ``teacher`` is a
    model file (its SHA-256 is compared) or a SHA-256 hex prefix; None takes the labels' teacher.
    """
    teachers = list(getattr(store, "teachers", None) or
                    ([store.teacher] if getattr(store, "teacher", None) else []))
    if not teachers:
        raise KosumiError(f"{store.path}: the labels record no teacher")
    if teacher is None:
        if len(teachers) == 1:
            return dict(teachers[0]), None
        return {"mixed": [dict(t) for t in teachers]}, None
    from kosumi.models import DEFAULT_NAME, resolve_model

    text = str(teacher)
    path = resolve_model(text) if text == DEFAULT_NAME else Path(text)
    if path.is_file():
        from kosumi.distill.shards import sha256_file

        sha = sha256_file(path)
        what = f"--teacher {text} (sha256 {sha[:12]}...)"
    elif _is_hex(text):
        sha = text.lower()
        what = f"--teacher sha256 {sha}"
    else:
        raise KosumiError(f"--teacher {text}: no such file (give the teacher model file, or its "
                          "sha256, or leave --teacher out to use the labels' teacher)")
    matches = [i for i, t in enumerate(teachers)
               if t.get("sha256") and str(t["sha256"]).lower().startswith(sha)]
    if not matches:
        made_by = "; ".join(_describe(t) for t in teachers)
        raise KosumiError(f"teacher mismatch: {what} is not the teacher of the labels in "
                          f"{store.path}, which were made by {made_by}")
    i = matches[0]
    return dict(teachers[i]), (i if len(teachers) > 1 else None)


class _TeacherFilter:
    """A label store seen through one teacher's records (folders with several teachers)."""

    def __init__(self, store: Any, index: int):
        self.store, self.index = store, index
        self.path = store.path

    def board_sizes(self) -> list[int]:
        return self.store.board_sizes()

    def records(self, board_size: int | None = None):
        return (r for r in self.store.records(board_size) if getattr(r, "teacher", 0) == self.index)


# ---------------------------------------------------------------------------- settings
def resolve_sizes(options: DistillOptions, head: str, label_sizes: list[int], data: str) -> list[int]:
    """The student's board sizes; KosumiError when the labels cannot feed them."""
    have = ", ".join(f"{n}x{n}" for n in label_sizes) or "none"
    if not label_sizes:
        raise KosumiError(f"{data}: the label folder holds no positions")
    if head == "lz":
        if options.board_sizes and sorted(set(options.board_sizes)) != [LZ_BOARD_SIZE]:
            raise KosumiError(f"--board-sizes {','.join(map(str, options.board_sizes))}: the lz "
                              "head is 19x19 only")
        if LZ_BOARD_SIZE not in label_sizes:
            raise KosumiError(f"an lz-head student plays 19x19 only, but the labels in {data} "
                              f"have board sizes {have} (use --head conv)")
        return [LZ_BOARD_SIZE]
    sizes = sorted(set(options.board_sizes)) if options.board_sizes else list(label_sizes)
    missing = [n for n in sizes if n not in label_sizes]
    if missing:
        raise KosumiError(f"--board-sizes: the labels in {data} have no {missing[0]}x{missing[0]} "
                          f"positions (they have {have})")
    return sizes


def _output_weight(given: float | None, default: float, available: bool, head: str,
                   name: str, data: str) -> float:
    if given is not None and given < 0:
        raise KosumiError(f"--{name}-weight must be >= 0, not {given}")
    if given is not None and given > 0:
        if head == "lz":
            raise KosumiError(f"--{name}-weight {given}: an lz-head student has no {name} output")
        if not available:
            raise KosumiError(f"--{name}-weight {given}: the labels in {data} have no {name} "
                              "targets")
        return float(given)
    if given == 0 or head == "lz" or not available:
        return 0.0
    return default


def new_settings(options: DistillOptions, dataset: DistillDataset, sizes: list[int]) -> dict[str, Any]:
    """Settings of a fresh run from the options, defaults and what the labels hold."""
    s = {k: (getattr(options, k) if getattr(options, k) is not None else DEFAULTS[k])
         for k in DEFAULTS}
    s["student"] = str(s["student"]).strip().lower()
    parse_arch(s["student"])
    head = s["head"]
    s["value"] = options.value or ("tanh" if head == "lz" else "wdl")
    s["board_sizes"] = sizes
    data = str(options.data)
    s["ownership_weight"] = _output_weight(options.ownership_weight, DEFAULT_OWNERSHIP_WEIGHT,
                                           dataset.has_ownership, head, "ownership", data)
    s["score_weight"] = _output_weight(options.score_weight, DEFAULT_SCORE_WEIGHT,
                                       dataset.has_score, head, "score", data)
    s["warmup"] = options.warmup  # resolved once the number of steps is known
    return s


def check_options(options: DistillOptions, sizes: list[int]) -> None:
    """Cheap checks of a fresh run's options, before any label is encoded."""
    o = options
    checks = [
        (o.policy_temperature is None or o.policy_temperature > 0, "--policy-temperature",
         "must be > 0"),
        (o.batch is None or o.batch >= 1, "--batch", "must be at least 1"),
        (o.lr is None or o.lr > 0, "--lr", "must be > 0"),
        (o.weight_decay is None or o.weight_decay >= 0, "--weight-decay", "must be >= 0"),
        (o.warmup is None or o.warmup >= 0, "--warmup", "must be >= 0"),
        (o.clip is None or o.clip >= 0, "--clip", "must be >= 0 (0 = no clipping)"),
    ]
    for ok, flag, what in checks:
        if not ok:
            raise KosumiError(f"{flag} {what}, not {getattr(o, flag[2:].replace('-', '_'))}")
    head = o.head or DEFAULTS["head"]
    # the student's description itself (arch, features, head, value, sizes): NetConfig's checks
    arch = o.student or DEFAULTS["student"]
    try:
        NetConfig(arch=arch, features=o.features or DEFAULTS["features"], head=head,
                  board_sizes=sizes, value=o.value or ("tanh" if head == "lz" else "wdl"),
                  score_lead=False, ownership=False)
    except KosumiError as e:
        raise KosumiError(f"student {arch}: {e}") from None


def check_resume(options: DistillOptions, saved: dict[str, Any], where: Path) -> None:
    """Options given on --resume must agree with the saved run (KosumiError naming the first)."""
    for name in COMPARED:
        given = getattr(options, name)
        if given is None:
            continue
        if name == "board_sizes":
            given = sorted(set(given))
        if name == "student":
            given = str(given).strip().lower()
        if given != saved.get(name):
            flag = {"augment": "--augment/--no-augment"}.get(name, "--" + name.replace("_", "-"))
            raise KosumiError(f"--resume: {flag} {given} differs from the run in {where} "
                              f"({saved.get(name)}); resume with the same settings or start a "
                              "new --out")


def student_config(settings: dict[str, Any], provenance: dict[str, Any] | None = None) -> NetConfig:
    return NetConfig(arch=settings["student"], features=settings["features"],
                     head=settings["head"], board_sizes=list(settings["board_sizes"]),
                     value=settings["value"], score_lead=settings["score_weight"] > 0,
                     ownership=settings["ownership_weight"] > 0, provenance=provenance or {})


# ---------------------------------------------------------------------------- batches
@dataclass
class Batch:
    """Tensors of one (local) batch on the training device."""

    planes: torch.Tensor
    globals: torch.Tensor | None
    policy: torch.Tensor
    value: torch.Tensor
    score: torch.Tensor
    has_score: torch.Tensor
    ownership: torch.Tensor | None
    has_ownership: torch.Tensor

    def __len__(self) -> int:
        return int(self.policy.shape[0])


def make_batch(data: SizeData, idx: np.ndarray, device: torch.device,
               syms: np.ndarray | None = None, ownership: bool = True) -> Batch:
    """Gather positions ``idx`` of one size onto ``device``; apply symmetries ``syms`` if given."""
    def t(a: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a[idx])).to(device=device, dtype=dtype)

    planes = t(data.planes)
    policy = t(data.policy)
    own = t(data.ownership) if ownership else None
    if syms is not None:
        planes, policy, own = augment(planes, policy, own, syms, data.board_size)
    return Batch(planes=planes, globals=None if data.globals is None else t(data.globals),
                 policy=policy, value=t(data.value), score=t(data.score),
                 has_score=t(data.has_score, torch.bool), ownership=own,
                 has_ownership=t(data.has_ownership, torch.bool))


def sample_losses(out: dict[str, torch.Tensor], batch: Batch,
                  settings: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Per-sample loss terms and their weighted total ``loss`` (see the module docstring)."""
    temp = float(settings["policy_temperature"])
    terms = {"policy_loss": M.policy_kl(batch.policy, out["policy"], temp) * temp * temp,
             "value_loss": M.value_loss(batch.value, out["value"], settings["value"])}
    total = terms["policy_loss"] + terms["value_loss"]
    if settings["ownership_weight"] > 0:
        own = M.ownership_mse(batch.ownership, out["ownership"]) * batch.has_ownership
        terms["ownership_loss"] = own
        total = total + settings["ownership_weight"] * own
    if settings["score_weight"] > 0:
        sc = M.score_huber(batch.score, out["score_lead"]) * batch.has_score
        terms["score_loss"] = sc
        total = total + settings["score_weight"] * sc
    terms["loss"] = total
    return terms


@torch.no_grad()
def evaluate(net: nn.Module, dataset: DistillDataset, indices: dict[int, np.ndarray],
             settings: dict[str, Any], device: torch.device,
             batch_size: int = EVAL_BATCH) -> dict[str, float]:
    """Agreement metrics of ``net`` on the given positions (eval mode, no augmentation)."""
    was_training = net.training
    net.eval()
    sums = M.MetricSums()
    kind = settings["value"]
    try:
        for n, idx in sorted(indices.items()):
            data = dataset.sizes[n]
            for start in range(0, len(idx), batch_size):
                b = make_batch(data, idx[start : start + batch_size], device,
                               ownership=settings["ownership_weight"] > 0)
                out = net(b.planes, b.globals)
                sums.add("policy_kl", M.policy_kl(b.policy, out["policy"]))
                sums.add("top1", M.topk_agreement(b.policy, out["policy"], 1))
                sums.add("top5", M.topk_agreement(b.policy, out["policy"], 5))
                sums.add("value_mae", M.value_mae(b.value, out["value"], kind))
                sums.add("value_loss", M.value_loss(b.value, out["value"], kind))
                if "ownership" in out and b.ownership is not None:
                    sums.add("ownership_mse", M.ownership_mse(b.ownership, out["ownership"]),
                             b.has_ownership)
                if "score_lead" in out:
                    sums.add("score_mae", (out["score_lead"] - b.score).abs(), b.has_score)
                    sums.add("score_loss", M.score_huber(b.score, out["score_lead"]), b.has_score)
    finally:
        net.train(was_training)
    return sums.means()


# ---------------------------------------------------------------------------- training state
def _json_rng() -> dict[str, Any]:
    np_state = np.random.get_state(legacy=False)
    np_state = {**np_state, "state": {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                      for k, v in np_state["state"].items()}}
    py = random.getstate()
    return {"numpy": np_state, "python": [py[0], list(py[1]), py[2]]}


def _restore_json_rng(rng: dict[str, Any]) -> None:
    if "numpy" in rng:
        st = rng["numpy"]
        inner = dict(st["state"])
        inner["key"] = np.array(inner["key"], dtype=np.uint32)
        np.random.set_state({**st, "state": inner})
    if "python" in rng:
        v, internal, gauss = rng["python"]
        random.setstate((v, tuple(internal), gauss))


def save_training_state(path: Path, net: nn.Module, optimizer: torch.optim.Optimizer,
                        meta: dict[str, Any]) -> None:
    """Write the resume state (see the module docstring) atomically."""
    from safetensors.torch import save

    tensors: dict[str, torch.Tensor] = {
        f"model/{k}": v.detach().cpu().contiguous().clone() for k, v in net.state_dict().items()}
    scalars: dict[str, Any] = {}
    for idx, st in optimizer.state_dict()["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v):
                tensors[f"optim/{idx}/{k}"] = v.detach().cpu().contiguous().clone()
            else:
                scalars[f"{idx}/{k}"] = v
    tensors["rng/torch"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng/cuda/{i}"] = s
    full = {**meta, "format": STATE_FORMAT, "version": STATE_VERSION,
            "optimizer_scalars": scalars, "rng": _json_rng()}
    data = save(tensors, metadata={"format": STATE_FORMAT, "state": json.dumps(full)})
    atomic_write(path, data)


def read_training_state(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(JSON part, tensors) of a training-state file; KosumiError naming it on any problem."""
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        raise KosumiError(f"--resume: no training state {path} (nothing to resume)")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    except (SafetensorError, OSError, ValueError) as e:
        raise KosumiError(f"{path}: not a readable training state ({e})") from None
    if meta.get("format") != STATE_FORMAT or "state" not in meta:
        raise KosumiError(f"{path}: not a kosumi training state (metadata 'format')")
    try:
        state = json.loads(meta["state"])
    except ValueError:
        raise KosumiError(f"{path}: corrupted training state (metadata is not JSON)") from None
    if state.get("version") != STATE_VERSION:
        raise KosumiError(f"{path}: training state version {state.get('version')!r} is not "
                          f"supported (this kosumi reads {STATE_VERSION})")
    return state, tensors


def load_training_state(path: Path, state: dict[str, Any], tensors: dict[str, torch.Tensor],
                        net: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Put saved weights, optimiser moments and RNG states back."""
    model = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    expected = net.state_dict()
    for name, v in expected.items():
        if name not in model:
            raise KosumiError(f"{path}: tensor 'model/{name}' is missing")
        if tuple(model[name].shape) != tuple(v.shape):
            raise KosumiError(f"{path}: tensor 'model/{name}' has shape "
                              f"{list(model[name].shape)}, the student needs {list(v.shape)}")
    extra = sorted(set(model) - set(expected))
    if extra:
        raise KosumiError(f"{path}: unexpected tensor 'model/{extra[0]}'")
    net.load_state_dict(model)
    osd = optimizer.state_dict()
    opt_state: dict[int, dict[str, Any]] = {}
    for k, v in tensors.items():
        if k.startswith("optim/"):
            _, idx, key = k.split("/", 2)
            opt_state.setdefault(int(idx), {})[key] = v
    for k, v in state.get("optimizer_scalars", {}).items():
        idx, key = k.split("/", 1)
        opt_state.setdefault(int(idx), {})[key] = v
    osd["state"] = opt_state
    optimizer.load_state_dict(osd)
    if "rng/torch" in tensors:
        torch.set_rng_state(tensors["rng/torch"])
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng/cuda/")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda[: torch.cuda.device_count()])
    _restore_json_rng(state.get("rng", {}))


def _param_groups(net: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on conv / linear weights; none on biases and BatchNorm parameters."""
    decay, no_decay = [], []
    for name, p in net.named_parameters():
        (decay if p.dim() > 1 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


# ---------------------------------------------------------------------------- metrics file
def _truncate_metrics(path: Path, last_step: int) -> list[dict[str, Any]]:
    """Keep the records up to ``last_step`` (a resumed run re-logs what followed)."""
    from kosumi.viz.curves import read_metrics

    if not path.exists():
        return []
    kept = [r for r in read_metrics(path) if r["step"] <= last_step]
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in kept)
    atomic_write(path, text.encode("utf-8"))
    return kept


def _append_metrics(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, separators=(",", ":")) + "\n")
        f.flush()


# ---------------------------------------------------------------------------- the run
def _open_store(options: DistillOptions, store: Any | None) -> Any:
    if store is not None:
        return store
    from kosumi.distill.labels import LabelStore

    return LabelStore(options.data)


def distill(options: DistillOptions, store: Any | None = None) -> DistillResult:
    """Run (or resume) a distillation; see the module docstring. ``store`` overrides the
    ``LabelStore`` opened from ``options.data`` (tests). Joins the torchrun process group when
    launched by torchrun."""
    ctx = init_distributed(options.device)
    try:
        return _Run(options, ctx, store).run()
    finally:
        ctx.close()


@contextmanager
def _save_on_interrupt(run: _Run, enabled: bool) -> Iterator[None]:
    """While training (one process, main thread): the first Ctrl-C finishes the current step,
    saves everything and stops; a second one interrupts at once."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if run.interrupted:
            raise KeyboardInterrupt
        run.interrupted = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _Run:
    """One distillation run in one process (see ``distill``)."""

    def __init__(self, options: DistillOptions, ctx: DistContext, store: Any | None):
        self.o = options
        self.ctx = ctx
        self.paths = RunPaths.for_out(options.out)
        if options.threads is not None:
            if options.threads < 1:
                raise KosumiError(f"--threads must be at least 1, not {options.threads}")
            torch.set_num_threads(options.threads)
        self.store = _open_store(options, store)

    def log(self, message: str) -> None:
        if self.ctx.is_main and self.o.progress:
            print(message, file=sys.stderr)

    # ------------------------------------------------------------------ setup
    def _prepare(self) -> None:
        o, paths = self.o, self.paths
        if o.steps is not None and o.epochs is not None:
            raise KosumiError("give --steps or --epochs, not both")
        if o.steps is not None and o.steps < 1:
            raise KosumiError(f"--steps must be at least 1, not {o.steps}")
        if o.epochs is not None and not o.epochs > 0:
            raise KosumiError(f"--epochs must be > 0, not {o.epochs}")
        self.saved: dict[str, Any] | None = None
        self.saved_tensors: dict[str, torch.Tensor] = {}
        if o.resume:
            self.saved, self.saved_tensors = read_training_state(paths.state)
            check_resume(o, self.saved["settings"], paths.state)
        elif paths.checkpoint.exists() or paths.state.exists():
            which = paths.checkpoint if paths.checkpoint.exists() else paths.state
            raise KosumiError(f"{which} exists; pass --resume to continue that run, or choose "
                              "another --out")
        folder = paths.checkpoint.parent
        if str(folder) and not folder.is_dir():
            raise KosumiError(f"--out {paths.checkpoint}: folder {folder} does not exist")

        self.teacher, teacher_index = check_teacher(o.teacher, self.store)
        source = self.store if teacher_index is None else _TeacherFilter(self.store, teacher_index)
        label_sizes = sorted(self.store.board_sizes())
        if self.saved is not None:
            settings = dict(self.saved["settings"])
            sizes = list(settings["board_sizes"])
            features = settings["features"]
        else:
            head = o.head or DEFAULTS["head"]
            features = o.features or DEFAULTS["features"]
            get_feature_set(features)
            sizes = resolve_sizes(o, head, label_sizes, str(o.data))
            check_options(o, sizes)
        skipped = [n for n in label_sizes if n not in sizes]
        if skipped:
            self.log(f"note: the student does not play {', '.join(f'{n}x{n}' for n in skipped)}; "
                     "those labels are not used")

        # encode (or read the cache): local rank 0 of each machine first, the others after it
        from kosumi.distill.dataset import label_content_hash

        chash = label_content_hash(self.store.path)
        if teacher_index is not None:
            chash = f"{chash[:48]}t{teacher_index:015d}"
        if self.saved is not None and self.saved["data"]["content_hash"] != chash:
            raise KosumiError(f"--resume: the labels in {o.data} are not those the run in "
                              f"{paths.state} was trained on (content hash differs)")
        if self.ctx.local_rank == 0:
            self.dataset = self._load(source, features, sizes, chash)
        self.ctx.barrier()
        if self.ctx.local_rank != 0:
            self.dataset = self._load(source, features, sizes, chash)
        for n in sizes:
            if len(self.dataset.sizes[n]) == 0:
                raise KosumiError(f"{o.data}: no {n}x{n} positions to train on")

        self.settings = settings if self.saved is not None else new_settings(o, self.dataset, sizes)
        s = self.settings
        self.train_idx, self.val_idx = split_by_game(self.dataset, s["val_fraction"], s["seed"])
        self.plan = BatchPlan({n: len(i) for n, i in self.train_idx.items()}, s["batch"], s["seed"])
        if s["batch"] < self.ctx.world_size:
            raise KosumiError(f"--batch {s['batch']} is smaller than the {self.ctx.world_size} "
                              "processes")
        if o.steps is not None:
            total = o.steps
        elif o.epochs is not None:
            total = max(1, math.ceil(o.epochs * self.plan.batches_per_epoch))
        elif self.saved is not None:
            total = int(self.saved["total_steps"])
        else:
            total = self.plan.batches_per_epoch
        self.total = total
        if s["warmup"] is None:
            s["warmup"] = default_warmup(total)
        self.start = int(self.saved["step"]) if self.saved is not None else 0

    def _load(self, source: Any, features: str, sizes: list[int], chash: str) -> DistillDataset:
        from kosumi.progress import progress_bar

        show = self.o.progress and self.ctx.is_main
        with ExitStack() as stack:
            bars: list[Any] = []

            def progress(done: int, total: int) -> None:  # a bar only when encoding happens
                if not bars:
                    bars.append(stack.enter_context(progress_bar(
                        total, "encoding labels", unit="pos", enabled=show)))
                bars[0].update(completed=done, total=total)

            return load_dataset(source, features, sizes, cache_dir=self.o.cache_dir,
                                progress=progress, content_hash=chash)

    def _build(self) -> None:
        s, dev = self.settings, self.ctx.device
        torch.manual_seed(s["seed"])
        self.config = student_config(s)
        net = KosumiNet.random(self.config, s["seed"]).to(dev)
        net.train()
        self.model = wrap_model(net, self.ctx)  # before the optimiser sees the parameters
        self.optimizer = torch.optim.AdamW(_param_groups(net, s["weight_decay"]), lr=s["lr"],
                                           betas=(0.9, 0.999), eps=1e-8)
        if self.saved is not None:
            load_training_state(self.paths.state, self.saved, self.saved_tensors, net,
                                self.optimizer)
            self.saved_tensors = {}

    # ------------------------------------------------------------------ provenance / saving
    def _provenance(self, step: int, train: dict[str, float], val: dict[str, float]) -> dict:
        d = self.dataset
        return {
            "created_by": "kosumi distill",
            "teacher": self.teacher,
            "data": {"path": str(Path(self.o.data).resolve()), "content_hash": d.content_hash,
                     "positions": {str(n): c for n, c in d.counts().items()},
                     "train_positions": int(sum(len(i) for i in self.train_idx.values())),
                     "val_positions": int(sum(len(i) for i in self.val_idx.values())),
                     "feature_set": d.feature_set},
            "command": ["kosumi", *self.o.argv],
            "steps": step,
            "samples": step * self.settings["batch"],
            "settings": {k: self.settings[k] for k in COMPARED},
            "metrics": {"train": M.finite_or_none(train), "val": M.finite_or_none(val)},
        }

    def _save(self, step: int, train: dict[str, float], val: dict[str, float]) -> None:
        net = unwrap(self.model)
        config = student_config(self.settings, self._provenance(step, train, val))
        try:
            save_checkpoint(self.paths.checkpoint, net, config=config)
            save_training_state(self.paths.state, net, self.optimizer, {
                "step": step, "total_steps": self.total, "settings": self.settings,
                "data": {"path": str(self.o.data), "content_hash": self.dataset.content_hash},
                "teacher": self.teacher, "net_config": config.to_dict(),
                "elapsed_s": self.elapsed_before + (time.perf_counter() - self.t0),
            })
        except OSError as e:
            raise KosumiError(f"{self.paths.checkpoint}: cannot write ({e.strerror or e})") from None

    # ------------------------------------------------------------------ loop
    def train_step(self, step: int, sums: M.MetricSums) -> torch.Tensor:
        """One optimiser step on global batch ``step``; returns the local mean loss (tensor)."""
        s, ctx = self.settings, self.ctx
        lr = learning_rate(step, self.total, s["lr"], s["warmup"])
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        size, idx, syms = self.plan.batch(step)
        rows = self.train_idx[size][ctx.shard(idx)]
        local_syms = ctx.shard(syms) if s["augment"] else None
        b = make_batch(self.dataset.sizes[size], rows, ctx.device, local_syms,
                       ownership=s["ownership_weight"] > 0)
        out = self.model(b.planes, b.globals)
        terms = sample_losses(out, b, s)
        # sum / global batch * world size: DDP's gradient average is then the global mean
        loss = terms["loss"].sum() * (ctx.world_size / float(s["batch"]))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if s["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), s["clip"])
        self.optimizer.step()
        for k, v in terms.items():
            if k in ("ownership_loss",):
                sums.add(k, v, b.has_ownership)
            elif k == "score_loss":
                sums.add(k, v, b.has_score)
            else:
                sums.add(k, v)
        with torch.no_grad():
            sums.add("policy_kl", M.policy_kl(b.policy, out["policy"].detach()))
            sums.add("top1", M.topk_agreement(b.policy, out["policy"].detach(), 1))
        self.last_lr = lr
        return terms["loss"].detach().mean()

    def _reduce(self, sums: M.MetricSums) -> dict[str, float]:
        names = sorted(sums.sums)
        if self.ctx.distributed:
            # every rank has the same names (same settings, same code path)
            packed = self.ctx.all_reduce_sum(sums.as_tensor(names))
            sums = M.MetricSums.from_tensor(names, packed)
        return sums.means()

    def run(self) -> DistillResult:
        self._prepare()
        self._build()
        o, s, ctx, paths = self.o, self.settings, self.ctx, self.paths
        self.t0 = self.last_plot = time.perf_counter()
        self.elapsed_before = float(self.saved["elapsed_s"]) if self.saved else 0.0
        self.last_lr = learning_rate(max(0, self.start - 1), self.total, s["lr"], s["warmup"])
        records: list[dict[str, Any]] = []
        if ctx.is_main:
            if o.resume:
                records = _truncate_metrics(paths.metrics, self.start)
            elif paths.metrics.exists():
                paths.metrics.unlink()
        n_train = sum(len(i) for i in self.train_idx.values())
        n_val = sum(len(i) for i in self.val_idx.values())
        self.log(f"distill: {self.config.describe()}, {unwrap(self.model).num_parameters():,} "
                 f"parameters; {n_train:,} training / {n_val:,} held-out positions; steps "
                 f"{self.start}->{self.total}, batch {s['batch']}"
                 + (f" over {ctx.world_size} processes" if ctx.distributed else "")
                 + f", device {ctx.device}")
        batch = s["batch"]
        eval_every = o.eval_every if o.eval_every and o.eval_every > 0 else self.total
        train_means: dict[str, float] = {}
        val: dict[str, float] = {}
        sums = M.MetricSums()
        interval_t0, interval_start = time.perf_counter(), self.start
        from kosumi.progress import progress_bar

        end = self.total
        if o.stop_after is not None:
            if o.stop_after < 1:
                raise KosumiError(f"--stop-after must be at least 1, not {o.stop_after}")
            end = min(self.total, self.start + o.stop_after)
        if self.start >= self.total:
            self.log(f"{paths.state}: already trained {self.start} of {self.total} steps; "
                     "nothing to do (raise --steps to train longer)")
        with progress_bar(self.total * batch, "distill", unit="samples",
                          enabled=o.progress and ctx.is_main,
                          completed=self.start * batch) as bar, \
                _save_on_interrupt(self, enabled=not ctx.distributed):
            step = self.start
            while step < end:
                loss = self.train_step(step, sums)
                step += 1
                if self.interrupted:
                    end = step  # evaluate and save this step, then stop
                if o.progress and ctx.is_main and (step % 10 == 0 or step == end):
                    bar.advance(batch, info=f"step {step}/{self.total} loss {float(loss):.4f}")
                else:
                    bar.advance(batch)
                if step % eval_every == 0 or step == end:
                    train_means = self._reduce(sums)
                    sums = M.MetricSums()
                    now = time.perf_counter()
                    rate = (step - interval_start) * batch / max(1e-9, now - interval_t0)
                    if ctx.is_main:
                        val = (evaluate(unwrap(self.model), self.dataset, self.val_idx, s,
                                        ctx.device) if n_val else {})
                        record = {
                            "step": step, "samples": step * batch,
                            "epoch": round(step / self.plan.batches_per_epoch, 4),
                            "lr": self.last_lr, "samples_per_s": round(rate, 1),
                            "elapsed_s": round(self.elapsed_before + now - self.t0, 2),
                            "train": M.finite_or_none(train_means),
                            "val": M.finite_or_none(val),
                        }
                        _append_metrics(paths.metrics, record)
                        records.append(record)
                        self._save(step, train_means, val)
                        if step == end or time.perf_counter() - self.last_plot > PLOT_EVERY_S:
                            self._plot(records)
                        if val and o.progress:
                            bar.log(f"step {step}: val top-1 {val['top1']:.3f} top-5 "
                                    f"{val['top5']:.3f} KL {val['policy_kl']:.4f} value MAE "
                                    f"{val['value_mae']:.4f}")
                    interval_t0, interval_start = time.perf_counter(), step
        if self.interrupted:
            self.log(f"interrupted after step {end}; saved {paths.state} (continue with --resume)")
            raise KeyboardInterrupt
        ctx.barrier()
        seconds = time.perf_counter() - self.t0
        done = max(0, end - self.start)
        return DistillResult(checkpoint=paths.checkpoint, steps=max(end, self.start),
                             samples=max(end, self.start) * batch, train=train_means,
                             val=val, seconds=seconds,
                             samples_per_s=done * batch / seconds if seconds > 0 else 0.0,
                             config=self.config)

    last_plot = -math.inf
    interrupted = False

    def _plot(self, records: list[dict[str, Any]]) -> None:
        from kosumi.viz.curves import plot_learning_curves

        self.last_plot = time.perf_counter()
        try:
            plot_learning_curves(records, self.paths.curves,
                                 title=f"{self.config.arch} {self.config.features} <- "
                                       f"{self.teacher.get('name', 'teacher')}")
        except OSError as e:
            raise KosumiError(f"{self.paths.curves}: cannot write ({e.strerror or e})") from None


__all__ = ["DistillOptions", "DistillResult", "RunPaths", "check_teacher", "distill",
           "evaluate", "learning_rate", "read_training_state", "sample_losses"]
