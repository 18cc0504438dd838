"""``kosumi bench`` (kosumi.runtime.bench): every backend x batch cell, interleaved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def net(random_net) -> Path:
    return random_net


def test_bench_json_interleaves_every_cell(net):
    r = subprocess.run([sys.executable, "-m", "kosumi", "bench", str(net), "--backend",
                        "torch,onnxruntime,numpy", "--batch", "1,4", "--size", "9",
                        "--seconds", "0.02", "--rounds", "2", "--json"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    rows = report["rows"]
    assert [(x["backend"], x["batch"]) for x in rows] == [
        (b, n) for b in ("torch", "onnxruntime", "numpy") for n in (1, 4)]
    for row in rows:
        assert row["evals_per_s"] > 0 and row["latency_ms_p99"] >= row["latency_ms_p50"] > 0
        assert row["peak_rss_mb"] > row["model_rss_mb"] > 0
        assert row["first_backend"] == "torch"
    assert all(x["x_first"] == 1.0 for x in rows if x["backend"] == "torch")
    assert report["machine"]["cpu"]["arch"]
