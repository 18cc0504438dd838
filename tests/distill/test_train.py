"""The distillation trainer (kosumi.distill.train): learning-rate schedule, learning a fixed
synthetic teacher, exact resume, mismatch errors, the CLI command."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import (
    FakeRecord,
    FakeStore,
    distill_options,
    game_positions,
    make_label_folder,
    synthetic_outputs,
)
from typer.testing import CliRunner

from kosumi.distill.train import DistillOptions, distill
from kosumi.distill.train_state import RunPaths, check_teacher, read_training_state
from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import load_net, read_checkpoint

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def labels(tmp_path_factory) -> tuple[Path, Path]:
    """A real 7x7 label folder from the synthetic teacher, and the teacher file."""
    return make_label_folder(tmp_path_factory.mktemp("labels7"), size=7, games=40, length=24)


opts = distill_options


# ============================================================================ training
def test_student_learns_a_fixed_synthetic_teacher(labels, tmp_path):
    """Oracle: the teacher plays where the side to move played last (pass if none); a b2c16
    student must agree with it on > 90% of held-out games within a few hundred steps."""
    out = tmp_path / "student.safetensors"
    result = distill(opts(labels, out, student="b2c16", steps=150, batch=32, eval_every=50))
    assert result.val["top1"] > 0.9, result.val
    assert result.val["top5"] >= result.val["top1"]
    assert result.val["value_mae"] < 0.1
    paths = RunPaths.for_out(out)
    recs = [json.loads(line) for line in paths.metrics.read_text().splitlines()]
    assert [r["step"] for r in recs] == [50, 100, 150]
    assert recs[-1]["val"]["top1"] == pytest.approx(result.val["top1"])
    assert recs[0]["train"]["loss"] > recs[-1]["train"]["loss"]
    assert paths.curves.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the checkpoint: a kosumi net whose provenance says where it came from
    ckpt = read_checkpoint(out)
    prov = ckpt.config.provenance
    assert prov["teacher"]["sha256"] == hashlib.sha256(
        labels[1].read_bytes()).hexdigest()
    assert prov["steps"] == 150 and prov["command"] == ["kosumi", "distill", "test"]
    assert prov["data"]["content_hash"] and prov["metrics"]["val"]["top1"] > 0.9
    assert ckpt.config.board_sizes == [7] and ckpt.config.ownership and ckpt.config.score_lead
    net = load_net(out)
    assert net.config.arch == "b2c16"


def _tensors(path: Path) -> dict[str, np.ndarray]:
    return read_checkpoint(path).tensors


def test_trains_without_matplotlib_and_says_so(labels, tmp_path, monkeypatch, capsys):
    """The learning curves are the viz extra's: with the train extra alone (no matplotlib)
    training runs to its checkpoint and says once why there is no curves file."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    out = tmp_path / "student.safetensors"
    distill(opts(labels, out, progress=True))
    assert out.exists() and not RunPaths.for_out(out).curves.exists()
    assert capsys.readouterr().err.count("pip install 'kosumi[viz]'") == 1


def test_resume_continues_exactly(labels, tmp_path):
    straight = tmp_path / "a" / "s.safetensors"
    split = tmp_path / "b" / "s.safetensors"
    straight.parent.mkdir()
    split.parent.mkdir()
    r1 = distill(opts(labels, straight, steps=24, eval_every=8))
    r2 = distill(opts(labels, split, steps=24, eval_every=8, stop_after=12))
    assert r2.steps == 12
    # the second half: settings come from the state (only the options that differ matter)
    r3 = distill(DistillOptions(data=labels[0], out=split, resume=True, threads=1, device="cpu",
                                cache_dir=tmp_path / "b" / "cache", progress=False,
                                eval_every=8))
    assert r1.steps == r3.steps == 24
    a, b = _tensors(straight), _tensors(split)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)  # bitwise
    recs = [json.loads(x) for x in RunPaths.for_out(split).metrics.read_text().splitlines()]
    assert [r["step"] for r in recs] == [8, 12, 16, 24]
    # the state file: safetensors tensors + JSON metadata, no pickle
    state_path = RunPaths.for_out(split).state
    raw = state_path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    assert header["rng/torch"]["dtype"] == "U8"
    assert any(k.startswith("optim/") for k in header) and any(k.startswith("model/")
                                                               for k in header)
    state, _ = read_training_state(state_path)
    assert state["step"] == 24 and "numpy" in state["rng"] and "python" in state["rng"]
    assert state["settings"]["student"] == "b1c8"
    # resuming a finished run does nothing and says so
    r4 = distill(DistillOptions(data=labels[0], out=split, resume=True, threads=1,
                                device="cpu", cache_dir=tmp_path / "b" / "cache",
                                progress=False))
    assert r4.steps == 24


