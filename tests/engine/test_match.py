"""The match arena (kosumi.engine.match): GNU Go vs GNU Go through the CLI (results checked by a
fresh GNU Go), misbehaving fake engines (tests/engines/fake_gtp.py) that must forfeit without
stopping the match, Leela Zero, and kosumi's own engine against GNU Go level 1."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_GTP, GNUGO, LEELAZ, fake_gtp, gnugo_final_score, require_program

from kosumi.engine.elo import SPRT_MIN_GAMES
from kosumi.engine.match import play_match
from kosumi.engine.match_results import parse_score
from kosumi.errors import KosumiError
from kosumi.go.coords import vertex_to_point
from kosumi.go.sgf import load_game


def gnugo_cmd(level: int = 1) -> str:
    return f"{require_program(GNUGO)} --mode gtp --level {level}"


def fast_referee() -> str:
    """GNU Go at level 1 judges unfinished positions in seconds instead of tens of seconds."""
    return f"{require_program(GNUGO)} --mode gtp --chinese-rules --level 1"


# ----------------------------------------------------------------------------- GNU Go match
@pytest.mark.slow
def test_cli_match_gnugo_vs_gnugo(tmp_path: Path):
    sgf_dir = tmp_path / "games"
    cmd = [sys.executable, "-m", "kosumi.cli", "match", "--black", gnugo_cmd(1),
           "--white", gnugo_cmd(1), "--games", "2", "--size", "9", "--komi", "7",
           "--swap-colors", "--sgf-dir", str(sgf_dir)]
    proc = subprocess.run(cmd, capture_output=True, check=False, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "game 1/2" in out and "game 2/2" in out
    assert "Elo" in out and "95% interval" in out
    files = sorted(sgf_dir.glob("*.sgf"))
    assert len(files) == 2
    for path in files:
        rec = load_game(path)
        assert rec.size == 9 and rec.komi == 7.0
        assert rec.moves[-2][1] == rec.moves[-1][1] == -1  # ended by two passes
        # the arena's result equals GNU Go's own score of the final position
        assert parse_score(rec.result) == gnugo_final_score(path), path
    first = load_game(files[0])
    second = load_game(files[1])
    assert first.black == second.white and first.white == second.black  # swapped colours


@pytest.mark.slow
def test_cli_json_and_sprt_stops_early(tmp_path: Path):
    # GNU Go against an engine that resigns at once: SPRT [0, 200] decides at its minimum of
    # 30 games (its LLR is past the bound after 4)
    cmd = [sys.executable, "-m", "kosumi.cli", "match", "--black", gnugo_cmd(1),
           "--white", " ".join(fake_gtp("resign")), "--games", "40", "--size", "9",
           "--swap-colors", "--sprt", "0,200", "--json"]
    proc = subprocess.run(cmd, capture_output=True, check=False, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert len(result["games"]) == SPRT_MIN_GAMES and result["stopped_early"]
    assert result["sprt"]["verdict"] == "H1"
    assert [g["result"] for g in result["games"][:4]] == ["B+R", "W+R", "B+R", "W+R"]
    assert result["counts"]["first"]["wins"] == SPRT_MIN_GAMES
    assert result["elo"]["low"] > 0
    assert "game 4/40" in proc.stderr  # live lines go to stderr with --json


def test_concurrent_games_are_played_at_once_each_lane_its_own_engines(tmp_path: Path):
    """Two 'meet' engines resign only when both are asked for a move at the same time: with
    --concurrency 2 both games end W+R; played one after the other, each would crash (a
    forfeit). Each lane's engine gets its own number for {lane}."""
    marks = tmp_path / "marks"
    marks.mkdir()
    meet = [sys.executable, str(FAKE_GTP), "meet", str(marks / "lane-{lane}"), "2"]
    result = play_match(meet, fake_gtp("resign"), games=2, size=9, komi=7.0, sgf_dir=tmp_path,
                        move_timeout=30.0, referee_cmd=None, progress=False, concurrency=2)
    assert [(g.index, g.result, g.forfeit) for g in result.games] == [(1, "W+R", None),
                                                                      (2, "W+R", None)]
    assert sorted(p.name for p in marks.iterdir()) == ["lane-1", "lane-2"]
    assert result.first == result.games[0].black  # one label for the engine in every lane
    assert "{lane}" in result.first_command[-2]


