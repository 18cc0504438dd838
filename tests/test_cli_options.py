"""The runtime options every net-running command takes (kosumi.cli_options)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.go.board import default_komi


@pytest.fixture
def net(random_net) -> Path:
    return random_net


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
