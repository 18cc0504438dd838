"""Learning curves of a distillation run: ``STUDENT.metrics.jsonl`` -> one PNG.

``plot_learning_curves(records, path)`` draws up to four panels against the training step:

    loss              train total loss; train and validation policy KL
    agreement         validation top-1 and top-5 agreement with the teacher (and train top-1)
    value             validation value MAE (win probability); ownership MSE / score loss if any
    learning rate     the schedule (linear warm-up, cosine decay)

Records are the dicts written by the trainer (``{"step", "lr", "train": {...}, "val": {...}}``);
missing keys are skipped. Rendering uses matplotlib's Agg canvas directly (no pyplot, no
display, the global backend untouched); the file is written atomically.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kosumi.errors import KosumiError


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a metrics JSONL file (blank or broken lines are skipped)."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and "step" in rec:
                    out.append(rec)
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    return out


def _series(records: Sequence[dict[str, Any]], group: str | None,
            key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in records:
        src = r.get(group) if group else r
        if isinstance(src, dict) and isinstance(src.get(key), (int, float)):
            xs.append(r["step"])
            ys.append(float(src[key]))
    return xs, ys


_PANELS: list[tuple[str, list[tuple[str | None, str, str]]]] = [
    ("loss", [("train", "loss", "train loss"), ("train", "policy_kl", "train policy KL"),
              ("val", "policy_kl", "val policy KL")]),
    ("agreement with the teacher", [("val", "top1", "val top-1"), ("val", "top5", "val top-5"),
                                    ("train", "top1", "train top-1")]),
    ("value / ownership / score", [("val", "value_mae", "val value MAE"),
                                   ("val", "ownership_mse", "val ownership MSE"),
                                   ("val", "score_loss", "val score loss")]),
    ("learning rate", [(None, "lr", "lr")]),
]


def plot_learning_curves(records: Sequence[dict[str, Any]], path: str | os.PathLike[str],
                         title: str | None = None) -> Path:
    """Draw the learning curves of ``records`` into the PNG ``path`` (atomically); return it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from kosumi.fileio import atomic_write

    path = Path(path)
    fig = Figure(figsize=(11, 7.5), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2).flatten()
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.07, top=0.92, wspace=0.18, hspace=0.3)
    for ax, (name, series) in zip(axes, _PANELS, strict=True):
        drawn = 0
        for group, key, label in series:
            xs, ys = _series(records, group, key)
            if xs:
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=label)
                drawn += 1
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        if name == "agreement with the teacher" and drawn:
            ax.set_ylim(0.0, 1.0)
    if title:
        fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write(path, buf.getvalue())
    return path
