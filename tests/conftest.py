"""Shared test helpers: locating ../shared and the peer programs.

Tests that need files from ../shared (the KataGo teacher, its reference outputs) or peer
programs (GNU Go, Leela Zero) skip with a clear reason when they are absent, and FAIL instead
when KOSUMI_REQUIRE_REFERENCE=1 (CI sets it), so a missing install never passes silently.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REFERENCE_JSONL = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"
GNUGO = "/usr/games/gnugo"
LEELAZ = "/usr/games/leelaz"


def require_reference() -> bool:
    return os.environ.get("KOSUMI_REQUIRE_REFERENCE") == "1"


def missing(reason: str) -> None:
    """Skip (or fail under KOSUMI_REQUIRE_REFERENCE=1) because something is absent."""
    if require_reference():
        pytest.fail(f"{reason} (required: KOSUMI_REQUIRE_REFERENCE=1)")
    pytest.skip(reason)


def shared_path(relative: str) -> Path:
    """A file under ../shared, or skip/fail when it is absent."""
    path = SHARED / relative
    if not path.exists():
        missing(f"{path} is absent (the shared models/reference folder beside the repository)")
    return path


def require_program(path: str) -> str:
    """A peer program (e.g. /usr/games/gnugo), or skip/fail when it is not installed."""
    found = path if os.access(path, os.X_OK) else shutil.which(Path(path).name)
    if not found:
        missing(f"{path} is not installed (apt-get install gnugo leela-zero)")
    return found


def replay_reference(record: dict):
    """A reference position (raw_nn.jsonl) as a GameState, replayed from its move list under its
    rules (kosumi's own reader of that format, ``runtime.analyze.position_from_json``)."""
    from kosumi.runtime.analyze import position_from_json

    return position_from_json(json.dumps(record), record.get("id", "reference")).state


@pytest.fixture(scope="session")
def reference_positions() -> list[dict]:
    """The 300 positions of KataGo's raw_nn.jsonl with the real engine's outputs."""
    path = shared_path("reference/katago-g170-b6c96/raw_nn.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def gnugo() -> str:
    return require_program(GNUGO)


@pytest.fixture
def leelaz() -> str:
    return require_program(LEELAZ)


def randomise_bn(net, g) -> None:
    """Non-trivial statistics and affine parameters for every BatchNorm2d of ``net`` (drawn from
    the torch generator ``g``), so that exporters' BN mappings are really exercised."""
    import torch

    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.3)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.2)


def random_net_file(path: Path, arch: str = "b2c16", features: str = "basic", head: str = "conv",
                    board_sizes=(9, 19), seed: int = 0, bn: bool = True, **config) -> Path:
    """A random kosumi net written as a checkpoint; ``bn`` randomises its BatchNorm statistics
    and affine parameters so that folding them is really exercised."""
    import torch

    from kosumi.nets.checkpoint import save_checkpoint
    from kosumi.nets.config import NetConfig
    from kosumi.nets.resnet import KosumiNet

    if head == "lz":
        config.setdefault("value", "tanh")
        config.setdefault("score_lead", False)
        config.setdefault("ownership", False)
        board_sizes = (19,)
    cfg = NetConfig(arch=arch, features=features, head=head, board_sizes=list(board_sizes),
                    **config)
    net = KosumiNet.random(cfg, seed)
    if bn:
        randomise_bn(net, torch.Generator().manual_seed(seed + 100))
    save_checkpoint(path, net)
    return path


def quantized_net_files(root: Path, seed: int, positions: int = 64) -> tuple[Path, Path, Path]:
    """(float net, calibration positions, its int8 net made by ``kosumi quantize``): a random
    9x9 b2c16 quantized the way a user would."""
    from typer.testing import CliRunner

    from kosumi.cli import app
    from kosumi.distill.positions import Position, write_positions
    from kosumi.runtime.bench import bench_states

    net = random_net_file(root / "net.safetensors", arch="b2c16", board_sizes=(9,), seed=seed)
    calib = root / "calib"
    write_positions(calib, [Position.from_state(s, f"c:{i}") for i, s in
                            enumerate(bench_states(9, positions, seed=seed - 2))])
    q = root / "q.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(net), "--calib", str(calib), "--out", str(q)])
    assert r.exit_code == 0, r.output
    return net, calib, q
