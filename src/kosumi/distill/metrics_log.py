"""The run's metrics log, ``NAME.metrics.jsonl``: one compact JSON object per evaluation
(``kosumi.viz.curves.read_metrics`` reads it back). Appended as the run goes; on ``--resume`` cut
back to the saved step, atomically, so that a resumed run re-logs what followed and no step
appears twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kosumi.fileio import atomic_write, output_errors


def truncate_metrics_log(path: Path, last_step: int) -> list[dict[str, Any]]:
    """Keep the records up to ``last_step``; return them."""
    from kosumi.viz.curves import read_metrics

    if not path.exists():
        return []
    kept = [r for r in read_metrics(path) if r["step"] <= last_step]
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in kept)
    with output_errors(path):
        atomic_write(path, text.encode("utf-8"))
    return kept


def append_metrics_log(path: Path, record: dict[str, Any]) -> None:
    """Add one record (flushed: a crash loses at most the line being written)."""
    with output_errors(path), open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, separators=(",", ":")) + "\n")
        f.flush()


def remove_metrics_log(path: Path) -> None:
    """Start a new run's log (a previous run's file is deleted)."""
    with output_errors(path, "remove"):
        path.unlink(missing_ok=True)
