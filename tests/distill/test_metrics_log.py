"""The run's metrics log (kosumi.distill.metrics_log): appended one JSON line per evaluation,
cut back to a step on resume, removed for a new run.

Oracles: the file's lines read back with ``json`` and compared with the records written.
"""

from __future__ import annotations

import json

from kosumi.distill.metrics_log import (
    append_metrics_log,
    remove_metrics_log,
    truncate_metrics_log,
)


def lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_append_truncate_remove(tmp_path):
    path = tmp_path / "run.metrics.jsonl"
    records = [{"step": s, "loss": 1.0 / s, "size": 9} for s in (10, 20, 30, 40)]
    for r in records:
        append_metrics_log(path, r)
    text = path.read_text()
    assert text.count("\n") == 4 and " " not in text  # compact, one line each
    assert lines(path) == records
    assert truncate_metrics_log(path, 25) == records[:2]
    assert lines(path) == records[:2]
    append_metrics_log(path, {"step": 30, "loss": 0.5, "size": 9})  # the resumed run re-logs
    assert [r["step"] for r in lines(path)] == [10, 20, 30]
    assert truncate_metrics_log(path, 0) == [] and path.read_text() == ""
    remove_metrics_log(path)
    assert not path.exists()
    remove_metrics_log(path)  # nothing to remove: fine
    assert truncate_metrics_log(tmp_path / "never.jsonl", 5) == []
    assert not (tmp_path / "never.jsonl").exists()
