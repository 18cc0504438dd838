"""The embedded nets: shipped in the package, reachable by their names ``default`` (the
teacher; a set of ``default-9`` and ``default-19``) and ``tiny`` (a 47 KB pack that beats
KataGo's raw policy on 9x9), checked against KataGo's own outputs on the reference positions."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import katago_policy, replay_reference

from kosumi.models import (
    DEFAULT_9_MODEL,
    DEFAULT_19_MODEL,
    DEFAULT_MODEL,
    TINY_MODEL,
    resolve_model,
)
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.runtime import load_evaluator
from kosumi.runtime.agreement import kl

#: lower bound for the default's top-5 agreement with KataGo on the 9x9 reference positions
TOP5_9X9_MIN = 0.80
#: bounds for tiny on the same positions (docs/models/tiny.md gives the measured figures)
TINY_TOP1_9X9_MIN, TINY_KL_9X9_MAX = 0.56, 0.45


def katago_9x9(reference_positions):
    """(state, KataGo's policy over points + pass) of each 9x9 reference position."""
    return [(replay_reference(r), katago_policy(r)) for r in reference_positions
            if r["board_size"] == 9]


def test_default_is_a_small_conv_student_of_katago():
    assert resolve_model("default") == DEFAULT_MODEL
    assert DEFAULT_MODEL.stat().st_size <= 2_100_000  # "at most ~2 MB"
    config = read_checkpoint(DEFAULT_MODEL).config
    assert config.head == "conv" and config.features == "basic"
    assert {9, 19} <= set(config.board_sizes)
    assert "g170" in json.dumps(config.provenance)  # distilled from KataGo's g170 net


@pytest.mark.parametrize("name, file, size, data, features", [
    ("default-9", DEFAULT_9_MODEL, 9, "runs/s35/lab9", "basic"),
    ("default-19", DEFAULT_19_MODEL, 19, "runs/s33/lab", "basic_ladder")])
def test_default_plays_each_board_with_a_student_of_katago(name, file, size, data, features):
    assert resolve_model(name) == file
    assert file.stat().st_size <= 2_100_000
    config = read_checkpoint(file).config
    assert config.board_sizes == [size] and config.arch == "b6c64"
    assert config.features == features  # version 7's 19x19 net reads ladders
    assert "g170" in json.dumps(config.provenance)
    assert config.provenance["data"]["path"] == data
    # both descend from version 5 (the set's base) by fine-tunes on one board's positions: the
    # --init lineage nests each init's own init
    base = hashlib.sha256(DEFAULT_MODEL.read_bytes()).hexdigest()
    lineage, init = [], config.provenance["init"]
    while init:
        lineage.append(init["sha256"])
        init = init.get("init")
    assert lineage[-1] == base, lineage


def test_default_agrees_with_katago_on_reference_positions(reference_positions):
    """A regression guard against the independent oracle (KataGo's own outputs): the shipped
    net's top-5 contains KataGo's best move on most 9x9 reference positions (the model card
    gives the measured figures; the bounds sit below them)."""
    cases = katago_9x9(reference_positions)
    evaluator = load_evaluator("default", cache=False)
    hits = 0
    for s, ref in cases:
        ev = evaluator.evaluate_one(s)
        assert abs(ev.policy.sum() - 1) < 1e-5 and 0 <= ev.value <= 1
        hits += int(np.argmax(ref)) in set(np.argsort(-ev.policy)[:5].tolist())
    assert len(cases) == 150 and hits / 150 >= TOP5_9X9_MIN, hits / 150


def test_cli_accepts_default():
    out = subprocess.run([sys.executable, "-m", "kosumi", "analyze", "--model", "default",
                          "--moves", "B E5", "--size", "9", "--json"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rec = json.loads(out)
    assert rec["board_size"] == 9 and rec["to_move"] == "W" and len(rec["policy"]) == 81
    info = subprocess.run([sys.executable, "-m", "kosumi", "inspect", "default", "--json"],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    assert json.loads(info)["parameters"] > 0
    assert "19x19 default-19.safetensors" in json.loads(info)["model_set"]


def test_tiny_is_a_pack_of_at_most_64_kb():
    from kosumi.nets.pack import read_pack_model

    assert resolve_model("tiny") == TINY_MODEL
    assert TINY_MODEL.stat().st_size <= 64 * 1024
    net = read_pack_model(TINY_MODEL)  # checksum, version and every tensor checked
    assert net.config.quantized and net.config.quantization["bits"] == 8
    assert 9 in net.config.board_sizes
    assert "g170" in json.dumps(net.config.provenance)  # distilled from KataGo's g170 net


def test_tiny_agrees_with_katago_on_reference_positions(reference_positions):
    """The int8 pack on the numpy integer backend (what a bare install runs) against KataGo's
    own policy on the 150 9x9 reference positions: top-1 and KL(KataGo || tiny)."""
    cases = katago_9x9(reference_positions)
    evaluator = load_evaluator("tiny", backend="numpy", cache=False)
    evs = evaluator.evaluate([s for s, _ in cases])
    hits, kls = 0, []
    for (_, ref), ev in zip(cases, evs, strict=True):
        mine = ev.policy  # points, then pass
        hits += int(np.argmax(mine)) == int(np.argmax(ref))
        kls.append(kl(ref / ref.sum(), mine / mine.sum()))
    assert len(cases) == 150
    assert hits / 150 >= TINY_TOP1_9X9_MIN and np.mean(kls) <= TINY_KL_9X9_MAX, (
        hits / 150, np.mean(kls))
