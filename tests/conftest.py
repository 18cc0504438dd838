"""Fixtures shared by the tests; the helper functions and constants are in helpers.py.

Fixtures that need files from ../shared (the KataGo teacher, its reference outputs) or peer
programs (GNU Go, Leela Zero) skip with a clear reason when they are absent, and FAIL instead
when KOSUMI_REQUIRE_REFERENCE=1 (CI sets it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import (
    GNUGO,
    KATAGO_MODEL,
    LEELAZ,
    random_net_file,
    read_reference_positions,
    replay_reference,
    require_program,
    shared_path,
)

from kosumi.go.board import GameState


@pytest.fixture(autouse=True)
def onnx_cache(tmp_path_factory, monkeypatch):
    """ONNX files exported on the fly (for onnxruntime) are cached in this session's temporary
    folder, never in the user's cache."""
    monkeypatch.setenv("KOSUMI_ONNX_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "onnx"))


@pytest.fixture(scope="session")
def katago_model() -> Path:
    """KataGo's g170 b6c96 net (.bin.gz) in ../shared/models."""
    return shared_path(KATAGO_MODEL)


@pytest.fixture(scope="session")
def reference_positions() -> list[dict]:
    """The 300 positions of KataGo's raw_nn.jsonl with the real engine's outputs."""
    return read_reference_positions()


@pytest.fixture
def reference_states(reference_positions) -> list[GameState]:
    """The reference positions replayed into GameStates (``helpers.replay_reference``), in the
    file's order; fresh for each test, so a test may play on them."""
    return [replay_reference(r) for r in reference_positions]


@pytest.fixture(scope="session")
def random_net(tmp_path_factory) -> Path:
    """A small random kosumi net (b1c8, basic features, conv head, 9x9 and 19x19, BatchNorm
    statistics randomised) written as a checkpoint; read-only for the tests."""
    return random_net_file(tmp_path_factory.mktemp("random_net") / "b1c8.safetensors",
                           arch="b1c8")


@pytest.fixture(scope="session")
def random_net_9x9(tmp_path_factory) -> Path:
    """A small random 9x9-only kosumi net (b2c16, BatchNorm randomised, seed 0)."""
    return random_net_file(tmp_path_factory.mktemp("random_net") / "b2c16-9.safetensors",
                           arch="b2c16", board_sizes=(9,))


@pytest.fixture(scope="session")
def calib_positions(tmp_path_factory) -> Path:
    """Calibration positions for quantization: seeded random games, 96 on 9x9 and 48 on 19x19
    (other games than any test position)."""
    from kosumi.distill.positions import Position, write_positions
    from kosumi.runtime.bench import bench_states

    path = tmp_path_factory.mktemp("calib") / "pos"
    states = bench_states(9, 96, seed=5) + bench_states(19, 48, seed=6)
    write_positions(path, [Position.from_state(s, f"calib:{i}") for i, s in enumerate(states)])
    return path


@pytest.fixture(scope="session")
def float_net_b2c16(tmp_path_factory) -> Path:
    """A random b2c16 net (9x9 and 19x19, BatchNorm randomised, seed 3): the float net the
    quantization tests quantize."""
    return random_net_file(tmp_path_factory.mktemp("q") / "b2c16.safetensors", arch="b2c16",
                           seed=3)


@pytest.fixture(scope="session")
def int8_net_b2c16(float_net_b2c16, calib_positions, tmp_path_factory) -> Path:
    """``float_net_b2c16`` quantized to int8 by ``kosumi quantize`` on ``calib_positions``."""
    from typer.testing import CliRunner

    from kosumi.cli import app

    out = tmp_path_factory.mktemp("q") / "b2c16-int8.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(float_net_b2c16), "--bits", "8", "--calib",
                                 str(calib_positions), "--calib-size", "96", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "sensitivity" in r.output and "wrote" in r.output
    assert "convolution equal to the integer reference or 1 LSB apart" in " ".join(r.output.split())
    return out


@pytest.fixture(scope="session")
def int8_net_127(float_net_b2c16, calib_positions, tmp_path_factory) -> Path:
    """``float_net_b2c16`` quantized with weights in +-127 whatever this CPU is (x86 without
    VNNI would choose +-63), every layer int8 (``--keep-float none``: the stem and heads too)."""
    from typer.testing import CliRunner

    from kosumi.cli import app

    out = tmp_path_factory.mktemp("q127") / "b2c16-127.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(float_net_b2c16), "--calib",
                                 str(calib_positions), "--calib-size", "96", "--weight-range",
                                 "127", "--keep-float", "none", "--out", str(out)])
    assert r.exit_code == 0, r.output
    # held as this CPU needs (uint8 without VNNI), ONNX Runtime computes the reference's integers
    assert "convolution equal to the integer reference or 1 LSB apart" in " ".join(r.output.split())
    return out


@pytest.fixture(scope="session")
def init_b1c8(tmp_path_factory) -> Path:
    """A b1c8 net for 9x9 and 19x19 made by ``kosumi init`` (seed 4)."""
    from helpers import cli

    path = tmp_path_factory.mktemp("init") / "b1c8.kosumi"
    r = cli("init", "--arch", "b1c8", "--features", "basic", "--head", "conv", "--board-sizes",
            "9,19", "--seed", "4", "--out", path)
    assert r.exit_code == 0, r.output
    return path


@pytest.fixture(scope="session")
def plain_b1c8(tmp_path_factory) -> Path:
    """A random b1c8 conv net for 9x9 and 19x19 (``KosumiNet.random``, seed 5, BatchNorm as
    initialised) saved as ``b1c8.kosumi``."""
    from kosumi.nets.checkpoint import save_checkpoint
    from kosumi.nets.config import NetConfig
    from kosumi.nets.resnet import KosumiNet

    path = tmp_path_factory.mktemp("models") / "b1c8.kosumi"
    save_checkpoint(path, KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9, 19]), 5))
    return path


@pytest.fixture(scope="session")
def viz_nets(tmp_path_factory) -> dict[str, Path]:
    """A float 9x9 b2c16 net, its calibration positions and its int8 net (seed 5, 48 positions),
    for the viz tests."""
    from helpers import quantized_net_files

    root = tmp_path_factory.mktemp("viz")
    net, calib, q = quantized_net_files(root, seed=5, positions=48)
    return {"root": root, "float": net, "int8": q, "calib": calib}


@pytest.fixture
def gnugo() -> str:
    return require_program(GNUGO)


@pytest.fixture
def leelaz() -> str:
    return require_program(LEELAZ)
