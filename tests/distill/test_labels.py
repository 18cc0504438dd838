"""Teacher labels: values against the teacher run directly (and against the raw net), the
kill -9 and resume test, teacher identity and mixing, bad input.

Teachers are tiny random kosumi nets (``KosumiNet.random``) and ``UniformEvaluator``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import ROOT, katago_policy, replay_reference
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.distill.labels import LabelStore, LabelUnion, label_positions, open_labels
from kosumi.distill.positions import Position, PositionStore, write_positions
from kosumi.distill.teacher_jobs import teacher_identity
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import PASS, transform_point
from kosumi.nets.checkpoint import build_net, read_checkpoint, save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.features import get_feature_set
from kosumi.nets.resnet import KosumiNet
from kosumi.runtime.agreement import kl
from kosumi.runtime.evaluator import UniformEvaluator

torch.set_num_threads(1)


def make_net(path: Path, seed: int = 0, value: str = "wdl", sizes=(9,), arch="b1c8",
             extras: bool = True) -> Path:
    config = NetConfig(arch=arch, features="basic", head="conv", board_sizes=list(sizes),
                       value=value, score_lead=extras, ownership=extras)
    save_checkpoint(path, KosumiNet.random(config, seed))
    return path


def random_games(size: int, games: int, moves: int, seed: int) -> list[Position]:
    """Every position of ``games`` random games (legal moves, a pass now and then)."""
    rng = random.Random(seed)
    out = []
    for g in range(games):
        state = GameState(size, 7.0)
        out.append(Position.from_state(state, f"random:{g}"))
        for _ in range(moves):
            legal = [int(p) for p in np.flatnonzero(state.legal_mask())]
            move = rng.choice(legal) if legal and rng.random() > 0.05 else PASS
            state.play(move)
            if state.is_game_over():
                break
            out.append(Position.from_state(state, f"random:{g}"))
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("labels")
    positions = root / "positions"
    write_positions(positions, random_games(9, 4, 30, seed=1), shard_size=50)
    return root, positions


def raw_net_outputs(path: Path, states: list[GameState]) -> dict[str, np.ndarray]:
    """The oracle: the checkpoint's torch net run directly on the encoded features."""
    ck = read_checkpoint(path)
    net = build_net(ck, str(path)).eval()
    planes, glob = get_feature_set(ck.config.features).encode(states)
    with torch.no_grad():
        out = net(torch.from_numpy(planes), None if glob is None else torch.from_numpy(glob))
    return {k: v.double().numpy() for k, v in out.items()}


def legal_softmax(logits: np.ndarray, state: GameState) -> np.ndarray:
    """Softmax of raw policy logits over the legal points and pass (the rules' own mask), 0
    elsewhere: what a label's policy must be, computed here without the evaluator."""
    legal = np.append(state.legal_mask(), True)
    e = np.where(legal, np.exp(logits - logits[legal].max()), 0.0)
    return e / e.sum()


def transformed(state: GameState, sym: int) -> GameState:
    """The same game with every move sent through symmetry ``sym``."""
    t = GameState(state.size, state.komi, state.rules)
    for color, p in state.moves:
        t.play(transform_point(p, state.size, sym), color)
    return t


# ----------------------------------------------------------------------------- values
def test_labels_match_the_raw_net(data, tmp_path):
    """The labels against the checkpoint's torch net run directly (not the evaluator the
    labeller uses): the policy is the softmax over the legal points, the value the softmax of
    the wdl logits, the lead the raw lead, the ownership tanh of the raw ownership."""
    _, positions = data
    net = make_net(tmp_path / "wdl.safetensors")
    stats = label_positions(net, positions, tmp_path / "lab", batch=16)
    store = LabelStore(tmp_path / "lab")
    assert stats.labelled == len(store) == len(PositionStore(positions)) == stats.total
    assert store.board_sizes() == [9]
    assert store.teacher["format"] == "kosumi" and store.teacher["symmetries"] == 1
    assert store.teacher["sha256"] == teacher_identity(net)["sha256"]
    records = list(store.records())
    assert [r.position for r in records] == list(PositionStore(positions).positions())

    states = [r.position.to_state() for r in records]
    raw = raw_net_outputs(net, states)
    e = np.exp(raw["value"] - raw["value"].max(axis=1, keepdims=True))
    wdl = e / e.sum(axis=1, keepdims=True)
    for i, rec in enumerate(records):
        assert rec.policy.dtype == np.float32 and rec.policy.shape == (82,)
        assert abs(float(rec.policy.sum()) - 1.0) < 1e-5
        np.testing.assert_allclose(rec.policy, legal_softmax(raw["policy"][i], states[i]),
                                   atol=1e-6)
        # illegal points have exactly 0, as the rules say
        legal = np.append(states[i].legal_mask(), True)
        assert np.all(rec.policy[~legal] == 0)
        np.testing.assert_allclose(rec.value, wdl[i], atol=1e-5)
        assert rec.score_lead == pytest.approx(float(raw["score_lead"][i]), abs=1e-4)
        np.testing.assert_allclose(rec.ownership, np.tanh(raw["ownership"][i]), atol=1e-5)


