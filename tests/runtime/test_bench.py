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


@pytest.mark.parametrize("saturates", [False, True])
def test_bench_says_when_int8_weights_are_held_as_uint8(int8_net_127, monkeypatch, saturates):
    """On a CPU whose uint8 x int8 pairs saturate (simulated), a +-127 net's row says its
    weights run as uint8, and the table says so in one line; elsewhere neither does."""
    import kosumi.runtime.cpu as cpu
    from kosumi.runtime.bench import BenchPlan, format_bench, run_bench

    monkeypatch.setattr(cpu, "int8_pairs_saturate", lambda: saturates)
    plan = BenchPlan(models=[str(int8_net_127)], backends=["onnxruntime"], batches=[2],
                     sizes=[9], seconds=0.01, rounds=1, memory=False)
    report = run_bench(plan)
    assert [r.get("int8_weights") for r in report["rows"]] == (["uint8"] if saturates
                                                                else [None])
    line = [x for x in format_bench(report).splitlines() if "held as uint8" in x]
    assert (line == [f"int8 weights held as uint8 (exact; +-127 would saturate without VNNI): "
                     f"{int8_net_127.name}"]) == saturates and (line == []) != saturates


def test_bench_runs_a_registered_backend_and_refuses_an_unknown_one(net, monkeypatch):
    """A backend registered by ``register_backend`` (a plug point) is benched like the built-in
    ones; a name nobody registered is a one-line error naming the known ones."""
    from kosumi.errors import KosumiError
    from kosumi.runtime import backend as B
    from kosumi.runtime.bench import BenchPlan, run_bench

    monkeypatch.setitem(B.BACKENDS, "numpy-twin", B.BackendInfo(
        "numpy-twin", "kosumi.runtime.numpy_backend:open_numpy"))
    plan = BenchPlan.parse([str(net)], "numpy,numpy-twin", "2", "9", seconds=0.02, rounds=1,
                           memory=False)
    rows = run_bench(plan)["rows"]
    assert [r["backend"] for r in rows] == ["numpy", "numpy-twin"]
    assert all(r["evals_per_s"] > 0 for r in rows)
    with pytest.raises(KosumiError, match=r"unknown backend 'tpu'.*numpy-twin"):
        BenchPlan.parse([str(net)], "tpu", "2", "9")
