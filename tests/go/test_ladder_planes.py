"""Ladder feature planes (kosumi.go.ladder_planes), checked by hand on small positions; and
benchmarks/dead_ladders.py, which counts dead ladder runs with them, on hand-made games."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from helpers import LADDER_BROKEN, LADDER_WORKS, ROOT, play_moves

from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, WHITE, point_to_vertex, vertex_to_point
from kosumi.go.ladder_planes import dead_ladder_escapes, ladder_features


def test_ladder_features_mark_chains_and_working_moves():
    lf = ladder_features(play_moves(LADDER_WORKS).board, 19, cache=False)
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.captured)] == ["D16"]
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.working[WHITE])] == ["D15"]
    assert not lf.working[BLACK].any()
    lf = ladder_features(play_moves(LADDER_BROKEN).board, 19, cache=False)
    assert not lf.captured.any() and not lf.working.any()


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