def test_win_probability_teachers_and_symmetries(data, tmp_path):
    """A tanh teacher averaged over the 8 symmetries: each label is the mean, over the 8
    transformed games, of the raw net's legal softmax (read back through the symmetry) and of
    its win probability (1 + tanh v) / 2."""
    _, positions = data
    net = make_net(tmp_path / "tanh.safetensors", value="tanh", extras=False)
    label_positions(net, positions, tmp_path / "lab8", symmetries=8, batch=32)
    store = LabelStore(tmp_path / "lab8")
    assert store.teacher["symmetries"] == 8
    records = list(store.records())
    states = [r.position.to_state() for r in records]
    n = 9
    policy = np.zeros((len(states), n * n + 1))
    win = np.zeros(len(states))
    for sym in range(8):
        moved = [transformed(s, sym) for s in states]
        raw = raw_net_outputs(net, moved)
        where = [transform_point(p, n, sym) for p in range(n * n)] + [n * n]
        for i, t in enumerate(moved):
            policy[i] += legal_softmax(raw["policy"][i], t)[where]
            win[i] += (1 + np.tanh(raw["value"][i, 0])) / 2
    policy /= 8
    win /= 8
    for i, rec in enumerate(records):
        np.testing.assert_allclose(rec.value, [win[i], 1 - win[i], 0.0], atol=1e-6)
        np.testing.assert_allclose(rec.policy, policy[i], atol=1e-6)
        assert rec.score_lead is None and rec.ownership is None

    # a network-free teacher through the library: its win probability and score lead
    label_positions(UniformEvaluator(), positions, tmp_path / "uni",
                    teacher_info={"name": "uniform", "format": "builtin", "sha256": None,
                                  "symmetries": 1})
    for rec in LabelStore(tmp_path / "uni").records():
        state = rec.position.to_state()
        lead = state.area_score() * (1 if state.to_move == 1 else -1)
        assert rec.score_lead == pytest.approx(lead)
        p = 1 / (1 + np.exp(-lead / 2))
        np.testing.assert_allclose(rec.value, [p, 1 - p, 0], atol=1e-6)
        n_legal = int(state.legal_mask().sum()) + 1
        np.testing.assert_allclose(rec.policy[rec.policy > 0], 1 / n_legal, rtol=1e-5)


# ----------------------------------------------------------------------------- resuming
def label_arrays(path: Path) -> dict[int, tuple]:
    out = {}
    for rec in LabelStore(path).records():
        assert rec.key not in out, "a position labelled twice"
        out[rec.key] = (rec.position, rec.policy, rec.value, rec.score_lead, rec.ownership)
    return out


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path):
    positions = tmp_path / "positions"
    write_positions(positions, random_games(9, 10, 40, seed=7), shard_size=200)
    total = len(PositionStore(positions))
    net = make_net(tmp_path / "net.safetensors", arch="b2c16")
    args = ["--teacher", str(net), "--positions", str(positions), "--shard-size", "8",
            "--batch", "2"]
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "kosumi", "label", *args, "--out",
                             str(killed)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    manifest = killed / "manifest.json"
    deadline = time.time() + 60
    shards = 0
    try:
        while time.time() < deadline and proc.poll() is None:
            try:
                shards = len(json.loads(manifest.read_text())["shards"])
            except (OSError, ValueError):
                shards = 0
            if shards >= 2:
                break
            time.sleep(0.002)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = len(json.loads(manifest.read_text())["shards"])
    print(f"killed after {done} shards of {-(-total // 8)}")
    assert done >= 1 and done * 8 < total, "the run was not killed mid-way"

    # run it again (in-process), and once without interruption
    runner = CliRunner()
    r = runner.invoke(app, ["label", *args, "--out", str(killed)])
    assert r.exit_code == 0, r.output
    assert f"{done * 8} were already labelled" in r.output
    assert "policy target: its raw policy" in r.output
    label_positions(net, positions, tmp_path / "clean", chunk_size=8, batch=2)

    keys = sorted(PositionStore(positions).keys())
    resumed, clean = label_arrays(killed), label_arrays(tmp_path / "clean")
    assert sorted(resumed) == keys == sorted(clean)  # every position exactly once
    for k in keys:
        a, b = resumed[k], clean[k]
        assert a[0] == b[0] and a[3] == b[3]
        for x, y in zip(a[1:], b[1:], strict=True):
            if isinstance(x, np.ndarray):
                np.testing.assert_array_equal(x, y)
    assert not list(killed.glob(".*.tmp"))


