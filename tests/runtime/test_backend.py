"""The one door's backends (kosumi.runtime.backend): choosing (auto), refusing clearly, a
size a net does not play."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import one_line
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.go.board import GameState
from kosumi.runtime import BACKENDS, load_evaluator
from kosumi.runtime.backend import choose_backend
from kosumi.runtime.options import LoadOptions


@pytest.fixture
def net(random_net) -> Path:
    return random_net


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
    one_line(lambda: load_evaluator(net, symmetries=9), "symmetries must be 0..8")
    import torch

    if not torch.cuda.is_available():  # this machine has no GPU: --device cuda is refused
        one_line(lambda: load_evaluator(net, backend="torch", device="cuda"), "no CUDA device")
        one_line(lambda: load_evaluator(net, backend="onnxruntime", device="cuda"),
                 "sees no CUDA device")
        one_line(lambda: load_evaluator(net, device="cuda:0"), "--device cuda")
    # a backend whose package is missing names the extra to install
    info = BACKENDS["onnxruntime"]
    monkeypatch.setitem(BACKENDS, "onnxruntime",
                        type(info)(**{**info.__dict__, "requires": ("no_such_module_kosumi",),
                                      "extra": "onnx"}))
    one_line(lambda: load_evaluator(net, backend="onnxruntime"),
             "'onnxruntime' is not installed: it needs no_such_module_kosumi, which is missing",
             "pip install 'kosumi[onnx]'")
    assert load_evaluator(net, cache=False).backend.name == "torch"  # auto falls back
    r = CliRunner().invoke(app, ["analyze", "--model", str(net), "--moves", "D4",
                                 "--backend", "onnxruntime"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output


def test_a_net_asked_for_a_size_it_does_not_play(net):
    one_line(lambda: load_evaluator(net, cache=False).evaluate([GameState(13)]),
             "does not play 13x13")


def test_a_backend_names_the_extras_of_the_packages_it_misses():
    """The hint comes from kosumi.extras (pyproject's extras): tensorrt is not installed here,
    a module no extra installs gets no hint, a backend's own extra wins."""
    from kosumi.runtime.backend import BackendInfo

    trt = BackendInfo("t", "m:f", requires=("tensorrt",))
    assert trt.not_installed().endswith("(pip install 'kosumi[tensorrt]')")
    both = BackendInfo("t", "m:f", requires=("tensorrt", "no_such_module_kosumi"))
    assert "'kosumi[tensorrt]'" in both.not_installed()
    assert "pip install" not in BackendInfo("t", "m:f", requires=("no_such_module_kosumi",)
                                            ).not_installed()
    assert "'kosumi[mine]'" in BackendInfo("t", "m:f", requires=("no_such_module_kosumi",),
                                           extra="mine").not_installed()


def test_auto_takes_a_backend_that_runs_an_int8_net(int8_net_b2c16, monkeypatch, capsys):
    """An int8 net runs on the numpy and onnxruntime backends only: without onnxruntime, auto
    must not take torch (which refuses it) but numpy."""
    assert choose_backend("kosumi", False, LoadOptions(), quantized=True)[0] == "onnxruntime"
    import dataclasses

    monkeypatch.setitem(BACKENDS, "onnxruntime", dataclasses.replace(
        BACKENDS["onnxruntime"], requires=("no_such_module_kosumi",)))
    assert choose_backend("kosumi", False, LoadOptions())[0] == "torch"
    assert choose_backend("kosumi", False, LoadOptions(), quantized=True)[0] == "numpy"
    ev = load_evaluator(int8_net_b2c16, announce=True, cache=False)
    assert ev.backend.name == "numpy"
    assert "backend auto -> numpy" in capsys.readouterr().err
    assert 0.0 <= ev.evaluate_one(GameState(9)).value <= 1.0
