"""The run's metrics log, ``NAME.metrics.jsonl``: one compact JSON object per evaluation
(``kosumi.viz.curves.read_metrics`` reads it back). Appended as the run goes; on ``--resume`` cut
back to the saved step, atomically, so that a resumed run re-logs what followed and no step
appears twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kosumi.errors import WriteFailed
from kosumi.fileio import atomic_write


def truncate_metrics_log(path: Path, last_step: int) -> list[dict[str, Any]]:
    """Keep the records up to ``last_step``; return them."""
    from kosumi.viz.curves import read_metrics

    if not path.exists():
        return []
    kept = [r for r in read_metrics(path) if r["step"] <= last_step]
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in kept)
    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as e:
        raise WriteFailed(f"{path}: cannot write ({e.strerror or e})") from None
    return kept


def append_metrics_log(path: Path, record: dict[str, Any]) -> None:
    """Add one record (flushed: a crash loses at most the line being written)."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
            f.flush()
    except OSError as e:
        raise WriteFailed(f"{path}: cannot write ({e.strerror or e})") from None


def remove_metrics_log(path: Path) -> None:
    """Start a new run's log (a previous run's file is deleted)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as e:
        raise WriteFailed(f"{path}: cannot remove ({e.strerror or e})") from None