# ----------------------------------------------------------------------------- teachers
def test_mixed_teachers_need_an_explicit_choice(tmp_path):
    first = make_net(tmp_path / "a.safetensors", seed=0)
    second = make_net(tmp_path / "b.safetensors", seed=1)
    pos = tmp_path / "pos"
    write_positions(pos, random_games(9, 1, 10, seed=2))
    label_positions(first, pos, tmp_path / "lab")
    write_positions(pos, random_games(9, 1, 10, seed=3))  # new positions to label
    with pytest.raises(KosumiError, match="--allow-mixed-teachers") as e:
        label_positions(second, pos, tmp_path / "lab")
    assert "a.safetensors" in str(e.value) and "b.safetensors" in str(e.value)
    # the same file under another symmetry count is another teacher too
    with pytest.raises(KosumiError, match="--allow-mixed-teachers"):
        label_positions(first, pos, tmp_path / "lab", symmetries=8)
    stats = label_positions(second, pos, tmp_path / "lab", allow_mixed_teachers=True)
    assert stats.labelled > 0
    store = LabelStore(tmp_path / "lab")
    assert store.mixed_teachers and [t["name"] for t in store.teachers] == [
        "a.safetensors", "b.safetensors"]
    assert store.teacher["name"] == "a.safetensors"
    assert {r.teacher for r in store.records()} == {0, 1}
    assert len(store) == len(PositionStore(pos))


def test_several_folders_read_as_the_one_folder_labelled_with_both(tmp_path):
    """The oracle: the same positions labelled into one folder. Two folders (``--data A --data
    B``) give its records in its order and its counts; a shard two folders share is read once;
    another teacher, or a folder given twice, is a one-line error naming it."""
    net = make_net(tmp_path / "t.safetensors", seed=4, sizes=(7, 9))
    pa, pb = tmp_path / "pa", tmp_path / "pb"
    write_positions(pa, random_games(9, 2, 20, seed=5))
    write_positions(pb, random_games(7, 2, 20, seed=6) + random_games(9, 1, 20, seed=7))
    for pos, out in [(pa, "x"), (pb, "y"), (pa, "z"), (pb, "z")]:
        label_positions(net, pos, tmp_path / out)
    one = LabelStore(tmp_path / "z")
    union = open_labels([tmp_path / "x", tmp_path / "y"])
    assert isinstance(union, LabelUnion)
    assert isinstance(open_labels([tmp_path / "x"]), LabelStore)
    assert len(union) == len(one) and union.board_sizes() == one.board_sizes() == [7, 9]
    assert all(union.count(n) == one.count(n) for n in (7, 9))
    for n in (7, 9):
        got, want = list(union.records(n)), list(one.records(n))
        assert [r.key for r in got] == [r.key for r in want]
        assert all(np.array_equal(a.policy, b.policy) for a, b in zip(got, want, strict=True))
    assert union.teacher == one.teacher
    assert union.content_hash() != one.content_hash()  # a run resumes on the folders it had
    shared = LabelUnion([tmp_path / "x", tmp_path / "z"])
    assert [r.key for r in shared.records()] == [r.key for r in one.records()]
    other = make_net(tmp_path / "o.safetensors", seed=5)
    label_positions(other, pa, tmp_path / "w")
    with pytest.raises(KosumiError, match=r"w/manifest.json: labelled by .* same teacher"):
        LabelUnion([tmp_path / "x", tmp_path / "w"])
    with pytest.raises(KosumiError, match="--data: a folder is given twice"):
        LabelUnion([tmp_path / "x", tmp_path / "y", tmp_path / "x"])


class DecoyTeacher(UniformEvaluator):
    """Value from the area count; policy 0.5 on E5 (point 40), 0.2 on C7 (20) where legal, the
    rest spread evenly over the other legal moves."""

    def evaluate(self, states):
        out = super().evaluate(states)
        for e in out:
            p = e.policy.astype(np.float64) * 0.3 / e.policy.sum()
            for point, share in ((40, 0.5), (20, 0.2)):
                if p[point] > 0:
                    p[point] += share
            e.policy = (p / p.sum()).astype(np.float32)
        return out


