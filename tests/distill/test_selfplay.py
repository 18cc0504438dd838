"""Self-play: games that replay legally from their SGF, follow --random-opening and the teacher,
are reproducible from the seed, resume after an interruption, and become positions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import ROOT
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.distill.positions import PositionStore
from kosumi.distill.selfplay import SelfPlayConfig, play_game, run_selfplay
from kosumi.distill.teacher_jobs import open_teacher
from kosumi.errors import KosumiError
from kosumi.go.coords import PASS
from kosumi.go.sgf import load_game
from kosumi.nets.checkpoint import save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.resnet import KosumiNet
from kosumi.runtime.evaluator import Evaluation, Evaluator

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def net(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("selfplay") / "net.safetensors"
    config = NetConfig(arch="b1c8", features="basic", head="conv", board_sizes=[7, 9],
                       value="wdl", score_lead=True, ownership=True)
    save_checkpoint(path, KosumiNet.random(config, 0))
    return path


class FirstLegalPoint(Evaluator):
    """A deterministic test teacher: all policy on the lowest-index legal point (pass when
    there is none)."""

    name = "first-legal"

    def evaluate(self, states):
        out = []
        for s in states:
            pol = np.zeros(s.num_points + 1, dtype=np.float32)
            legal = np.flatnonzero(s.legal_mask())
            pol[legal[0] if len(legal) else -1] = 1.0
            out.append(Evaluation(policy=pol, value=0.5))
        return out


def games_of(out: Path):
    return sorted((out / "sgf").glob("*.sgf"))


def stored_prefixes_of(out: Path, games) -> None:
    """Every stored position is a prefix of one of the games, and replays legally."""
    by_source = {f"selfplay:{p.stem}": load_game(p).moves for p in games}
    for pos in PositionStore(out).positions():
        moves = by_source[pos.source]
        assert list(pos.moves) == moves[: len(pos.moves)]
        pos.to_state()


def test_random_opening_then_the_teachers_moves(tmp_path):
    k = 4
    config = SelfPlayConfig(size=7, komi=7.0, policy_temperature=0.0, random_opening=k,
                            seed=11, max_moves=30)
    out = tmp_path / "sp"
    stats = run_selfplay(FirstLegalPoint(), out, 4, config)
    assert stats.games_played == 4
    games = games_of(out)
    assert [p.name for p in games] == [f"seed11-game{i:06d}.sgf" for i in range(4)]
    openings = set()
    teacher = FirstLegalPoint()
    for path in games:
        record = load_game(path)  # replays every move with kosumi's rules
        assert record.size == 7 and record.komi == 7.0
        assert len(record.moves) == 30 or record.to_state().is_game_over()
        openings.add(tuple(record.moves[:k]))
        assert all(p != PASS for _, p in record.moves[:k])
        for n in range(k, len(record.moves)):  # after the opening: the teacher's choice
            state = record.to_state(n)
            best = int(np.argmax(teacher.evaluate_one(state).policy))
            assert record.moves[n][1] == (PASS if best == 49 else best), (path.name, n)
    # the random openings differ from game to game, the teacher alone would not
    assert len(openings) >= 3
    stored_prefixes_of(out, games)

    none = run_selfplay(FirstLegalPoint(), tmp_path / "none", 3,
                        SelfPlayConfig(size=7, policy_temperature=0.0, seed=11, max_moves=30))
    assert none.games_played == 3
    moves = {tuple(load_game(p).moves) for p in games_of(tmp_path / "none")}
    assert len(moves) == 1
    # 30 moves, no game end: 31 positions, and games 2 and 3 are all duplicates
    assert (none.positions_added, none.duplicates) == (31, 62)


def test_mcts_games_with_workers_are_reproducible(net, tmp_path):
    config = SelfPlayConfig(size=7, komi=7.0, visits=6, random_opening=2, seed=5, max_moves=24)
    a = run_selfplay(net, tmp_path / "a", 2, config, workers=2)
    b = run_selfplay(net, tmp_path / "b", 2, config, workers=1)
    assert a.games_played == b.games_played == 2
    ga, gb = games_of(tmp_path / "a"), games_of(tmp_path / "b")
    assert [load_game(p).moves for p in ga] == [load_game(p).moves for p in gb]
    stored_prefixes_of(tmp_path / "a", ga)
    assert len(PositionStore(tmp_path / "a")) == a.positions_added > 0
    # the same game from the library call, directly
    state = play_game(open_teacher(net), config, 1)
    assert state.moves == load_game(ga[1]).moves


def test_resume_after_an_interruption(net, tmp_path):
    config = SelfPlayConfig(size=7, policy_temperature=1.0, random_opening=1, seed=3,
                            max_moves=20)
    full = tmp_path / "full"
    run_selfplay(net, full, 3, config)
    # an interrupted run: two games stored, the third finished (SGF written) but its
    # positions not yet -- the state a kill between the two writes leaves
    part = tmp_path / "part"
    run_selfplay(net, part, 2, config)
    third = games_of(full)[2]
    (part / "sgf" / third.name).write_bytes(third.read_bytes())
    again = run_selfplay(net, part, 4, config)
    assert (again.games_before, again.games_recovered, again.games_played) == (2, 1, 1)
    assert [load_game(p).moves for p in games_of(part)][:3] == [
        load_game(p).moves for p in games_of(full)]
    assert PositionStore(part).dir.manifest["games"] == {"seed3": [[0, 3]]}
    last = run_selfplay(net, part, 4, config)
    assert (last.games_played, last.games_recovered, last.positions_added) == (0, 0, 0)
    stored_prefixes_of(part, games_of(part))
    keys = [k for k, _ in PositionStore(part).items()]
    assert len(keys) == len(set(keys))
    # the same seed with other settings is refused, naming the field
    with pytest.raises(KosumiError, match=r"selfplay\.seed3\.size"):
        run_selfplay(net, part, 4, SelfPlayConfig(size=9, seed=3, policy_temperature=1.0,
                                                  random_opening=1, max_moves=20))


def test_cli_selfplay(net, tmp_path):
    runner = CliRunner()
    out = tmp_path / "sp"
    r = runner.invoke(app, ["selfplay", "--model", str(net), "--games", "2", "--size", "7",
                            "--visits", "4", "--random-opening", "3", "--max-moves", "16",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "2 games played" in r.output
    for path in games_of(out):
        record = load_game(path)
        assert all(p != PASS for _, p in record.moves[:3])
    r = runner.invoke(app, ["selfplay", "--model", str(net), "--games", "1", "--size", "13",
                            "--policy-temperature", "1", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "does not play 13x13" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
    r = runner.invoke(app, ["selfplay", "--model", str(tmp_path / "missing.bin"), "--games",
                            "1", "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "missing.bin" in r.output, r.output


def test_kill_and_rerun_keeps_every_finished_game(net, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    root = ROOT
    args = ["selfplay", "--model", str(net), "--games", "30", "--size", "7",
            "--policy-temperature", "1", "--random-opening", "2", "--max-moves", "40",
            "--seed", "9"]
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "kosumi", *args, "--out", str(killed)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    try:
        while time.time() < deadline and proc.poll() is None:
            if len(list((killed / "sgf").glob("*.sgf"))) >= 2:
                break
            time.sleep(0.002)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finished = len(games_of(killed))
    assert 2 <= finished < 30, "the run was not killed mid-way"

    config = SelfPlayConfig(size=7, policy_temperature=1.0, random_opening=2, max_moves=40,
                            seed=9)
    again = run_selfplay(net, killed, 30, config)
    assert again.games_recovered + again.games_before == finished
    assert again.games_played == 30 - finished
    clean = run_selfplay(net, tmp_path / "clean", 30, config)
    assert [load_game(p).moves for p in games_of(killed)] == [
        load_game(p).moves for p in games_of(tmp_path / "clean")]
    keys = [k for k, _ in PositionStore(killed).items()]
    assert len(keys) == len(set(keys)) == clean.positions_added
    assert set(keys) == {k for k, _ in PositionStore(tmp_path / "clean").items()}
