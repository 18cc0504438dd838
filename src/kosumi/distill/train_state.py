"""``kosumi distill`` run setup and resume state: options, settings, teacher identity, state
file, and the learning-rate schedule.

What a distillation run was asked (``DistillOptions``) and where it writes (``RunPaths``); the
settings that change the math (``DEFAULTS``, resolved by ``new_settings`` for a fresh run and
compared by ``check_resume`` on ``--resume``); the teacher check against the label manifest
(``check_teacher``); and the training-state file that ``--resume`` continues from: model +
AdamW tensors and torch RNG states as safetensors tensors, everything else (step, settings,
data identity, numpy/python RNG states) as JSON in the safetensors metadata, never pickled,
written atomically (``save_training_state`` / ``read_training_state`` /
``load_training_state``). The training loop itself is ``kosumi.distill.train``.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write, shareable_path
from kosumi.nets.config import LZ_BOARD_SIZE, NetConfig, parse_arch

if TYPE_CHECKING:
    from kosumi.distill.dataset import DistillDataset

STATE_FORMAT = "kosumi-training-state"
STATE_VERSION = 1
DEFAULT_OWNERSHIP_WEIGHT = 0.5
DEFAULT_SCORE_WEIGHT = 0.1

#: settings that change the math: saved with the state, compared on --resume
DEFAULTS: dict[str, Any] = {
    "student": "b6c64", "features": "basic", "head": "conv", "batch": 256, "lr": 2e-3,
    "weight_decay": 0.01, "clip": 1.0, "seed": 0, "policy_temperature": 1.0,
    "val_fraction": 0.05, "augment": True, "size_weights": {}, "value_pool": "mean_max",
    "split_seed": None,  # None: the held-out games follow --seed
}
COMPARED = ("student", "features", "head", "value", "board_sizes", "batch", "lr", "weight_decay",
            "warmup", "clip", "seed", "policy_temperature", "ownership_weight", "score_weight",
            "val_fraction", "augment", "size_weights", "value_pool", "split_seed")


# ---------------------------------------------------------------------------- options
@dataclass
class DistillOptions:
    """What ``kosumi distill`` was asked (None = default, or the saved value on --resume)."""

    data: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]  # one label folder or several
    out: str | os.PathLike[str]
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
    split_seed: int | None = None  # which games are held out (None: --seed's)
    augment: bool | None = None
    size_weights: dict[str, float] | None = None  # parse_size_weights; {} = every size weight 1
    value_pool: str | None = None  # conv head: "mean_max" (default) or "katago" (NetConfig)
    eval_every: int = 500
    stop_after: int | None = None  # stop this invocation after K steps (resume later)
    threads: int | None = None
    device: str = "auto"
    precision: str = "fp32"  # fp32 | bf16 | auto (kosumi.distill.precision); not a saved setting
    resume: bool = False
    init: str | os.PathLike[str] | None = None  # start a new run from this checkpoint's weights
    cache_dir: str | os.PathLike[str] | None = None
    progress: bool = True
    argv: list[str] = field(default_factory=lambda: list(sys.argv[1:]))

    @property
    def data_paths(self) -> list[str | os.PathLike[str]]:
        """The label folders, one or several (``--data`` given more than once)."""
        if isinstance(self.data, (str, os.PathLike)):
            return [self.data]
        return list(self.data)

    @property
    def data_name(self) -> str:
        """The label folders as messages name them: ``A`` or ``A + B``."""
        return " + ".join(os.fspath(p) for p in self.data_paths)


@dataclass
class RunPaths:
    checkpoint: Path
    state: Path
    metrics: Path
    curves: Path

    @classmethod
    def for_out(cls, out: str | os.PathLike[str]) -> RunPaths:
        out = Path(out)
        stem = out.name.removesuffix(".safetensors")
        base = out.parent
        return cls(checkpoint=out, state=base / f"{stem}.state.safetensors",
                   metrics=base / f"{stem}.metrics.jsonl", curves=base / f"{stem}.curves.png")


# ---------------------------------------------------------------------------- teacher identity
def _is_hex(text: str) -> bool:
    return re.fullmatch(r"[0-9a-fA-F]{8,64}", text) is not None


def _describe(t: dict[str, Any]) -> str:
    sha = t.get("sha256")
    return (f"{t.get('name', '?')} ({t.get('format', '?')}, "
            f"{'sha256 ' + str(sha)[:12] + '...' if sha else 'no sha256 recorded'})")


def check_teacher(teacher: str | os.PathLike[str] | None, store: Any
                  ) -> tuple[dict[str, Any], int | None]:
    """The labels' teacher identity, checked against ``--teacher``.

    Returns (identity, teacher index to select, or None to use every record). ``teacher`` is a
    model file (its SHA-256 is compared; a model set: any of its nets') or a SHA-256 hex prefix;
    None takes the labels' teacher.
    """
    teachers = list(getattr(store, "teachers", None) or
                    ([store.teacher] if getattr(store, "teacher", None) else []))
    if not teachers:
        raise KosumiError(f"{store.path}: the labels record no teacher")
    if teacher is None:
        if len(teachers) == 1:
            return dict(teachers[0]), None
        return {"mixed": [dict(t) for t in teachers]}, None
    from kosumi.models import resolve_model, resolve_model_set

    text = str(teacher)
    model_set = resolve_model_set(text)  # a set teaches with any of its nets
    files = [model_set.base, *model_set.nets.values()] if model_set else [resolve_model(text)]
    if files[0].is_file():
        from kosumi.distill.shards import sha256_file

        shas = [sha256_file(f) for f in files]
        what = (f"--teacher {text} (a model set: {model_set.describe()})" if model_set else
                f"--teacher {text} (sha256 {shas[0][:12]}...)")
    elif _is_hex(text):
        shas = [text.lower()]
        what = f"--teacher sha256 {shas[0]}"
    else:
        raise KosumiError(f"--teacher {text}: no such file (give the teacher model file, or its "
                          "sha256, or leave --teacher out to use the labels' teacher)")
    matches = [i for i, t in enumerate(teachers)
               if t.get("sha256") and any(str(t["sha256"]).lower().startswith(sha)
                                          for sha in shas)]
    if not matches:
        made_by = "; ".join(_describe(t) for t in teachers)
        raise KosumiError(f"teacher mismatch: {what} is not the teacher of the labels in "
                          f"{store.path}, which were made by {made_by}")
    i = matches[0]
    return dict(teachers[i]), (i if len(teachers) > 1 else None)


class TeacherFilter:
    """A label store seen through one teacher's records (folders with several teachers)."""

    def __init__(self, store: Any, index: int):
        self.store, self.index = store, index
        self.path = store.path

    def board_sizes(self) -> list[int]:
        return self.store.board_sizes(self.index)

    def records(self, board_size: int | None = None):
        return (r for r in self.store.records(board_size) if getattr(r, "teacher", 0) == self.index)

    def count(self, board_size: int | None = None) -> int | None:
        """The teacher's positions (the encoding's progress total); None if the store cannot
        say without reading its records."""
        count = getattr(self.store, "count", None)
        return None if count is None else count(board_size, teacher=self.index)


# ---------------------------------------------------------------------------- --init
def read_init(options: DistillOptions) -> tuple[DistillOptions, nn.Module, dict[str, Any]]:
    """``--init``: (the options with the student's arch, features, head, value and value pool
    taken from the checkpoint where not given, the checkpoint's net, its identity for the
    provenance).

    A given --student/--features/--head/--value must agree with the checkpoint: KosumiError
    naming the first that differs. Board sizes are free (a conv head plays every size), and
    ``--value-pool katago`` may widen a "mean_max" net (``load_init`` adds zero weights for the
    size term, so the student starts as the checkpoint plays), and ``--features`` may name a
    set that extends the checkpoint's (``basic_ladder`` over ``basic``: zero weights on the new
    planes)."""
    from dataclasses import replace

    from kosumi.distill.shards import sha256_file
    from kosumi.models import resolve_model
    from kosumi.nets.checkpoint import build_net, read_checkpoint

    if options.resume:
        raise KosumiError("--init starts a new run from a checkpoint; --resume continues a run "
                          "(its state file holds the weights): give one of them")
    text = str(options.init)
    path = resolve_model(text)
    if not path.is_file():
        raise KosumiError(f"--init {text}: no such file")
    ckpt = read_checkpoint(path)
    cfg = ckpt.config
    have: dict[str, Any] = {"student": cfg.arch, "features": cfg.features, "head": cfg.head,
                            "value": cfg.value, "value_pool": cfg.value_pool}
    if options.value_pool == "katago" and cfg.value_pool == "mean_max":
        have["value_pool"] = "katago"  # widened by load_init
    if options.features and options.features != cfg.features:
        from kosumi.nets.features import get_feature_set

        if get_feature_set(options.features).extends == cfg.features:
            have["features"] = options.features  # widened by load_init
    given = {"student": options.student and str(options.student).strip().lower(),
             "features": options.features, "head": options.head, "value": options.value,
             "value_pool": options.value_pool}
    for name, value in given.items():
        if value is not None and value != have[name]:
            raise KosumiError(f"--{name.replace('_', '-')} {value} differs from the --init "
                              f"checkpoint {path} "
                              f"({have[name]}); leave it out to take the checkpoint's")
    identity = {"path": shareable_path(text), "sha256": sha256_file(path), "arch": cfg.arch}
    if isinstance(cfg.provenance.get("init"), dict):  # the lineage: what that net started from
        identity["init"] = cfg.provenance["init"]
    return replace(options, **have), build_net(ckpt, path), identity


def load_init(net: nn.Module, init_net: nn.Module, where: str, log: Any) -> None:
    """Copy the --init net's weights into a fresh student of the same arch, features, head and
    value (``read_init`` checked them); outputs only one of the two has are reported via ``log``
    (the student's start at random). A "katago" value pool over a "mean_max" net's weights gets
    zero weights for its size term, the middle third of ``value_fc1``'s inputs; a feature set
    extending the net's gets zero weights on its new planes and globals (the last inputs of
    ``input_conv`` and ``global_linear``)."""
    state = dict(init_net.state_dict())
    want = net.state_dict()
    for name in ("value_fc1.weight", "input_conv.weight", "global_linear.weight"):
        w = state.get(name)
        if w is None or name not in want or want[name].shape[1] <= w.shape[1]:
            continue
        extra = want[name].shape[1] - w.shape[1]
        # the size term goes between value_fc1's mean and max inputs; new inputs of an
        # extending feature set (planes, globals) come last
        at = w.shape[1] // 2 if name == "value_fc1.weight" else w.shape[1]
        state[name] = torch.cat((w[:, :at], w.new_zeros(w.shape[0], extra, *w.shape[2:]),
                                 w[:, at:]), dim=1)
    result = net.load_state_dict(state, strict=False)
    for keys, what in ((result.missing_keys, "has no weights for {}: those start at random"),
                       (result.unexpected_keys, "has {}, which the student has not: not used")):
        parts = sorted({k.split(".")[0] for k in keys})
        if parts:
            log(f"note: --init {where} " + what.format(", ".join(parts)))


# ---------------------------------------------------------------------------- settings
def resolve_sizes(options: DistillOptions, head: str, label_sizes: list[int],
                  data: str) -> list[int]:
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


def new_settings(options: DistillOptions, dataset: DistillDataset,
                 sizes: list[int]) -> dict[str, Any]:
    """Settings of a fresh run from the options, defaults and what the labels hold."""
    s = {k: (getattr(options, k) if getattr(options, k) is not None else DEFAULTS[k])
         for k in DEFAULTS}
    s["student"] = str(s["student"]).strip().lower()
    parse_arch(s["student"])
    head = s["head"]
    s["value"] = options.value or ("tanh" if head == "lz" else "wdl")
    s["board_sizes"] = sizes
    s["size_weights"] = dict(s["size_weights"])
    unknown = [n for n in s["size_weights"] if int(n) not in sizes]
    if unknown:
        raise KosumiError(f"--size-weights: board size {unknown[0]} is not trained (sizes "
                          f"{', '.join(map(str, sizes))})")
    data = options.data_name
    s["ownership_weight"] = _output_weight(options.ownership_weight, DEFAULT_OWNERSHIP_WEIGHT,
                                           dataset.has_ownership, head, "ownership", data)
    s["score_weight"] = _output_weight(options.score_weight, DEFAULT_SCORE_WEIGHT,
                                       dataset.has_score, head, "score", data)
    s["warmup"] = options.warmup  # resolved once the number of steps is known
    return s


def parse_size_weights(text: str) -> dict[str, float]:
    """``"19:3"`` or ``"9:1,19:2.5"`` -> ``{"19": 3.0}`` (JSON keys, sorted by size; weights of 1
    dropped, as that is every size's default). Raises KosumiError naming the bad item."""
    weights: dict[int, float] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        size, sep, weight = item.partition(":")
        try:
            n, w = int(size), float(weight)
        except ValueError:
            n, w = 0, math.nan
        if not sep or n < 1 or not (math.isfinite(w) and w > 0):
            raise KosumiError(f"--size-weights: {item!r} is not SIZE:WEIGHT with a weight > 0 "
                              "(e.g. 19:3)")
        if n in weights:
            raise KosumiError(f"--size-weights: board size {n} is given twice")
        weights[n] = w
    return {str(n): w for n, w in sorted(weights.items()) if w != 1.0}


def check_length_options(o: DistillOptions) -> None:
    """--steps and --epochs: at most one, each in range."""
    if o.steps is not None and o.epochs is not None:
        raise KosumiError("give --steps or --epochs, not both")
    if o.steps is not None and o.steps < 1:
        raise KosumiError(f"--steps must be at least 1, not {o.steps}")
    if o.epochs is not None and not o.epochs > 0:
        raise KosumiError(f"--epochs must be > 0, not {o.epochs}")


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
                  score_lead=False, ownership=False, value_pool=o.value_pool or "mean_max")
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
        was = saved.get(name, DEFAULTS.get(name))  # a run saved before the setting existed
        if given != was:
            flag = {"augment": "--augment/--no-augment"}.get(name, "--" + name.replace("_", "-"))
            raise KosumiError(f"--resume: {flag} {given} differs from the run in {where} "
                              f"({was}); resume with the same settings or start a "
                              "new --out")


def student_config(settings: dict[str, Any], provenance: dict[str, Any] | None = None) -> NetConfig:
    return NetConfig(arch=settings["student"], features=settings["features"],
                     head=settings["head"], board_sizes=list(settings["board_sizes"]),
                     value=settings["value"], score_lead=settings["score_weight"] > 0,
                     ownership=settings["ownership_weight"] > 0, provenance=provenance or {},
                     value_pool=settings.get("value_pool", "mean_max"))


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


# ---------------------------------------------------------------------------- result
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
