"""The one door's backends: choosing (auto), refusing clearly, the TensorRT plan container, the
CPU capability line, ``kosumi bench`` and the runtime options every net-running command takes."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import random_net_file, shared_path
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.errors import KosumiError
from kosumi.go.board import GameState, default_komi
from kosumi.nets.trt_plan import MAGIC, plan_bytes, read_plan
from kosumi.runtime import BACKENDS, load_evaluator
from kosumi.runtime.backend import choose_backend
from kosumi.runtime.cpu import cpu_capabilities, cpu_line
from kosumi.runtime.options import LoadOptions
from kosumi.runtime.tensorrt_backend import check_plan_fits


@pytest.fixture(autouse=True)
def onnx_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KOSUMI_ONNX_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "onnx"))


@pytest.fixture(scope="module")
def net(tmp_path_factory) -> Path:
    return random_net_file(tmp_path_factory.mktemp("nets") / "b1c8.safetensors", arch="b1c8")


def one_line(fn, *needles: str) -> str:
    with pytest.raises(KosumiError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg, msg
    for n in needles:
        assert n in msg, msg
    return msg


# ---------------------------------------------------------------------------- choosing
def test_auto_picks_onnxruntime_on_the_cpu_and_says_so(net, capsys):
    assert choose_backend("kosumi", False, LoadOptions())[0] == "onnxruntime"
    assert choose_backend("onnx", True, LoadOptions())[0] == "onnxruntime"
    ev = load_evaluator(net, announce=True, cache=False)
    assert ev.backend.name == "onnxruntime"
    assert "backend auto -> onnxruntime" in capsys.readouterr().err


def test_every_backend_gives_the_same_evaluation(net):
    s = GameState(9)
    base = load_evaluator(net, backend="torch", cache=False).evaluate_one(s)
    for name in ("onnxruntime", "numpy"):
        e = load_evaluator(net, backend=name, cache=False).evaluate_one(s)
        np.testing.assert_allclose(e.policy, base.policy, atol=1e-5)
        assert abs(e.value - base.value) < 1e-5


def test_refusals_are_one_line(net, monkeypatch, tmp_path):
    one_line(lambda: load_evaluator(net, backend="tpu"), "unknown backend 'tpu'")
    one_line(lambda: load_evaluator(net, backend="tensorrt"), "plan files",
             "kosumi export MODEL --format tensorrt")
    one_line(lambda: load_evaluator(net, backend="numpy", device="cuda"), "CPU only")
    one_line(lambda: load_evaluator(net, device="tpu:1"), "unknown device")
    one_line(lambda: load_evaluator(net, precision="fp8"), "unknown precision")
    one_line(lambda: load_evaluator(net, backend="torch", precision="fp16"), "CUDA only")
    one_line(lambda: load_evaluator(net, symmetries=0), "symmetries must be 1..8")
    import torch

    if not torch.cuda.is_available():  # this machine has no GPU: --device cuda is refused
        one_line(lambda: load_evaluator(net, backend="torch", device="cuda"), "no CUDA device")
        one_line(lambda: load_evaluator(net, backend="onnxruntime", device="cuda"),
                 "sees no CUDA device")
        one_line(lambda: load_evaluator(net, device="cuda:0"), "--device cuda")
    # a backend whose package is missing names the extra to install
    info = BACKENDS["onnxruntime"]
    monkeypatch.setitem(BACKENDS, "onnxruntime",
                        type(info)(**{**info.__dict__, "requires": ("no_such_module_kosumi",)}))
    one_line(lambda: load_evaluator(net, backend="onnxruntime"),
             "'onnxruntime' is not installed", "pip install 'kosumi[onnx]'")
    assert load_evaluator(net, cache=False).backend.name == "torch"  # auto falls back
    r = CliRunner().invoke(app, ["analyze", "--model", str(net), "--moves", "D4",
                                 "--backend", "onnxruntime"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output


def test_a_net_asked_for_a_size_it_does_not_play(net):
    one_line(lambda: load_evaluator(net, cache=False).evaluate([GameState(13)]),
             "does not play 13x13")


def test_runtime_options_on_every_net_command(net, tmp_path):
    runner = CliRunner()
    for cmd in ("analyze", "gtp", "selfplay", "label"):
        text = runner.invoke(app, [cmd, "--help"]).output
        for opt in ("--backend", "--device", "--threads", "--symmetries"):
            assert opt in text, (cmd, opt)
    r = runner.invoke(app, ["analyze", "--model", str(net), "--moves", "E5", "--size", "9",
                            "--backend", "numpy", "--symmetries", "8", "--json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.output)
    assert rec["komi"] == default_komi(9) == 7.0  # one komi default per board size
    pos = tmp_path / "pos"
    r = runner.invoke(app, ["selfplay", "--model", str(net), "--games", "1", "--size", "9",
                            "--policy-temperature", "1", "--max-moves", "12", "--backend",
                            "numpy", "--out", str(pos)])
    assert r.exit_code == 0 and "teacher on numpy" in r.output, r.output
    r = runner.invoke(app, ["label", "--teacher", str(net), "--positions", str(pos),
                            "--out", str(tmp_path / "lab"), "--backend", "onnxruntime"])
    assert r.exit_code == 0 and "teacher on onnxruntime" in r.output, r.output
    assert default_komi(19) == 7.5 and default_komi(13) == 7.5


def test_labels_agree_across_backends(tmp_path):
    """KataGo's teacher labelling on onnxruntime vs torch: the same labels up to float
    rounding (policy KL <= 1e-4)."""
    from kosumi.distill.labels import LabelStore, label_positions
    from kosumi.distill.positions import Position, write_positions
    from kosumi.runtime.bench import bench_states

    model = shared_path("models/g170-b6c96-s175395328-d26788732.bin.gz")
    write_positions(tmp_path / "pos", [Position.from_state(s, f"b:{i}") for i, s in
                                       enumerate(bench_states(9, 24) + bench_states(19, 8))])
    for b in ("torch", "onnxruntime"):
        label_positions(model, tmp_path / "pos", tmp_path / b, backend=b, batch=16)
    a = {r.key: r for r in LabelStore(tmp_path / "torch").records()}
    b = {r.key: r for r in LabelStore(tmp_path / "onnxruntime").records()}
    assert a.keys() == b.keys() and len(a) == 32
    kl = [float(np.sum(x.policy * (np.log(np.maximum(x.policy, 1e-30))
                                   - np.log(np.maximum(b[k].policy, 1e-30)))))
          for k, x in a.items()]
    assert max(kl) <= 1e-4
    assert max(float(np.abs(x.value - b[k].value).max()) for k, x in a.items()) < 1e-4


# ---------------------------------------------------------------------------- TensorRT plans
def test_plan_container_reads_back_and_refuses_damage(tmp_path):
    header = {"config": {"arch": "b1c8", "board_sizes": [9]}, "precision": "fp16",
              "tensorrt": "10.9.0", "gpu": "NVIDIA H200", "compute_capability": "9.0",
              "profiles": [{"size": 9, "batch": [1, 16, 64]}]}
    path = tmp_path / "net.plan"
    path.write_bytes(plan_bytes(header, b"ENGINE" * 10))
    got, engine = read_plan(path)
    assert engine == b"ENGINE" * 10 and got["gpu"] == "NVIDIA H200"
    r = CliRunner().invoke(app, ["inspect", str(path)])
    assert r.exit_code == 0 and "kosumi TensorRT plan (fp16)" in r.output, r.output
    data = path.read_bytes()
    cases = {
        "truncated.plan": data[:-5],
        "flipped.plan": data[:-3] + b"X" + data[-2:],
        "version.plan": MAGIC + struct.pack("<IQ", 9, 2) + b"{}",
        "bare.plan": b"\x00" * 100,
    }
    for name, content in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        r = CliRunner().invoke(app, ["analyze", "--model", str(p), "--moves", "D4"])
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and str(p) in lines[0], (name, r.output)
    gpu = {"gpu": "NVIDIA H200", "compute_capability": "9.0"}
    check_plan_fits(path, got, "10.9.0", gpu)
    one_line(lambda: check_plan_fits(path, got, "11.0.0", gpu), "built with TensorRT 10.9.0",
             "this is TensorRT 11.0.0", "rebuild")
    one_line(lambda: check_plan_fits(path, got, "10.9.0", {"gpu": "NVIDIA A100",
                                                           "compute_capability": "8.0"}),
             "built for NVIDIA H200 (sm 9.0), this GPU is NVIDIA A100")


def test_tensorrt_export_without_a_gpu_is_one_line(net, tmp_path):
    import importlib.util

    import torch

    if importlib.util.find_spec("tensorrt") is not None and torch.cuda.is_available():
        pytest.skip("a GPU with TensorRT is here: benchmarks/device_check.py checks TensorRT")
    r = CliRunner().invoke(app, ["export", str(net), "--format", "tensorrt", "--out",
                                 str(tmp_path / "n.plan")])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert "tensorrt" in r.output.lower() or "CUDA" in r.output
    assert not (tmp_path / "n.plan").exists()


# ---------------------------------------------------------------------------- cpu, bench
def test_cpu_capabilities_read_the_flags():
    caps = cpu_capabilities()
    assert caps["cores"] >= 1 and caps["arch"]
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith(("flags", "Features"))).split(":")[1].split()
    except (OSError, StopIteration):
        pytest.skip("no /proc/cpuinfo flags on this machine")
    if "avx2" in flags or "avx2" in caps:
        assert caps["avx2"] == ("avx2" in flags)
        assert caps["vnni"] == bool({"avx512_vnni", "avx_vnni"} & set(flags))
        assert ("AVX2" in cpu_line()) == ("avx2" in flags)


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
