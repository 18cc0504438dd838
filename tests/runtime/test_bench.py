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


@pytest.mark.parametrize("saturates,tiles", [(False, False), (True, False), (False, True)])
def test_bench_says_how_int8_weights_are_held(int8_net_127, monkeypatch, saturates, tiles):
    """On a CPU whose uint8 x int8 pairs saturate (simulated), a +-127 net's row says its
    weights run as uint8; on one with AMX tiles where the probe finds the offset form faster
    (both simulated), with zero point -1; the table says
    so in one line; elsewhere neither does."""
    import kosumi.runtime.cpu as cpu
    import kosumi.runtime.onnxruntime_backend as B
    from kosumi.runtime.bench import BenchPlan, format_bench, run_bench

    monkeypatch.setattr(cpu, "int8_pairs_saturate", lambda: saturates)
    monkeypatch.setattr(cpu, "int8_tiles", lambda: tiles)
    monkeypatch.setattr(B, "weight_form_timings", lambda *_: {"int8": 2.0, "offset": 1.0})
    plan = BenchPlan(models=[str(int8_net_127)], backends=["onnxruntime"], batches=[2],
                     sizes=[9], seconds=0.01, rounds=1, memory=False)
    report = run_bench(plan)
    form = "uint8" if saturates else "offset" if tiles else None
    assert [r.get("int8_weights") for r in report["rows"]] == [form]
    lines = [x for x in format_bench(report).splitlines() if "int8 weights held" in x]
    want = {"uint8": "int8 weights held as uint8 (exact; +-127 would saturate without VNNI)",
            "offset": "int8 weights held with zero point -1 (same integers, ONNX Runtime's AMX "
                      "kernels)"}
    assert lines == ([f"{want[form]}: {int8_net_127.name}"] if form else [])


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


def test_bench_times_katago_itself_as_the_peer_in_the_same_run(tmp_path):
    """A KataGo model on ONNX Runtime fp32 and fp16 and on KataGo's own engine (its benchmark
    command, the oracle of its speed), one run."""
    import gzip

    from helpers import KATAGO_ENGINE, shared_path
    from katago_writer import MODERN, KataGoWriter

    engine = shared_path(KATAGO_ENGINE)
    model = tmp_path / "tiny15.bin.gz"
    model.write_bytes(gzip.compress(KataGoWriter(True, seed=2).model(version=15, blocks=MODERN)))
    r = subprocess.run([sys.executable, "-m", "kosumi", "bench", str(model), "--backend",
                        "onnxruntime,onnxruntime:fp16", "--batch", "1", "--size", "9",
                        "--seconds", "0.02", "--rounds", "1", "--no-memory", "--json",
                        "--katago", str(engine)],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [x["backend"] for x in rows] == ["onnxruntime", "onnxruntime:fp16", "katago"]
    peer = rows[-1]
    assert peer["evals_per_s"] > 0 and peer["katago_avg_batch"] == 1.0
    assert peer["x_first"] == pytest.approx(peer["evals_per_s"] / rows[0]["evals_per_s"],
                                            rel=0.01)


def test_bench_refuses_a_bad_precision_and_a_missing_engine(net, tmp_path):
    for args, words in ((["--backend", "onnxruntime:int4"], "fp32 or fp16"),
                        (["--katago", str(tmp_path / "nope")], "--katago")):
        r = subprocess.run([sys.executable, "-m", "kosumi", "bench", str(net), "--size", "9",
                            "--batch", "1", "--no-memory", *args],
                           capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
