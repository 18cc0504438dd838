"""``kosumi export --format tensorrt`` (kosumi.export.tensorrt) where no GPU is: one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kosumi.cli import app


@pytest.fixture
def net(random_net) -> Path:
    return random_net


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