@pytest.mark.slow
def test_cli_concurrent_sprt_records_games_up_to_its_verdict(tmp_path: Path):
    """The SPRT of test_cli_json_and_sprt_stops_early, two games at a time: it decides at 30
    games, and a game still being played then is not recorded."""
    cmd = [sys.executable, "-m", "kosumi.cli", "match", "--black", gnugo_cmd(1),
           "--white", " ".join(fake_gtp("resign")), "--games", "40", "--size", "9",
           "--swap-colors", "--sprt", "0,200", "--concurrency", "2", "--json",
           "--sgf-dir", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, check=False, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    games = result["games"]
    assert len(games) == SPRT_MIN_GAMES and result["stopped_early"]
    assert result["sprt"]["verdict"] == "H1"
    assert [g["index"] for g in games] == sorted({g["index"] for g in games})
    for g in games:  # the first engine (GNU Go) is Black in odd games
        assert g["result"] == ("B+R" if g["index"] % 2 else "W+R")
    assert sorted(p.name for p in tmp_path.glob("*.sgf")) == [
        f"game-{g['index']:03d}.sgf" for g in games]


def test_cli_bad_options_are_one_line_errors(tmp_path: Path):
    book = tmp_path / "book.txt"
    book.write_text("E5 E5\n")  # the second move is on a stone
    for extra, needle in ((["--sprt", "50"], "--sprt"), (["--size", "30"], "--size"),
                          (["--concurrency", "3"], "--concurrency"),  # more than --games 2
                          (["--openings", str(tmp_path / "none.txt")], "none.txt"),
                          (["--openings", str(book)], "opening 1, move 2")):
        cmd = [sys.executable, "-m", "kosumi.cli", "match", "--black", "true",
               "--white", "true", *extra]
        proc = subprocess.run(cmd, capture_output=True, check=False, text=True, timeout=60)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], proc.stderr
    with pytest.raises(KosumiError, match="not found"):
        play_match(["/nonexistent/engine"], ["true"], 1, progress=False, referee_cmd=None)


# ----------------------------------------------------------------------------- forfeits
@pytest.mark.parametrize(
    "behaviour, kind",
    [("illegal", "illegal"), ("garbage", "illegal"), ("crash", "crash"), ("hang", "timeout")],
)
def test_misbehaving_engine_forfeits_every_game(tmp_path: Path, behaviour: str, kind: str):
    result = play_match(fake_gtp(behaviour), gnugo_cmd(1), games=2, size=9, komi=7.0,
                        swap_colors=True, sgf_dir=tmp_path, move_timeout=1.0,
                        startup_timeout=20.0, progress=False)
    assert len(result.games) == 2  # the match went on after the forfeit
    for game, fake_color in zip(result.games, ("B", "W"), strict=True):
        assert game.end == "forfeit"
        assert game.forfeit is not None
        assert (game.forfeit.color, game.forfeit.kind) == (fake_color, kind)
        winner = "W" if fake_color == "B" else "B"
        assert game.result == f"{winner}+F" and game.winner == winner
        rec = load_game(game.sgf)
        assert rec.result == f"{winner}+F"
        assert b"forfeits" in Path(game.sgf).read_bytes()
    counts = result.counts()
    assert counts["first"]["losses"] == 2 and counts["second"]["wins"] == 2


def test_random_engine_lowercase_moves_and_uppercase_pass(tmp_path: Path):
    """An engine answering 'd4' and 'PASS' plays normally; its passes are forwarded."""
    result = play_match(fake_gtp("random", seed=5, pass_after=6), gnugo_cmd(1), games=2, size=7,
                        komi=7.0, swap_colors=True, sgf_dir=tmp_path, move_timeout=20.0,
                        max_moves=40, referee_cmd=fast_referee(), progress=False)
    assert result.first.startswith("python") and "fake_gtp.py random" in result.first
    for game in result.games:
        assert game.forfeit is None and game.end in ("two-passes", "max-moves")
        assert game.score is not None and game.referee_result is not None
        moves = load_game(game.sgf).moves
        assert len(moves) == game.moves
        fake_color = 1 if game.first_color == "B" else 2
        fake_moves = [p for c, p in moves if c == fake_color]
        assert len(fake_moves) > 6 and -1 not in fake_moves[:6]
        assert fake_moves[6:] == [-1] * (len(fake_moves) - 6)  # its 'PASS' answers
    json.dumps(result.to_dict(), allow_nan=False)


