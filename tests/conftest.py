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


@pytest.fixture
def gnugo() -> str:
    return require_program(GNUGO)


@pytest.fixture
def leelaz() -> str:
    return require_program(LEELAZ)
