"""Ladder feature planes (kosumi.go.ladder_planes), checked by hand on small positions, the C
reading (kosumi.go._ladders) against the Python one on random games; and
benchmarks/dead_ladders.py, which counts dead ladder runs with them, on hand-made games."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from helpers import LADDER_BROKEN, LADDER_WORKS, ROOT, play_moves

from kosumi.go import ladder_planes
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, WHITE, point_to_vertex, vertex_to_point
from kosumi.go.ladder_planes import dead_ladder_escapes, ladder_features

try:
    from kosumi.go import _ladders
except ImportError:  # not built: the tests of the C reading say so below
    _ladders = None  # type: ignore[assignment]


def test_ladder_features_mark_chains_and_working_moves():
    lf = ladder_features(play_moves(LADDER_WORKS).board, 19, cache=False)
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.captured)] == ["D16"]
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.working[WHITE])] == ["D15"]
    assert not lf.working[BLACK].any()
    lf = ladder_features(play_moves(LADDER_BROKEN).board, 19, cache=False)
    assert not lf.captured.any() and not lf.working.any()


def test_the_python_reading_marks_the_same_by_hand():
    lf = ladder_planes.py_ladder_features(play_moves(LADDER_WORKS).board, 19)
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.captured)] == ["D16"]
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.working[WHITE])] == ["D15"]
    works = play_moves([*LADDER_WORKS, ("B", "D15")])
    assert [point_to_vertex(p, 19) for p in ladder_planes.py_dead_ladder_escapes(
        works.board, 19, WHITE, works.ko)] == ["E16"]


def _random_positions(seed: int, sizes: tuple[int, ...], moves: int):
    """Boards of random games (uniform legal moves: ataris and ladders everywhere), with their
    ko points."""
    rng = random.Random(seed)
    for size in sizes:
        s = GameState(size)
        for _ in range(min(moves, 2 * size * size)):
            legal = [p for p in range(size * size) if s.is_legal(p)]
            if not legal:
                break
            s.play(rng.choice(legal))
            yield size, bytes(s.board), s.ko


def test_the_c_extension_is_built():
    if _ladders is None and os.environ.get("KOSUMI_REQUIRE_REFERENCE") != "1":
        pytest.skip("kosumi.go._ladders is not built (pip install -e . needs a C compiler)")
    assert _ladders is not None, "kosumi.go._ladders is not built"
    if os.environ.get("KOSUMI_NO_SPEEDUPS", "").strip() in ("", "0"):
        assert ladder_planes.HAVE_C


@pytest.mark.skipif(_ladders is None, reason="kosumi.go._ladders is not built")
def test_the_c_reading_is_the_python_reading_on_random_games():
    planes = escapes = kos = 0
    for size, board, ko in _random_positions(7, (5, 7, 9, 13, 19), 400):
        py = ladder_planes.py_ladder_features(board, size, ko)
        captured, working = _ladders.ladder_planes(board, size, ko)
        assert captured == py.captured.tobytes() and working == py.working.tobytes(), (
            size, board.hex(), ko)
        planes += sum(captured)
        kos += ko >= 0
        for color in (BLACK, WHITE):
            mask = _ladders.dead_ladder_escapes(board, size, color, ko)
            c = tuple(np.flatnonzero(np.frombuffer(mask, np.uint8)).tolist())
            assert c == ladder_planes.py_dead_ladder_escapes(board, size, color, ko)
            escapes += len(c)
    assert planes > 1000 and escapes > 30 and kos > 3  # the games read many ladders


@pytest.mark.skipif(_ladders is None, reason="kosumi.go._ladders is not built")
@pytest.mark.parametrize(("args", "message"), [
    ((bytes(81), 20, -1), "board size 20"),
    ((bytes(80), 9, -1), "81 one-byte items"),
    ((b"\x03" + bytes(80), 9, -1), "got 3 at point 0"),
    ((bytes(81), 9, 81), "ko point 81"),
])
def test_the_c_reading_names_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        _ladders.ladder_planes(*args)
    with pytest.raises(ValueError, match="color must be 1"):
        _ladders.dead_ladder_escapes(bytes(81), 9, 3, -1)


def test_dead_ladder_escapes_are_the_liberty_of_a_chain_a_ladder_takes():
    # black D15 (the working move above) puts white D16 in atari: extending at E16 runs a ladder
    # down-right towards Q4
    works = play_moves([*LADDER_WORKS, ("B", "D15")])
    broken = play_moves([*LADDER_BROKEN, ("B", "D15")])
    assert [point_to_vertex(p, 19) for p in
            dead_ladder_escapes(works.board, 19, WHITE, works.ko)] == ["E16"]
    assert dead_ladder_escapes(broken.board, 19, WHITE, broken.ko) == ()  # Q4 breaks it
    assert dead_ladder_escapes(works.board, 19, BLACK, works.ko) == ()  # black has no atari


def test_escapes_that_gain_liberties_or_self_atari_are_not_dead_ladder_escapes():
    # white B4 in atari (A4 X, B5 X, C4 X): extending at B3 gives B3-B4 three liberties
    gain = GameState.from_rows([". X . . .", "X O X . .", ". . . . .", ". . . . .",
                                ". . . . ."], to_move=WHITE)
    assert dead_ladder_escapes(gain.board, 5, WHITE, -1) == ()
    # white A5 in the corner, atari from B5; extending at A4 gives one liberty (self-atari:
    # left to the net, some of them are sacrifices that gain)
    corner = GameState.from_rows(["O X . . .", ". X . . .", "X . . . .", ". . . . .",
                                  ". . . . ."], to_move=WHITE)
    assert dead_ladder_escapes(corner.board, 5, WHITE, -1) == ()


def _sgf(moves: list[tuple[str, str]], result: str) -> str:
    letters = "abcdefghijklmnopqrs"

    def coord(vertex: str) -> str:
        p = vertex_to_point(vertex, 19)
        return letters[p % 19] + letters[p // 19]

    body = "".join(f";{c}[{coord(v)}]" for c, v in moves)
    return f"(;GM[1]FF[4]SZ[19]KM[7.5]PB[attacker]PW[runner]RE[{result}]{body})"


def test_counts_each_players_dead_ladder_runs(tmp_path):
    # black D15 ataris white D16; white E16 runs a ladder that C4 does not break (Q4 does)
    (tmp_path / "dead").mkdir()
    (tmp_path / "dead" / "a.sgf").write_text(_sgf([*LADDER_WORKS, ("B", "D15"), ("W", "E16")],
                                                  "B+R"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "b.sgf").write_text(_sgf([*LADDER_BROKEN, ("B", "D15"), ("W", "E16")],
                                                    "W+R"))
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dead_ladders.py"),
                        str(tmp_path / "dead"), str(tmp_path / "broken")],
                       capture_output=True, text=True, check=True)
    sets = json.loads(r.stdout)["sets"]
    dead = sets[str(tmp_path / "dead")]["players"]
    assert dead["runner"] == {"games": 1, "runs": 1, "games_with_runs": 1, "lost_with_runs": 1}
    assert dead["attacker"]["runs"] == 0
    assert sets[str(tmp_path / "broken")]["players"]["runner"]["runs"] == 0


def test_a_file_that_is_not_a_game_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.sgf"
    bad.write_text("not a game")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dead_ladders.py"), str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "bad.sgf" in r.stderr


@pytest.mark.skipif(_ladders is None, reason="kosumi.go._ladders is not built")
def test_ladder_cost_times_both_readings_on_a_game(tmp_path):
    (tmp_path / "a.sgf").write_text(_sgf([*LADDER_WORKS, ("B", "D15"), ("W", "E16")], "B+R"))
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ladder_cost.py"), str(tmp_path),
                        "--repeat", "1"], capture_output=True, text=True, check=True)
    report = json.loads(r.stdout)
    assert report["games"] == 1 and report["positions"] == len(LADDER_WORKS) + 3
    assert report["planes_c_us"] > 0 and report["planes_py_us"] > 0
    (tmp_path / "empty").mkdir()
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ladder_cost.py"),
                        str(tmp_path / "empty")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no .sgf file" in r.stderr
