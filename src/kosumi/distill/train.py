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

Fine-tuning: ``--init CHECKPOINT`` (a kosumi checkpoint, or ``default``) starts a new run from
that net's weights instead of a random start: the student's arch, features, head and value are
taken from it (giving a different one is an error naming it); the optimiser and schedule start
afresh. The checkpoint's identity (path, SHA-256) goes into the student's provenance.

Teacher: ``--teacher`` (a model file, or a SHA-256 hex prefix) must be the teacher recorded in
the label manifest (same SHA-256); omitted, the labels' teacher is used. In a folder with labels
of several teachers, ``--teacher`` selects that teacher's labels.

Options, settings resolution, the teacher check and the state file's format live in
``kosumi.distill.train_state``; this module is the training loop.

Multi-process / multi-machine: run the same command under ``torchrun`` (see
``kosumi.distill.ddp`` for the commands and what makes it equivalent to one process).
"""

from __future__ import annotations

import importlib.util
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
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
from kosumi.distill.ddp import DistContext, init_distributed, unwrap_ddp, wrap_model
from kosumi.distill.loop import Schedule, default_warmup, learning_rate, run_steps, stop_step
from kosumi.distill.metrics_log import (
    append_metrics_log,
    remove_metrics_log,
    truncate_metrics_log,
)
from kosumi.distill.precision import emulation_warning, resolve_precision
from kosumi.distill.train_state import (
    COMPARED,
    DEFAULTS,
    DistillOptions,
    DistillResult,
    RunPaths,
    TeacherFilter,
    check_length_options,
    check_options,
    check_resume,
    check_teacher,
    load_init,
    load_training_state,
    new_settings,
    read_init,
    read_training_state,
    resolve_sizes,
    save_training_state,
    student_config,
)
from kosumi.errors import KosumiError, Terminated
from kosumi.fileio import shareable_path
from kosumi.nets.checkpoint import save_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.nets.resnet import KosumiNet

EVAL_BATCH = 512
PLOT_EVERY_S = 60.0  # redraw the learning curves at most this often (and at the end)


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
        assert batch.ownership is not None  # make_batch keeps it when its weight is > 0
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


def _param_groups(net: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on conv / linear weights; none on biases and BatchNorm parameters."""
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for _name, p in net.named_parameters():
        (decay if p.dim() > 1 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


# ---------------------------------------------------------------------------- the run

def _open_store(options: DistillOptions, store: Any | None) -> Any:
    if store is not None:
        return store
    from kosumi.distill.labels import open_labels

    return open_labels(options.data_paths)


def _shareable_data(options: DistillOptions) -> str | list[str]:
    """The provenance's data path: one folder as a string, several as a list."""
    paths = [shareable_path(p) for p in options.data_paths]
    return paths[0] if len(paths) == 1 else paths


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
    """While training (one process, main thread): the first Ctrl-C or SIGTERM finishes the
    current step, saves everything and stops; a second one interrupts at once."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if run.interrupted:
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt
        run.interrupted = True

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@dataclass
class _Window:
    """The metrics since the last evaluation, and the last evaluation's."""

    start: int  # the step the window began at
    t0: float = field(default_factory=time.perf_counter)
    sums: M.MetricSums = field(default_factory=M.MetricSums)
    train: dict[str, float] = field(default_factory=dict)
    val: dict[str, float] = field(default_factory=dict)


class _Run:
    """One distillation run in one process (see ``distill``)."""

    init_net: nn.Module | None  # --init: the checkpoint's net and its identity (_prepare)
    init_identity: dict[str, Any] | None

    def __init__(self, options: DistillOptions, ctx: DistContext, store: Any | None):
        self.o = options
        self.ctx = ctx
        self.paths = RunPaths.for_out(options.out)
        if options.threads is not None:
            if options.threads < 1:
                raise KosumiError(f"--threads must be at least 1, not {options.threads}")
            torch.set_num_threads(options.threads)
        self.precision = resolve_precision(options.precision, ctx.device)  # before any work
        warning = emulation_warning(self.precision, ctx.device)
        if warning and ctx.is_main:  # even with --quiet: it can cost hours
            print(warning, file=sys.stderr)
        self.store = _open_store(options, store)

    def log(self, message: str) -> None:
        if self.ctx.is_main and self.o.progress:
            print(message, file=sys.stderr)

    # ------------------------------------------------------------------ setup
    def _prepare(self) -> None:
        check_length_options(self.o)
        self.saved: dict[str, Any] | None = None
        self.saved_tensors: dict[str, torch.Tensor] = {}
        self.init_net, self.init_identity = None, None
        if self.o.init is not None:
            self.o, self.init_net, self.init_identity = read_init(self.o)
        self._check_out()
        # a resumed run keeps where it started: the first command and its --init
        saved_config: dict[str, Any] = {}
        if self.saved is not None:
            saved_config = dict(self.saved.get("net_config") or {})
        first = dict(saved_config.get("provenance", {}))
        self.first_command: list[str] | None = first.get("command")
        if self.saved is not None:
            self.init_identity = first.get("init")
        o = self.o
        self.teacher, teacher_index = check_teacher(o.teacher, self.store)
        source = self.store if teacher_index is None else TeacherFilter(self.store, teacher_index)
        features, sizes = self._features_and_sizes(sorted(source.board_sizes()))
        self._encode(source, teacher_index, features, sizes)
        self.settings = (dict(self.saved["settings"]) if self.saved is not None
                         else new_settings(o, self.dataset, sizes))
        s = self.settings
        for name in ("size_weights", "value_pool", "split_seed"):  # saved before they existed
            s.setdefault(name, DEFAULTS[name])
        split_seed = s["seed"] if s["split_seed"] is None else s["split_seed"]
        self.train_idx, self.val_idx = split_by_game(self.dataset, s["val_fraction"], split_seed)
        self.plan = BatchPlan({n: len(i) for n, i in self.train_idx.items()}, s["batch"], s["seed"],
                              {int(n): w for n, w in s["size_weights"].items()})
        if s["batch"] < self.ctx.world_size:
            raise KosumiError(f"--batch {s['batch']} is smaller than the {self.ctx.world_size} "
                              "processes")
        self.total = self._total_steps()
        if s["warmup"] is None:
            s["warmup"] = default_warmup(self.total)
        self.start = int(self.saved["step"]) if self.saved is not None else 0

    def _check_out(self) -> None:
        """Read the saved state on --resume; refuse to overwrite a run otherwise."""
        o, paths = self.o, self.paths
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

    def _features_and_sizes(self, label_sizes: list[int]) -> tuple[str, list[int]]:
        """The student's feature set and board sizes (the saved run's on --resume)."""
        o = self.o
        if self.saved is not None:
            settings = dict(self.saved["settings"])
            sizes, features = list(settings["board_sizes"]), settings["features"]
        else:
            head = o.head or DEFAULTS["head"]
            features = o.features or DEFAULTS["features"]
            get_feature_set(features)
            sizes = resolve_sizes(o, head, label_sizes, o.data_name)
            check_options(o, sizes)
        skipped = [n for n in label_sizes if n not in sizes]
        if skipped:
            self.log(f"note: the student does not play {', '.join(f'{n}x{n}' for n in skipped)}; "
                     "those labels are not used")
        return features, sizes

    def _encode(self, source: Any, teacher_index: int | None, features: str,
                sizes: list[int]) -> None:
        """Encode the labels (or read the cache): local rank 0 of each machine first, the
        others after it."""
        chash = self.store.content_hash()  # of the manifest it read
        if teacher_index is not None:
            chash = f"{chash[:48]}t{teacher_index:015d}"
        if self.saved is not None and self.saved["data"]["content_hash"] != chash:
            raise KosumiError(f"--resume: the labels in {self.o.data_name} are not those the run "
                              f"in {self.paths.state} was trained on (content hash differs)")
        if self.ctx.local_rank == 0:
            self.dataset = self._load(source, features, sizes, chash)
        self.ctx.barrier()
        if self.ctx.local_rank != 0:
            self.dataset = self._load(source, features, sizes, chash)
        for n in sizes:
            if len(self.dataset.sizes[n]) == 0:
                raise KosumiError(f"{self.o.data_name}: no {n}x{n} positions to train on")

    def _total_steps(self) -> int:
        o = self.o
        if o.steps is not None:
            return o.steps
        if o.epochs is not None:
            return max(1, math.ceil(o.epochs * self.plan.batches_per_epoch))
        if self.saved is not None:
            return int(self.saved["total_steps"])
        return self.plan.batches_per_epoch

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
        net = self.precision.prepare(KosumiNet.random(self.config, s["seed"]).to(dev))
        net.train()
        self.student = net  # self.model is DDP around it when distributed
        self.model = wrap_model(net, self.ctx)  # before the optimiser sees the parameters
        self.optimizer = torch.optim.AdamW(_param_groups(net, s["weight_decay"]), lr=s["lr"],
                                           betas=(0.9, 0.999), eps=1e-8)
        if self.saved is not None:
            load_training_state(self.paths.state, self.saved, self.saved_tensors, net,
                                self.optimizer)
            self.saved_tensors = {}
        elif self.init_net is not None:
            assert self.init_identity is not None  # read_init gives both
            load_init(net, self.init_net, self.init_identity["path"], self.log)

    # ------------------------------------------------------------------ provenance / saving
    def _provenance(self, step: int, train: dict[str, float], val: dict[str, float]) -> dict:
        d = self.dataset
        return {
            "created_by": "kosumi distill",
            "teacher": self.teacher,
            "data": {"path": _shareable_data(self.o), "content_hash": d.content_hash,
                     "positions": {str(n): c for n, c in d.counts().items()},
                     "train_positions": int(sum(len(i) for i in self.train_idx.values())),
                     "val_positions": int(sum(len(i) for i in self.val_idx.values())),
                     "feature_set": d.feature_set},
            "command": self.first_command or ["kosumi", *self.o.argv],
            **({"resumed_with": ["kosumi", *self.o.argv]} if self.saved is not None else {}),
            **({"init": self.init_identity} if self.init_identity else {}),
            # absent: fp32 (the provenance of an fp32 run is what it was before the option)
            **({"precision": self.precision.name} if self.precision.name != "fp32" else {}),
            "steps": step,
            "samples": step * self.settings["batch"],
            "settings": {k: self.settings[k] for k in COMPARED},
            "metrics": {"train": M.finite_or_none(train), "val": M.finite_or_none(val)},
        }

    def _save(self, step: int, train: dict[str, float], val: dict[str, float]) -> None:
        net = unwrap_ddp(self.model)
        config = student_config(self.settings, self._provenance(step, train, val))
        try:
            save_checkpoint(self.paths.checkpoint, net, config=config)
            save_training_state(self.paths.state, net, self.optimizer, {
                "step": step, "total_steps": self.total, "settings": self.settings,
                "data": {"path": self.o.data_name, "content_hash": self.dataset.content_hash},
                "teacher": self.teacher, "net_config": config.to_dict(),
                "elapsed_s": self.elapsed_before + (time.perf_counter() - self.t0),
            })
        except OSError as e:
            raise KosumiError(f"{self.paths.checkpoint}: cannot write "
                              f"({e.strerror or e})") from None

    # ------------------------------------------------------------------ loop
    def train_step(self, step: int, lr: float, sums: M.MetricSums) -> torch.Tensor:
        """One optimiser step on global batch ``step`` at rate ``lr``; returns the local mean
        loss (tensor)."""
        s, ctx = self.settings, self.ctx
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        size, idx, syms = self.plan.batch(step)
        rows = self.train_idx[size][ctx.shard(idx)]
        local_syms = ctx.shard(syms) if s["augment"] else None
        b = make_batch(self.dataset.sizes[size], rows, ctx.device, local_syms,
                       ownership=s["ownership_weight"] > 0)
        prec = self.precision
        with prec.forward():
            out = prec.outputs(self.model(prec.planes(b.planes), b.globals))
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

    def _evaluate_and_save(self, step: int, last: bool, window: _Window,
                           records: list[dict[str, Any]], n_val: int, bar: Any) -> None:
        """At an evaluation step: the training metrics since the last one (over every process),
        the held-out metrics, a metrics line, the student and its resume state, the curves."""
        o, s, ctx = self.o, self.settings, self.ctx
        batch = s["batch"]
        window.train = self._reduce(window.sums)
        window.sums = M.MetricSums()
        now = time.perf_counter()
        rate = (step - window.start) * batch / max(1e-9, now - window.t0)
        if ctx.is_main:
            window.val = val = (evaluate(unwrap_ddp(self.model), self.dataset, self.val_idx, s,
                                         ctx.device) if n_val else {})
            record = {
                "step": step, "samples": step * batch,
                "epoch": round(step / self.plan.batches_per_epoch, 4),
                "lr": self.last_lr, "samples_per_s": round(rate, 1),
                "elapsed_s": round(self.elapsed_before + now - self.t0, 2),
                "train": M.finite_or_none(window.train),
                "val": M.finite_or_none(val),
            }
            append_metrics_log(self.paths.metrics, record)
            records.append(record)
            self._save(step, window.train, val)
            if last or time.perf_counter() - self.last_plot > PLOT_EVERY_S:
                self._plot(records)
            if val and o.progress:
                bar.log(f"step {step}: val top-1 {val['top1']:.3f} top-5 "
                        f"{val['top5']:.3f} KL {val['policy_kl']:.4f} value MAE "
                        f"{val['value_mae']:.4f}")
        window.t0, window.start = time.perf_counter(), step

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
                records = truncate_metrics_log(paths.metrics, self.start)
            else:
                remove_metrics_log(paths.metrics)
        n_train = sum(len(i) for i in self.train_idx.values())
        n_val = sum(len(i) for i in self.val_idx.values())
        self.log(f"distill: {self.config.describe()}, {self.student.num_parameters():,} "
                 f"parameters; {n_train:,} training / {n_val:,} held-out positions; steps "
                 f"{self.start}->{self.total}, batch {s['batch']}"
                 + (f" over {ctx.world_size} processes" if ctx.distributed else "")
                 + f", device {ctx.device}")
        batch = s["batch"]
        eval_every = o.eval_every if o.eval_every and o.eval_every > 0 else self.total
        from kosumi.progress import progress_bar

        stop_step(self.start, self.total, o.stop_after)  # a bad --stop-after fails first
        if self.start >= self.total:
            self.log(f"{paths.state}: already trained {self.start} of {self.total} steps; "
                     "nothing to do (raise --steps to train longer)")
        with progress_bar(self.total * batch, "distill", unit="samples",
                          enabled=o.progress and ctx.is_main,
                          completed=self.start * batch) as bar, \
                _save_on_interrupt(self, enabled=not ctx.distributed):
            window = _Window(self.start)

            def after(step: int, loss: torch.Tensor, last: bool) -> None:
                if o.progress and ctx.is_main and (step % 10 == 0 or last):
                    bar.advance(batch, info=f"step {step}/{self.total} loss {float(loss):.4f}")
                else:
                    bar.advance(batch)

            ended = run_steps(self.start, Schedule(self.total, s["lr"], s["warmup"]),
                              lambda k, lr: self.train_step(k, lr, window.sums),
                              lambda k, last: self._evaluate_and_save(k, last, window, records,
                                                                      n_val, bar),
                              eval_every, o.stop_after, after, lambda: self.interrupted)
        end = ended.step
        train_means, val = window.train, window.val
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
    told_no_plot = False
    interrupted = False

    def _plot(self, records: list[dict[str, Any]]) -> None:
        from kosumi.viz.curves import plot_learning_curves

        self.last_plot = time.perf_counter()
        if importlib.util.find_spec("matplotlib") is None:  # the curves are the viz extra's
            if not self.told_no_plot:
                self.log("learning curves not drawn: they need matplotlib "
                         "(pip install 'kosumi[viz]'); training goes on")
                self.told_no_plot = True
            return
        try:
            plot_learning_curves(records, self.paths.curves,
                                 title=f"{self.config.arch} {self.config.features} <- "
                                       f"{self.teacher.get('name', 'teacher')}")
        except OSError as e:
            raise KosumiError(f"{self.paths.curves}: cannot write ({e.strerror or e})") from None


__all__ = ["DistillOptions", "DistillResult", "RunPaths", "check_teacher", "distill",
           "evaluate", "learning_rate", "read_training_state", "sample_losses"]