def test_games_start_from_the_openings_each_with_both_colours(tmp_path: Path):
    """Game pair i starts from opening i, told to both engines (the random fake engines check
    every move against their own board: an opening they were not told would make them play
    illegal moves and forfeit); with swapped colours each opening is played twice."""
    book = [[vertex_to_point(v, 9) for v in o.split()] for o in ("E5 C3 G7", "D4 F6")]
    result = play_match(fake_gtp("random", seed=1, pass_after=100), fake_gtp("random", seed=2),
                        games=4, size=9, komi=7.0, swap_colors=True, sgf_dir=tmp_path,
                        move_timeout=20.0, max_moves=12, referee_cmd=fast_referee(),
                        progress=False, openings=book)
    for game, opening in zip(result.games, [book[0], book[0], book[1], book[1]], strict=True):
        assert game.forfeit is None and game.end == "max-moves"
        played = [p for _, p in load_game(game.sgf).moves]
        assert played[: len(opening)] == opening and len(played) == 12
    assert [g.first_color for g in result.games] == ["B", "W", "B", "W"]
    with pytest.raises(KosumiError, match="opening 1, move 2"):
        play_match(fake_gtp("random"), fake_gtp("random"), games=1, size=9, progress=False,
                   referee_cmd=None, openings=[[40, 40]])


def test_max_moves_stops_and_scores(tmp_path: Path):
    result = play_match(fake_gtp("random", seed=9, pass_after=100), fake_gtp("random", seed=10),
                        games=1, size=9, komi=7.0, sgf_dir=tmp_path, move_timeout=20.0,
                        max_moves=12, referee_cmd=fast_referee(), progress=False)
    game = result.games[0]
    assert game.end == "max-moves" and game.moves == 12 and game.forfeit is None
    assert game.referee_result is not None and game.score is not None
    assert len(load_game(game.sgf).moves) == 12


# ----------------------------------------------------------------------------- Leela Zero
def tiny_leelaz_weights(path: Path, channels: int = 4) -> Path:
    """A random 1-block Leela Zero network in the text format (see docs FORMATS.md)."""
    rng = random.Random(0)

    def values(n: int, scale: float = 0.1, const: float | None = None) -> str:
        return " ".join(f"{const if const is not None else rng.uniform(-scale, scale):.4f}"
                        for _ in range(n))

    lines = ["1"]

    def conv(cin: int, cout: int, k: int) -> None:
        lines.extend([values(cout * cin * k * k), values(cout, const=0.0),
                      values(cout, const=0.0), values(cout, const=1.0)])

    conv(18, channels, 3)
    conv(channels, channels, 3)
    conv(channels, channels, 3)
    conv(channels, 2, 1)
    lines.extend([values(362 * 722, 0.01), values(362)])
    conv(channels, 1, 1)
    lines.extend([values(256 * 361, 0.01), values(256), values(256), values(1)])
    path.write_text("\n".join(lines) + "\n")
    return path


def test_leelaz_plays_through_the_arena(tmp_path: Path):
    leelaz = require_program(LEELAZ)
    net = tiny_leelaz_weights(tmp_path / "tiny.txt")
    cmd = f"{leelaz} --cpu-only -w {net} --gtp --noponder -t 1 -v 5 --timemanage off -r 0"
    result = play_match(cmd, fake_gtp("random", seed=3), games=2, size=19, komi=7.5,
                        swap_colors=True, move_timeout=30.0, max_moves=16, referee_cmd=None,
                        progress=False)
    for game in result.games:
        assert game.forfeit is None and game.end == "max-moves" and game.moves == 16
    with pytest.raises(KosumiError, match=r"cannot play this match.*unacceptable size"):
        play_match(cmd, fake_gtp("random"), games=1, size=9, referee_cmd=None, progress=False)


# A triple ko on 9x9, hand-built: kos at A2-B2|C2 (W stone in), F2|G2-H2 (B stone in) and
# A7-B7|C7 (W stone in). Black sets up with a pass at the end; then Black keeps capturing at
# C2, C7, H2 and White at G2, B2, B7: every 6 moves the same position comes back.
TRIPLE_KO_BLACK = "B1,A2,B3,G1,F2,G3,B6,A7,B8,H2,pass;C2,C7,H2"

TRIPLE_KO_WHITE = "C1,D2,C3,H1,J2,H3,C6,D7,C8,B2,B7;G2,B2,B7"


def test_a_cycle_ends_the_game_without_a_result(tmp_path: Path):
    """Under simple ko a triple ko repeats forever: the arena stops at the third occurrence of
    the position (22 setup moves, then 2 x 6), records no result and counts a draw."""
    black = [sys.executable, str(FAKE_GTP), "script", TRIPLE_KO_BLACK]
    white = [sys.executable, str(FAKE_GTP), "script", TRIPLE_KO_WHITE]
    result = play_match(black, white, games=1, size=9, komi=7.0, sgf_dir=tmp_path,
                        move_timeout=20.0, referee_cmd=None, progress=False)
    game = result.games[0]
    assert game.forfeit is None and game.end == "cycle" and game.moves == 34
    assert game.result == "Void" and game.winner is None and game.score is None
    assert result.counts()["first"]["draws"] == 1
    assert "RE[Void]" in Path(game.sgf).read_text()
    assert len(load_game(game.sgf).moves) == 34


