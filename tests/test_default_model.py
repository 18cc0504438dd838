"""The embedded default teacher: shipped in the package, reachable by the name ``default``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.coords import vertex_to_point
from kosumi.models import DEFAULT_MODEL, resolve_model
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.runtime import load_evaluator

#: lower bound for the default's top-5 agreement with KataGo on the 9x9 reference positions
TOP5_9X9_MIN = 0.80


def test_default_is_a_small_conv_student_of_katago():
    assert resolve_model("default") == DEFAULT_MODEL
    assert DEFAULT_MODEL.stat().st_size <= 2_100_000  # "at most ~2 MB"
    config = read_checkpoint(DEFAULT_MODEL).config
    assert config.head == "conv" and config.features == "basic"
    assert {9, 19} <= set(config.board_sizes)
    assert "g170" in json.dumps(config.provenance)  # distilled from KataGo's g170 net


def test_default_agrees_with_katago_on_reference_positions(reference_positions):
    """A regression guard against the independent oracle (KataGo's own outputs): the shipped
    net's top-5 contains KataGo's best move on most 9x9 reference positions (the model card
    gives the measured figures; the bounds sit below them)."""
    from kosumi.go.coords import parse_color

    evaluator = load_evaluator("default", cache=False)
    hits = total = 0
    for rec in reference_positions:
        if rec["board_size"] != 9:
            continue
        s = GameState(9, rec["komi"])
        for color, vertex in rec["moves"]:
            s.play(vertex_to_point(vertex, 9), parse_color(color))
        ev = evaluator.evaluate_one(s)
        assert abs(ev.policy.sum() - 1) < 1e-5 and 0 <= ev.value <= 1
        ref = [-1.0 if p is None else p for p in rec["katago_raw_nn"]["policy"]]
        best = int(np.argmax(ref + [rec["katago_raw_nn"]["policyPass"]]))
        hits += best in set(np.argsort(-ev.policy)[:5].tolist())
        total += 1
    assert total == 150 and hits / total >= TOP5_9X9_MIN, hits / total


def test_cli_accepts_default():
    out = subprocess.run([sys.executable, "-m", "kosumi", "analyze", "--model", "default",
                          "--moves", "B E5", "--size", "9", "--json"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rec = json.loads(out)
    assert rec["board_size"] == 9 and rec["to_move"] == "W" and len(rec["policy"]) == 81
    info = subprocess.run([sys.executable, "-m", "kosumi", "inspect", "default", "--json"],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    assert json.loads(info)["parameters"] > 0