def capture_position() -> GameState:
    """Hand-made 9x9 position, Black to move: White's six corner stones (A9-C9, A8-C8) have
    one liberty left, C7; Black captures them there (point 2 * 9 + 2 = 20)."""
    state = GameState(9, 7.0)
    for r, c in [(0, 3), (0, 0), (1, 3), (0, 1), (2, 0), (0, 2), (2, 1), (1, 0), (8, 8), (1, 1),
                 (8, 6), (1, 2)]:
        state.play(r * 9 + c)
    return state


def test_search_targets_find_the_capture_the_raw_policy_does_not(tmp_path):
    """Oracle: a hand-made position with one winning move. A network-free teacher (value from
    the area count; policy 0.5 on the empty centre E5, 0.2 on the capture, the rest spread)
    labels it: its raw policy's top move is E5, the search target of 64 visits puts most of
    its mass on the capture. Every target is a distribution of whole visits over legal moves,
    and value, score and ownership are the raw labels'."""
    state = capture_position()
    assert state.to_move == 1 and state.legal_mask()[20] and state.legal_mask()[40]
    positions = [Position.from_state(state, "capture"), *random_games(9, 2, 12, 8)]
    pos = tmp_path / "pos"
    write_positions(pos, positions)
    teacher = DecoyTeacher()
    info = {"name": "decoy", "format": "evaluator", "sha256": None, "symmetries": 1}
    label_positions(teacher, pos, tmp_path / "raw", teacher_info=info)
    label_positions(teacher, pos, tmp_path / "search", teacher_info=info, visits=64)
    raw = {r.position.source + str(r.key): r for r in LabelStore(tmp_path / "raw").records()}
    searched = LabelStore(tmp_path / "search")
    assert searched.teacher["visits"] == 64 and "visits" not in LabelStore(tmp_path / "raw").teacher
    records = list(searched.records())
    assert len(records) == len(raw)
    for rec in records:
        base = raw[rec.position.source + str(rec.key)]
        legal = np.append(rec.position.to_state().legal_mask(), True)
        assert rec.policy.sum() == pytest.approx(1.0, abs=1e-5)
        assert not rec.policy[~legal].any()
        visits = rec.policy * 63  # the root's 64 visits less its own evaluation
        np.testing.assert_allclose(visits, np.round(visits), atol=1e-3)
        np.testing.assert_array_equal(rec.value, base.value)
        assert rec.score_lead == base.score_lead
        np.testing.assert_array_equal(rec.ownership, base.ownership)
        if rec.position.source == "capture":
            assert int(np.argmax(base.policy)) == 40 and base.policy[20] < 0.25
            assert int(np.argmax(rec.policy)) == 20 and rec.policy[20] > 0.5
    # a raw-policy teacher cannot add labels to the search folder unasked
    write_positions(pos, random_games(9, 1, 5, seed=9))
    with pytest.raises(KosumiError, match="--allow-mixed-teachers") as e:
        label_positions(teacher, pos, tmp_path / "search", teacher_info=info)
    assert "search of 64 visits" in str(e.value)
    with pytest.raises(KosumiError, match="--visits must be >= 0"):
        label_positions(teacher, pos, tmp_path / "x", teacher_info=info, visits=-1)


def test_raw_and_search_labels_of_one_net_train_together(tmp_path):
    """``kosumi distill --data RAW --data SEARCH``: the same net's raw and search labels are
    one teacher to the union (its file), the CLI writes the search folder."""
    net = make_net(tmp_path / "t.safetensors", seed=4)
    pos = tmp_path / "pos"
    write_positions(pos, random_games(9, 1, 8, seed=5))
    label_positions(net, pos, tmp_path / "raw")
    result = CliRunner().invoke(app, ["label", "--teacher", str(net), "--positions", str(pos),
                                      "--out", str(tmp_path / "search"), "--visits", "8"])
    assert result.exit_code == 0, result.output
    assert "policy target: its search of 8 visits" in result.output
    union = LabelUnion([tmp_path / "raw", tmp_path / "search"])
    assert len(union) == 2 * len(PositionStore(pos))
    assert LabelStore(tmp_path / "search").teacher["visits"] == 8