def test_a_resumed_fine_tune_keeps_its_init_and_first_command(labels, tmp_path):
    """Stopped and resumed, a fine-tune's net still says what it started from: the --init
    checkpoint (its SHA-256, by hand) and the first command, with the resume command beside."""
    first = tmp_path / "first.safetensors"
    distill(opts(labels, first, steps=4, eval_every=4))
    tuned = tmp_path / "tuned.safetensors"
    distill(opts(labels, tuned, student=None, init=str(first), steps=8, eval_every=4,
                 stop_after=4, argv=["distill", "--init", "first"]))
    distill(opts(labels, tuned, student=None, steps=8, eval_every=4, resume=True,
                 argv=["distill", "--resume"]))
    prov = read_checkpoint(tuned).config.provenance
    assert prov["steps"] == 8
    assert prov["init"]["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert prov["command"] == ["kosumi", "distill", "--init", "first"]
    assert prov["resumed_with"] == ["kosumi", "distill", "--resume"]


def test_tanh_value_and_temperature_train(labels, tmp_path):
    out = tmp_path / "t.safetensors"
    r = distill(opts(labels, out, value="tanh", policy_temperature=2.0, ownership_weight=0.0,
                     steps=6, eval_every=6, augment=False))
    cfg = read_checkpoint(out).config
    assert cfg.value == "tanh" and not cfg.ownership and cfg.score_lead
    assert 0.0 <= r.val["value_mae"] <= 1.0


def test_split_seed_holds_out_the_same_games_whatever_the_seed(labels, tmp_path, monkeypatch):
    """--split-seed fixes the held-out games: two runs of different --seed hold out the same
    positions with it and different ones without (a chain of fine-tunes with new seeds would
    otherwise train on its earlier runs' held-out games)."""
    import kosumi.distill.train as T

    held: list[dict[int, list[int]]] = []
    real = T.split_by_game

    def spy(dataset, fraction, seed):
        train, val = real(dataset, fraction, seed)
        held.append({n: v.tolist() for n, v in val.items()})
        return train, val

    monkeypatch.setattr(T, "split_by_game", spy)
    one = {"steps": 1, "eval_every": 1, "val_fraction": 0.25}
    for i, (seed, split) in enumerate([(5, 9), (6, 9), (5, None), (6, None)]):
        distill(opts(labels, tmp_path / f"r{i}.safetensors", seed=seed, split_seed=split, **one))
    assert held[0] == held[1] and held[2] != held[3]
    saved, _ = read_training_state(RunPaths.for_out(tmp_path / "r0.safetensors").state)
    assert saved["settings"]["split_seed"] == 9


def test_init_starts_from_a_checkpoint(labels, tmp_path):
    """--init copies the checkpoint's weights into a new run (a ~zero learning rate keeps them),
    takes its arch, and records it; a random start with the same settings is far off."""
    first = tmp_path / "first.safetensors"
    distill(opts(labels, first, steps=30, eval_every=30))
    tuned = tmp_path / "tuned.safetensors"
    tiny = {"steps": 1, "lr": 1e-12, "warmup": 0, "eval_every": 1, "seed": 5}
    distill(opts(labels, tuned, student=None, init=str(first), **tiny))
    a, b = _tensors(first), _tensors(tuned)
    assert a.keys() == b.keys()
    for k in a:
        if "running_" not in k:  # BatchNorm statistics move in the training forward pass
            np.testing.assert_allclose(b[k], a[k], atol=1e-6, err_msg=k)
    scratch = tmp_path / "scratch.safetensors"
    distill(opts(labels, scratch, **tiny))
    c = _tensors(scratch)
    assert max(float(np.abs(c[k] - a[k]).max()) for k in a if "running_" not in k) > 0.05
    cfg = read_checkpoint(tuned).config
    assert cfg.arch == "b1c8"
    assert cfg.provenance["init"]["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    with pytest.raises(KosumiError, match=r"--student b2c16 differs from the --init .*\(b1c8\)"):
        distill(opts(labels, tmp_path / "x.safetensors", student="b2c16", init=str(first)))
    with pytest.raises(KosumiError, match=r"--init .*no such file"):
        distill(opts(labels, tmp_path / "x.safetensors", init=str(tmp_path / "none")))
    with pytest.raises(KosumiError, match=r"--init starts a new run .* --resume"):
        distill(opts(labels, tuned, init=str(first), resume=True))
    # --value-pool katago widens the init net's value layer: zero weights for the size term
    wide = tmp_path / "wide.safetensors"
    distill(opts(labels, wide, student=None, init=str(first), value_pool="katago", **tiny))
    w = _tensors(wide)
    assert read_checkpoint(wide).config.value_pool == "katago"
    cv = a["value_fc1.weight"].shape[1] // 2
    np.testing.assert_allclose(w["value_fc1.weight"][:, cv:2 * cv], 0.0, atol=1e-6)
    np.testing.assert_allclose(w["value_fc1.weight"][:, 2 * cv:], a["value_fc1.weight"][:, cv:],
                               atol=1e-6)
    with pytest.raises(KosumiError, match=r"--value-pool mean_max differs from the --init"):
        distill(opts(labels, tmp_path / "x.safetensors", init=str(wide), value_pool="mean_max"))
    # --features basic_ladder extends basic: zero weights on the two ladder planes; lz18 does not
    ladder = tmp_path / "ladder.safetensors"
    distill(opts(labels, ladder, student=None, init=str(first), features="basic_ladder", **tiny))
    assert read_checkpoint(ladder).config.features == "basic_ladder"
    w = _tensors(ladder)["input_conv.weight"]
    assert w.shape[1] == 13 and np.abs(w[:, 11:]).max() < 1e-6
    np.testing.assert_allclose(w[:, :11], a["input_conv.weight"], atol=1e-6)
    # a fine-tune of a fine-tune keeps the lineage: its init's own init, down to the first
    lineage = read_checkpoint(ladder).config.provenance["init"]
    assert lineage["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert "init" not in lineage  # first started at random
    again = tmp_path / "again.safetensors"
    distill(opts(labels, again, student=None, init=str(ladder), **tiny))
    lineage = read_checkpoint(again).config.provenance["init"]
    assert lineage["sha256"] == hashlib.sha256(ladder.read_bytes()).hexdigest()
    assert lineage["init"]["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    with pytest.raises(KosumiError, match=r"--features lz18 differs from the --init"):
        distill(opts(labels, tmp_path / "x.safetensors", init=str(first), features="lz18"))


# ============================================================================ errors
def test_mismatches_are_clear_errors(labels, tmp_path):
    _, teacher = labels
    out = tmp_path / "s.safetensors"
    other = tmp_path / "other.bin"
    other.write_bytes(b"another teacher")
    with pytest.raises(KosumiError, match=r"teacher mismatch: --teacher .*other.bin.*teacher.bin"):
        distill(opts(labels, out, teacher=str(other)))
    with pytest.raises(KosumiError, match="no such file"):
        distill(opts(labels, out, teacher=str(tmp_path / "missing.bin")))
    with pytest.raises(KosumiError, match=r"lz-head student plays 19x19 only.*7x7"):
        distill(opts(labels, out, head="lz", features="lz18"))
    with pytest.raises(KosumiError, match=r"no 9x9 positions.*7x7"):
        distill(opts(labels, out, board_sizes=[7, 9]))
    with pytest.raises(KosumiError, match="--steps or --epochs, not both"):
        distill(opts(labels, out, epochs=1.0))
    with pytest.raises(KosumiError, match="no training state"):
        distill(opts(labels, out, resume=True))
    assert not out.exists()

    # the teacher may be omitted (the labels' one is used) or given by sha256
    sha = hashlib.sha256(teacher.read_bytes()).hexdigest()
    distill(opts(labels, out, teacher=sha[:16], steps=2, eval_every=0))
    with pytest.raises(KosumiError, match="exists; pass --resume"):
        distill(opts(labels, out, teacher=None, steps=2))
    with pytest.raises(KosumiError, match=r"--student b2c8 differs .*\(b1c8\)"):
        distill(opts(labels, out, student="b2c8", resume=True))
    with pytest.raises(KosumiError, match=r"--features lz18 differs"):
        distill(opts(labels, out, features="lz18", resume=True))
    other_labels, _ = make_label_folder(tmp_path / "other", size=7, games=3, length=6, seed=9)
    with pytest.raises(KosumiError, match=r"not those the run .* was trained on"):
        distill(opts(labels, out, data=other_labels, resume=True, teacher=None))


def test_cli_distill(labels, tmp_path):
    from kosumi.cli import app

    lab, teacher = labels
    out = tmp_path / "cli.safetensors"
    base = ["distill", "--data", str(lab), "--out", str(out), "--student", "b1c8",
            "--steps", "3", "--batch", "8", "--threads", "1", "--device", "cpu", "--quiet",
            "--cache-dir", str(tmp_path / "cache")]
    runner = CliRunner()
    bad = runner.invoke(app, [*base, "--teacher", str(tmp_path)])
    assert bad.exit_code == 2
    assert "kosumi: error: --teacher" in bad.output and bad.output.count("\n") == 1
    ok = runner.invoke(app, [*base, "--teacher", str(teacher)])
    assert ok.exit_code == 0, ok.output
    assert f"wrote {out}: 3 steps" in ok.output
    assert load_net(out).config.arch == "b1c8"
    for weights, needle in [("13:2", "--size-weights: board size 13 is not trained (sizes 7)"),
                            ("7:x", "--size-weights: '7:x' is not SIZE:WEIGHT")]:
        bad = runner.invoke(app, [*base, "--out", str(tmp_path / "w.safetensors"),
                                  "--size-weights", weights])
        assert bad.exit_code == 2 and needle in bad.output and bad.output.count("\n") == 1, (
            bad.output)
    # --size-weights 7:2.5: an epoch is ceil(2.5 * train positions / batch) steps
    w = tmp_path / "w.safetensors"
    ok = runner.invoke(app, [*[a for a in base if a not in ("--steps", "3")], "--out", str(w),
                             "--epochs", "1", "--size-weights", "7:2.5"])
    assert ok.exit_code == 0, ok.output
    prov = read_checkpoint(w).config.provenance
    assert prov["settings"]["size_weights"] == {"7": 2.5}
    assert prov["steps"] == math.ceil(2.5 * prov["data"]["train_positions"] / 8)
    shutil.rmtree(tmp_path / "cache")


def test_mixed_teacher_folder_selects_the_given_teachers_labels(tmp_path):
    """A folder labelled by two teachers: --teacher picks one teacher's records only, and its
    board sizes (teacher b labelled only 9x9), and each teacher's encoding is cached apart."""
    positions = game_positions(7, 4, 6, seed=4) + game_positions(9, 6, 6, seed=5)
    records = []
    for k, p in enumerate(positions):
        pol, v, lead, own = synthetic_outputs(p.to_state())
        records.append(FakeRecord(p, pol, np.array([v, 1 - v, 0], np.float32), lead, own,
                                  teacher=int(p.board_size == 9 and k % 3 == 0)))
    store = FakeStore(tmp_path / "labels", records)
    t0 = {"name": "a", "format": "x", "sha256": "aa" * 32, "symmetries": 1}
    t1 = {"name": "b", "format": "x", "sha256": "bb" * 32, "symmetries": 1}
    store.teachers, store.teacher = [t0, t1], t0
    assert check_teacher(None, store) == ({"mixed": [t0, t1]}, None)
    assert check_teacher("bb" * 8, store) == (t1, 1)
    with pytest.raises(KosumiError, match=r"teacher mismatch.*made by a .*; b "):
        check_teacher("cc" * 8, store)
    out = tmp_path / "s.safetensors"
    distill(DistillOptions(data=store.path, out=out, teacher="bb" * 8, student="b1c8",
                           epochs=2, batch=4, val_fraction=0.0, threads=1, device="cpu",
                           cache_dir=tmp_path / "cache", progress=False), store=store)
    prov = read_checkpoint(out).config.provenance
    n1 = sum(1 for r in records if r.teacher == 1)
    assert prov["teacher"] == t1 and prov["data"]["positions"] == {"9": n1}
    assert prov["steps"] == 2 * math.ceil(n1 / 4)  # --epochs 2
    out0 = tmp_path / "s0.safetensors"
    distill(DistillOptions(data=store.path, out=out0, teacher="aa" * 8, student="b1c8",
                           steps=1, batch=4, val_fraction=0.0, threads=1, device="cpu",
                           cache_dir=tmp_path / "cache", progress=False), store=store)
    n0 = {n: sum(1 for r in records if r.teacher == 0 and r.position.board_size == n)
          for n in (7, 9)}
    assert read_checkpoint(out0).config.provenance["data"]["positions"] == {
        "7": n0[7], "9": n0[9]}
    assert len(list((tmp_path / "cache").glob("*-9x9.npz"))) == 2  # one per teacher


def test_sigterm_during_training_saves_and_stops_like_ctrl_c():
    """The first SIGTERM (a scheduler's stop) only asks the loop to finish its step and save;
    a second one stops at once, as `kosumi: terminated` (exit 143)."""
    import os
    import signal
    import types

    from kosumi.distill.train import _save_on_interrupt
    from kosumi.errors import Terminated

    run = types.SimpleNamespace(interrupted=False)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), _save_on_interrupt(run, True):  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGTERM)
        assert run.interrupted
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_cli_distill_on_two_label_folders(labels, tmp_path):
    """`--data A --data B`: one run on both folders' positions (the counts are the folders'
    own manifests'), the provenance lists both, and --resume on other folders is refused."""
    from kosumi.cli import app
    from kosumi.distill.labels import LabelStore

    lab, teacher = labels
    lab2, _ = make_label_folder(tmp_path / "second", size=7, games=10, length=12, seed=2)
    out = tmp_path / "two.safetensors"
    base = ["distill", "--data", str(lab), "--data", str(lab2), "--out", str(out),
            "--teacher", str(teacher), "--student", "b1c8", "--batch", "8", "--threads", "1",
            "--device", "cpu", "--quiet", "--cache-dir", str(tmp_path / "cache")]
    runner = CliRunner()
    ok = runner.invoke(app, [*base, "--steps", "4", "--stop-after", "2"])
    assert ok.exit_code == 0, ok.output
    prov = read_checkpoint(out).config.provenance
    assert prov["data"]["path"] == [str(lab), str(lab2)]
    assert prov["data"]["positions"] == {"7": len(LabelStore(lab)) + len(LabelStore(lab2))}
    bad = runner.invoke(app, [*base[:3], *base[5:], "--steps", "4", "--resume"])
    assert bad.exit_code == 2 and "--resume: the labels in" in bad.output, bad.output
    again = runner.invoke(app, [*base, "--steps", "4", "--resume"])
    assert again.exit_code == 0 and read_checkpoint(out).config.provenance["steps"] == 4
