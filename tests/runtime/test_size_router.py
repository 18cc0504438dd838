"""runtime.size_router: a model set plays each board size with its own net. Routing is checked
with network-free members whose answers differ (a property), and the embedded ``default`` on
KataGo's own outputs (the independent oracle): each board's net agrees more than the base."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import katago_policy, replay_reference

from kosumi.go.board import GameState
from kosumi.models import DEFAULT_9_MODEL, DEFAULT_19_MODEL, DEFAULT_MODEL, resolve_model_set
from kosumi.nets.model_set import ModelSet
from kosumi.runtime import CachedEvaluator, load_evaluator
from kosumi.runtime.agreement import kl
from kosumi.runtime.evaluator import UniformEvaluator
from kosumi.runtime.size_router import SizeRouter

#: each board's own net agrees with KataGo on the 150 reference positions of its size above
#: these bounds (measured: 19x19 top-1 0.567, KL 0.471; 9x9 0.687, 0.19); the base net's (19x19
#: 0.533, 0.493; 9x9 0.633, 0.294) does not
BOUNDS = {19: (0.55, 0.48), 9: (0.66, 0.22)}


class Recorder:
    """Opens network-free members that answer a constant value per file, and counts them."""

    def __init__(self, values: dict[str, float]):
        self.values, self.opened, self.closed = values, [], []

    def __call__(self, file: Path) -> UniformEvaluator:
        self.opened.append(file.name)
        ev = UniformEvaluator(value=self.values[file.name])
        ev.close = lambda: self.closed.append(file.name)  # type: ignore[method-assign]
        ev.backend = f"{file.name}'s backend"  # type: ignore[attr-defined]
        return ev


def test_each_size_goes_to_its_own_net_in_order():
    opener = Recorder({"nine.kpk": 0.2, "base.kpk": 0.7})
    router = SizeRouter(ModelSet(Path("set.json"), Path("base.kpk"), {9: Path("nine.kpk")}),
                        opener, name="set")
    states = [GameState(9), GameState(19), GameState(9), GameState(13)]
    assert [e.value for e in router.evaluate(states)] == [0.2, 0.7, 0.2, 0.7]
    assert [len(e.policy) for e in router.evaluate(states)] == [82, 362, 82, 170]
    assert sorted(opener.opened) == ["base.kpk", "nine.kpk"]  # each opened once
    router.close()
    assert sorted(opener.closed) == ["base.kpk", "nine.kpk"]


def test_a_member_opens_when_its_size_is_first_played():
    opener = Recorder({"nine.kpk": 0.2, "base.kpk": 0.7})
    router = SizeRouter(ModelSet(Path("set.json"), Path("base.kpk"), {9: Path("nine.kpk")}),
                        opener, name="set")
    assert router.backend is None  # nothing opened yet
    router.evaluate([GameState(9)])
    assert opener.opened == ["nine.kpk"]  # a 9x9 game never loads the other net
    assert router.backend == "nine.kpk's backend"
    assert router.supports_size(19) and opener.opened == ["nine.kpk", "base.kpk"]
    assert router.backend == "base.kpk's backend"  # summaries name the last opened


def test_embedded_default_is_a_set_of_a_net_per_board():
    model_set = resolve_model_set("default")
    assert model_set is not None
    assert model_set.base == DEFAULT_MODEL
    assert model_set.nets == {9: DEFAULT_9_MODEL, 19: DEFAULT_19_MODEL}
    ev = load_evaluator("default")
    assert isinstance(ev, CachedEvaluator) and isinstance(ev.inner, SizeRouter)
    assert ev.name == "default"


def agreement(evaluator, cases):
    top1, kls = 0, []
    for s, ref in cases:
        policy = evaluator.evaluate_one(s).policy
        top1 += int(np.argmax(ref) == np.argmax(policy))
        kls.append(kl(ref, policy))
    return top1 / len(cases), float(np.mean(kls))


@pytest.mark.parametrize("size", [19, 9])
def test_default_plays_each_board_with_its_own_net(reference_positions, size):
    cases = [(replay_reference(r), katago_policy(r)) for r in reference_positions
             if r["board_size"] == size]
    top1, mean_kl = agreement(load_evaluator("default", cache=False), cases)
    top1_min, kl_max = BOUNDS[size]
    assert len(cases) == 150 and top1 >= top1_min and mean_kl <= kl_max, (top1, mean_kl)
    base_top1, base_kl = agreement(load_evaluator(DEFAULT_MODEL, cache=False), cases)
    assert base_top1 < top1_min and base_kl > kl_max  # the check could fail: the base would


def test_analyze_names_the_backend_of_the_size_it_plays():
    r = subprocess.run([sys.executable, "-m", "kosumi", "analyze", "--model", "default",
                        "--moves", "B Q16", "--size", "19"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and re.match(r"# default on (onnxruntime|torch|numpy)\n", r.stdout), (
        r.stdout, r.stderr)


def test_gtp_plays_both_sizes_with_default():
    script = "boardsize 19\nclear_board\ngenmove b\nboardsize 9\nclear_board\ngenmove b\nquit\n"
    r = subprocess.run([sys.executable, "-m", "kosumi", "gtp", "--model", "default",
                        "--visits", "8"], input=script, capture_output=True, text=True,
                       timeout=120)
    replies = [line for line in r.stdout.splitlines() if line.startswith("=")]
    assert r.returncode == 0 and len(replies) == 7, (r.stdout, r.stderr)
    assert re.fullmatch(r"= [A-HJ-T](1?[0-9])", replies[2]), replies  # a move on each board
    assert re.fullmatch(r"= [A-HJ]([1-9])", replies[5]), replies