def test_bad_input_is_one_line_exit_2(data, tmp_path):
    _, positions = data
    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, ["label", *map(str, args)])

    def one_line(r, needle):
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and needle in lines[0], r.output

    net9 = make_net(tmp_path / "nine.safetensors")
    one_line(run("--teacher", net9, "--positions", tmp_path / "none", "--out", tmp_path / "o"),
             "none: no such folder")
    one_line(run("--teacher", tmp_path / "x.bin", "--positions", positions, "--out",
                 tmp_path / "o"), "x.bin")
    # a teacher that does not play 13x13
    p13 = tmp_path / "p13"
    write_positions(p13, random_games(13, 1, 3, seed=4))
    one_line(run("--teacher", net9, "--positions", p13, "--out", tmp_path / "o"),
             "does not play 13x13")
    # a corrupted label shard, a manifest naming no teacher
    lab = tmp_path / "lab"
    r = run("--teacher", net9, "--positions", positions, "--out", lab, "--shard-size", "40")
    assert r.exit_code == 0, r.output
    one_line(run("--teacher", net9, "--positions", positions, "--out", lab, "--shard-size",
                 "64"), "'chunk_size' is 40")
    shard = min(lab.glob("labels-*.zst"))
    data_bytes = shard.read_bytes()
    shard.write_bytes(data_bytes[:100])
    with pytest.raises(KosumiError, match=shard.name):
        list(LabelStore(lab).records())
    shard.write_bytes(data_bytes)
    manifest = json.loads((lab / "manifest.json").read_text())
    manifest["shards"][0]["teacher"] = 5
    (lab / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(KosumiError, match=r"shards\[0\] field 'teacher'"):
        LabelStore(lab)
    one_line(run("--teacher", net9, "--positions", positions, "--out", lab), "manifest.json")


def test_workers_give_the_same_labels(data, tmp_path):
    _, positions = data
    net = make_net(tmp_path / "net.safetensors")
    label_positions(net, positions, tmp_path / "one", chunk_size=32, batch=8)
    label_positions(net, positions, tmp_path / "two", chunk_size=32, batch=8, workers=2)
    one, two = label_arrays(tmp_path / "one"), label_arrays(tmp_path / "two")
    assert one.keys() == two.keys()
    for k in one:
        np.testing.assert_array_equal(one[k][1], two[k][1])
        np.testing.assert_array_equal(one[k][2], two[k][2])


def test_katago_teacher_labels_match_katago_itself(tmp_path, katago_model, reference_positions):
    """Labels written by the KataGo teacher (on the default backend) against the real KataGo
    engine's outputs for the same positions: win/loss/noResult, policy, lead, ownership."""
    model = katago_model
    refs = reference_positions[::15]
    positions = [Position.from_state(replay_reference(r), r["id"]) for r in refs]
    pos = tmp_path / "pos"
    write_positions(pos, positions)
    label_positions(model, pos, tmp_path / "lab", batch=8)
    by_id = {r["id"]: r for r in refs}
    records = list(LabelStore(tmp_path / "lab").records())
    assert len(records) == len(refs) == 20
    for rec in records:
        ref = by_id[rec.position.source]
        k = ref["katago_raw_nn"]
        white = ref["to_move"] == "W"
        win, loss = (k["whiteWin"], k["whiteLoss"]) if white else (k["whiteLoss"], k["whiteWin"])
        np.testing.assert_allclose(rec.value, [win, loss, k["noResult"]], atol=2e-3)
        np.testing.assert_allclose(rec.policy, katago_policy(ref), atol=2e-3)
        sign = 1.0 if white else -1.0
        assert rec.score_lead == pytest.approx(sign * k["whiteLead"], abs=0.05)
        np.testing.assert_allclose(rec.ownership, sign * np.array(k["whiteOwnership"]),
                                   atol=0.02)


def test_labels_agree_across_backends(tmp_path, katago_model):
    """KataGo's teacher labelling on onnxruntime vs torch: the same labels up to float
    rounding (policy KL <= 1e-4)."""
    from kosumi.distill.labels import LabelStore, label_positions
    from kosumi.distill.positions import Position, write_positions
    from kosumi.runtime.bench import bench_states

    model = katago_model
    write_positions(tmp_path / "pos", [Position.from_state(s, f"b:{i}") for i, s in
                                       enumerate(bench_states(9, 24) + bench_states(19, 8))])
    for b in ("torch", "onnxruntime"):
        label_positions(model, tmp_path / "pos", tmp_path / b, backend=b, batch=16)
    a = {r.key: r for r in LabelStore(tmp_path / "torch").records()}
    b = {r.key: r for r in LabelStore(tmp_path / "onnxruntime").records()}
    assert a.keys() == b.keys() and len(a) == 32
    assert max(kl(x.policy, b[k].policy) for k, x in a.items()) <= 1e-4
    assert max(float(np.abs(x.value - b[k].value).max()) for k, x in a.items()) < 1e-4