@pytest.mark.slow
def test_two_game_match_against_gnugo(tmp_path: Path):
    gnugo = require_program(GNUGO)
    net = tmp_path / "b2c16.safetensors"
    init = [sys.executable, "-m", "kosumi", "init", "--arch", "b2c16", "--features", "basic",
            "--head", "conv", "--board-sizes", "9", "--out", str(net), "--seed", "3"]
    subprocess.run(init, check=True, capture_output=True, timeout=120)
    onnx = tmp_path / "b2c16.onnx"
    subprocess.run([sys.executable, "-m", "kosumi", "export", str(net), "--format", "onnx",
                    "--out", str(onnx)], check=True, capture_output=True, timeout=120)
    kosumi = (f"{sys.executable} -m kosumi gtp --model {onnx} --backend onnxruntime "
              "--visits 16 --batch 4")
    sgf_dir = tmp_path / "games"
    cmd = [sys.executable, "-m", "kosumi", "match", "--black", kosumi,
           "--white", f"{gnugo} --mode gtp --level 1", "--games", "2", "--size", "9",
           "--komi", "7", "--swap-colors", "--sgf-dir", str(sgf_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "95% interval" in proc.stdout
    files = sorted(sgf_dir.glob("*.sgf"))
    assert len(files) == 2
    for path in files:
        rec = load_game(path)
        assert rec.size == 9 and rec.komi == 7.0 and len(rec.moves) > 10
        assert "F" not in rec.result  # no forfeit: kosumi only played legal moves
        if rec.moves[-1][1] == rec.moves[-2][1] == -1:  # finished by two passes
            assert parse_score(rec.result) == gnugo_final_score(path), path
        else:
            assert rec.result.endswith("+R"), rec.result


def test_kosumi_resigns_a_hopeless_game_against_gnugo_through_the_arena(tmp_path: Path):
    """kosumi gtp (network-free, the defaults: 5% for 3 moves, not in the first fifth of the
    board's points) plays GNU Go on 5x5 with komi 100 for White: as Black it cannot win, and
    it resigns once out of the opening; the arena records it as W+R and scores it."""
    kosumi = [sys.executable, "-m", "kosumi", "gtp", "--model", "uniform", "--visits", "32"]
    result = play_match(kosumi, gnugo_cmd(1), games=2, size=5, komi=100.0, swap_colors=True,
                        sgf_dir=tmp_path, move_timeout=60.0, referee_cmd=fast_referee(),
                        progress=False)
    first, second = result.games
    assert first.first_color == "B" and first.result == "W+R" and first.end == "resign"
    assert first.winner == "W" and first.moves >= 5  # never in the opening (5 moves on 5x5)
    assert second.first_color == "W" and second.end != "resign"  # won: it plays on
    assert second.winner == "W"
    assert result.counts()["first"]["wins"] == 1 and result.counts()["first"]["losses"] == 1


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_stopped_match_prints_its_finished_games(tmp_path: Path, concurrency):
    """`kill` of `kosumi match --json` (Ctrl-C takes the same path; a background job ignores
    SIGINT, so it is not sent here): exit 143, one line and no traceback, and the JSON of the
    games finished before it (the oracle: the SGF files the match wrote as each game finished; a
    game being recorded at the signal may have its file and not be counted, at most one per
    lane); the games in play are not counted."""
    sgf = tmp_path / "sgf"
    cmd = [sys.executable, "-m", "kosumi.cli", "match",
           "--black", " ".join(fake_gtp("random", seed=1, pass_after=40)),
           "--white", " ".join(fake_gtp("random", seed=2, pass_after=40)),
           "--games", "400", "--size", "9", "--referee", "none", "--sgf-dir", str(sgf),
           "--concurrency", str(concurrency), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(sgf.glob("*.sgf"))) < 3:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "kosumi: terminated"
    result = json.loads(out)
    files = sorted(int(p.stem.split("-")[1]) for p in sgf.glob("*.sgf"))
    assert 3 <= len(result["games"]) < 400
    counted = [g["index"] for g in result["games"]]
    assert set(counted) <= set(files) and len(files) - len(counted) <= concurrency
    assert counted == sorted(counted)
    if concurrency == 1:  # one game at a time: the first games, in order
        assert counted == files[: len(counted)]
    assert result["stopped_by"] == "terminated" and result["stopped_early"]
    assert sum(result["counts"]["colors"].values()) == len(counted)
