"""kosumi's GTP engine (kosumi.engine.gtp_engine) with the network-free UniformEvaluator.

Oracles: positions and scores counted by hand (documented next to each test), GNU Go's own
``final_score`` / ``final_status_list`` / ``fixed_handicap`` on the same moves, GNU Go as the
referee of a whole game (it rejects illegal moves), sgfmill reading what ``printsgf`` writes, and
wall-clock time for the time manager.
"""

from __future__ import annotations

import io
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import GNUGO, ROOT, assert_one_line_error, cli, require_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sgfmill import sgf

from kosumi.engine.gtp_client import GTPError, GTPProcess
from kosumi.engine.gtp_engine import GTPEngine
from kosumi.engine.mcts import SearchConfig
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, WHITE
from kosumi.go.gtp import parse_vertex, preprocess
from kosumi.runtime.evaluator import Evaluation, Evaluator, UniformEvaluator

VERTEX = re.compile(r"^(pass|resign|[A-HJ-T](1[0-9]|[1-9]))$", re.IGNORECASE)


def make_engine(visits: int = 16, evaluator: Evaluator | None = None, **kw) -> GTPEngine:
    search = {k: kw.pop(k) for k in list(kw) if k.startswith("resign_")}
    cfg = SearchConfig(visits=visits, batch=4, seed=kw.pop("seed", 1), **search)
    return GTPEngine(evaluator or UniformEvaluator(), cfg, log=io.StringIO(), **kw)


def ok(engine: GTPEngine, line: str) -> str:
    """Send a command that must succeed; return the response text."""
    reply = engine.handle(line)
    assert reply.startswith("=") and reply.endswith("\n\n"), (line, reply)
    return reply[1:].split(" ", 1)[1][:-2] if " " in reply.split("\n")[0] else reply[1:-2]


def fails(engine: GTPEngine, line: str) -> str:
    reply = engine.handle(line)
    assert reply.startswith("?") and reply.endswith("\n\n"), (line, reply)
    return reply.split(" ", 1)[1][:-2]


def board_rows(showboard: str) -> list[str]:
    """The rows of a showboard response, top first, as 'X', 'O', '.' strings."""
    rows = []
    for line in showboard.splitlines():
        m = re.match(r"^\s*(\d+) ((?:[.XO] ?)+)\s+\1\s*$", line)
        if m:
            rows.append(m.group(2).replace(" ", ""))
    return rows


def play_all(engine: GTPEngine, moves: list[str]) -> None:
    for i, v in enumerate(moves):
        ok(engine, f"play {'b' if i % 2 == 0 else 'w'} {v}")


# The "two walls" position on 7x7 (komi 0.5): Black fills column D, White column E.
# Hand count (Tromp-Taylor area): Black owns columns A-D = 28 points, White E-G = 21 points,
# 28 - 21 - 0.5 = B+6.5.
WALLS = [m for r in range(7, 0, -1) for m in (f"D{r}", f"E{r}")]

WALL_ROWS = ["...XO.."] * 7


# ----------------------------------------------------------------------------- basics
def test_scripted_session_line_by_line():
    e = make_engine()
    assert e.handle("1 protocol_version") == "=1 2\n\n"
    assert e.handle("2 name") == "=2 kosumi\n\n"
    assert e.handle("version\n") == "= 0.1.0\n\n"
    assert e.handle("# just a comment") == ""
    assert e.handle("   ") == ""
    assert e.handle("3 boardsize 7") == "=3 \n\n"
    assert e.handle("4 clear_board") == "=4 \n\n"
    assert e.handle("5 komi 0.5") == "=5 \n\n"
    assert e.handle("6 known_command genmove") == "=6 true\n\n"
    assert e.handle("7 known_command frobnicate") == "=7 false\n\n"
    assert e.handle("8 frobnicate") == "?8 unknown command\n\n"
    for i, v in enumerate(WALLS):
        assert e.handle(f"{100 + i} play {'black' if i % 2 == 0 else 'white'} {v}") == (
            f"={100 + i} \n\n"
        )
    assert board_rows(e.handle("showboard")) == WALL_ROWS
    assert e.handle("play b B2") == "= \n\n"
    assert board_rows(e.handle("showboard"))[5] == ".X.XO.."
    assert e.handle("undo") == "= \n\n"
    assert board_rows(e.handle("showboard")) == WALL_ROWS
    assert e.handle("play b pass") == "= \n\n"
    assert e.handle("play w pass") == "= \n\n"
    assert e.handle("9 final_score") == "=9 B+6.5\n\n"
    assert e.handle("final_status_list dead") == "= \n\n"
    alive = ok(e, "final_status_list alive").splitlines()
    assert {frozenset(c.split()) for c in alive} == {
        frozenset(f"D{r}" for r in range(1, 8)), frozenset(f"E{r}" for r in range(1, 8))
    }
    assert e.handle("final_status_list seki") == "= \n\n"
    assert e.handle("final_status_list zombie") == "? syntax error\n\n"
    assert "genmove" in ok(e, "list_commands").split("\n")
    assert "lz-analyze" in ok(e, "list_commands").split("\n")
    assert e.handle("10 quit") == "=10 \n\n"
    assert e.quit_requested


def test_final_score_matches_gnugo():
    gnugo = require_program(GNUGO)
    e = make_engine()
    for cmd in ("boardsize 7", "clear_board", "komi 0.5"):
        ok(e, cmd)
    play_all(e, [*WALLS, "pass", "pass"])
    with GTPProcess([gnugo, "--mode", "gtp", "--chinese-rules"]) as g:
        for cmd in ("boardsize 7", "clear_board", "komi 0.5"):
            g.send(cmd, timeout=10)
        for i, v in enumerate([*WALLS, "pass", "pass"]):
            g.send(f"play {'b' if i % 2 == 0 else 'w'} {v}", timeout=10)
        assert ok(e, "final_score") == g.send("final_score", timeout=30) == "B+6.5"


def test_bad_arguments_get_standard_messages():
    e = make_engine()
    ok(e, "boardsize 5")
    assert fails(e, "boardsize 1") == "unacceptable size"
    assert fails(e, "boardsize 20") == "unacceptable size"
    assert fails(e, "boardsize -3") == "unacceptable size"
    assert fails(e, "boardsize 99999999999999999999999") == "unacceptable size"
    assert fails(e, "boardsize nine") == "syntax error"
    assert fails(e, "boardsize") == "syntax error"
    assert fails(e, "boardsize 9 9") == "syntax error"
    assert fails(e, "komi x") == "syntax error"
    assert fails(e, "komi nan") == "syntax error"
    assert fails(e, "play b") == "syntax error"
    assert fails(e, "play x A1") == "syntax error"
    assert fails(e, "play b Z1") == "syntax error"
    assert fails(e, "play b resign") == "syntax error"
    assert fails(e, "play b F1") == "illegal move"  # off the 5x5 board
    assert fails(e, "genmove") == "syntax error"
    assert fails(e, "genmove purple") == "syntax error"
    assert fails(e, "undo") == "cannot undo"
    assert fails(e, "name extra") == "syntax error"
    assert fails(e, "known_command") == "syntax error"
    # nothing above changed the game: the 5x5 board is still empty, Black to move
    assert board_rows(ok(e, "showboard")) == ["....."] * 5
    assert "To move: black" in ok(e, "showboard")


def test_unsupported_size_is_unacceptable():
    class NineOnly(UniformEvaluator):
        def supports_size(self, size: int) -> bool:
            return size == 9

    e = make_engine(evaluator=NineOnly())
    ok(e, "boardsize 9")
    assert fails(e, "boardsize 19") == "unacceptable size"
    assert fails(e, "boardsize 13") == "unacceptable size"


# ----------------------------------------------------------------------------- legality
def test_occupied_ko_and_suicide_are_illegal():
    e = make_engine()
    ok(e, "boardsize 5")
    # Ko at B4/C4: Black A4 B5 B3 surround B4, White C5 D4 C3 surround C4.
    play_all(e, ["A4", "C5", "B5", "D4", "B3", "C3", "A1", "B4"])
    assert fails(e, "play b A4") == "illegal move"  # occupied by Black
    assert fails(e, "play b B4") == "illegal move"  # occupied by White
    ok(e, "play b C4")  # captures the white stone on B4
    assert board_rows(ok(e, "showboard")) == [".XO..", "X.XO.", ".XO..", ".....", "X...."]
    assert fails(e, "play w B4") == "illegal move"  # ko: immediate recapture
    ok(e, "play w E1")
    ok(e, "play b A2")
    ok(e, "play w B4")  # the ko may be retaken after a move elsewhere; C4 is captured
    assert board_rows(ok(e, "showboard")) == [".XO..", "XO.O.", ".XO..", "X....", "X...O"]
    show = ok(e, "showboard")
    assert "Black (X) captures: 1" in show and "White (O) captures: 1" in show
    # suicide: White on A1 with Black on A2 and B1 (both with other liberties)
    ok(e, "clear_board")
    play_all(e, ["B1", "pass", "A2", "pass"])
    assert fails(e, "play w A1") == "illegal move"  # no liberty and captures nothing
    assert board_rows(ok(e, "showboard"))[4] == ".X..."
    # the same point is legal when it captures: surround B1/A2 and then fill A1
    ok(e, "clear_board")
    play_all(e, ["B1", "C1", "A2", "B2", "pass", "A3"])
    ok(e, "play w A1")  # captures B1 and A2 (their last liberty was A1)
    assert board_rows(ok(e, "showboard"))[2:] == ["O....", ".O...", "O.O.."]


# ----------------------------------------------------------------------------- genmove
def test_genmove_twice_in_a_row_and_for_either_colour():
    e = make_engine()
    ok(e, "boardsize 9")
    first = ok(e, "genmove b")
    second = ok(e, "genmove b")  # Black again, although White is to move
    assert VERTEX.match(first) and VERTEX.match(second), (first, second)
    assert first.lower() != "resign" and second.lower() != "resign"
    rows = board_rows(ok(e, "showboard"))
    stones = [v for v in (first, second) if v.lower() != "pass"]
    assert sum(r.count("X") for r in rows) == len(stones)
    assert sum(r.count("O") for r in rows) == 0
    third = ok(e, "genmove white")
    assert VERTEX.match(third)
    assert "To move: black" in ok(e, "showboard")


def test_genmove_resigns_a_hopeless_game():
    # 5x5 with komi 100: Black can own at most 25 points, so every line loses for Black.
    e = make_engine(visits=40, resign_threshold=0.9, resign_consecutive=1, resign_opening=0)
    ok(e, "boardsize 5")
    ok(e, "komi 100")
    assert ok(e, "genmove b") == "resign"
    assert board_rows(ok(e, "showboard")) == ["....."] * 5  # a resignation is not a move
    ok(e, "komi -100")
    assert ok(e, "genmove b").lower() != "resign"


def test_genmove_resigns_only_after_the_opening_and_several_bad_moves():
    """The defaults of `kosumi gtp`: three own moves in a row below the threshold, and not in
    the first fifth of the board's points in moves (5 on 5x5)."""
    e = make_engine(visits=40, resign_threshold=0.05, resign_consecutive=3,
                    resign_opening=0.2)
    ok(e, "boardsize 5")
    ok(e, "komi 100")
    replies = []
    for _ in range(6):
        replies.append(ok(e, "genmove b").lower())
        if replies[-1] == "resign":
            break
        ok(e, "play w pass")
    assert replies[-1] == "resign" and "resign" not in replies[:-1]
    assert len(replies) >= 3  # not before three low searches (and move 5)


def test_genmove_respects_the_clock():
    e = make_engine(visits=100_000)  # far more than 1 s of search
    ok(e, "boardsize 9")
    ok(e, "time_settings 0 1 1")  # byo-yomi: 1 s per move -> about 0.9 s of thinking
    t0 = time.monotonic()
    assert VERTEX.match(ok(e, "genmove b"))
    took = time.monotonic() - t0
    assert 0.5 < took < 3.0, took
    ok(e, "time_left w 0.4 1")  # 0.4 s left for one stone: 0.36 s of thinking
    t0 = time.monotonic()
    ok(e, "genmove w")
    assert time.monotonic() - t0 < 1.5
    assert fails(e, "time_settings 1 2") == "syntax error"
    assert fails(e, "time_left b x 0") == "syntax error"
    assert fails(e, "time_left q 1 0") == "syntax error"
    ok(e, "kgs-time_settings none")
    ok(e, "kgs-time_settings byoyomi 10 5 3")
    assert fails(e, "kgs-time_settings sudden 10") == "syntax error"


# ------------------------------------------------------------------------ scoring with ownership
class OwnershipEvaluator(Evaluator):
    """Uniform policy, value 0.5, and a fixed ownership map (given from Black's view)."""

    def __init__(self, black_view: np.ndarray):
        self.inner = UniformEvaluator(value=0.5)
        self.black_view = black_view.astype(np.float32)

    def evaluate(self, states):
        out = []
        for s, ev in zip(states, self.inner.evaluate(states), strict=True):
            own = self.black_view if s.to_move == BLACK else -self.black_view
            out.append(Evaluation(policy=ev.policy, value=0.5, ownership=own.copy()))
        return out


def _left_black_right_white(size: int = 7, split: int = 3) -> np.ndarray:
    x = np.arange(size * size) % size
    return np.where(x <= split, 1.0, -1.0)


# The walls again, plus a lone white stone on A7 deep in Black's side. Hand count:
# A7 dead (removed): Black 28, White 21 -> B+6.5.
# A7 alive (no ownership): the 20 empty points of columns A-C touch both colours (dame), so
# Black 7 stones, White 7 + 14 + 1 = 22 -> 7 - 22 - 0.5 = W+15.5.
DEAD_STONE_GAME = [*WALLS, "pass", "A7", "pass", "pass"]


def test_dead_stones_from_ownership_and_gnugo_agrees():
    e = make_engine(evaluator=OwnershipEvaluator(_left_black_right_white()))
    plain = make_engine()
    for eng in (e, plain):
        for cmd in ("boardsize 7", "clear_board", "komi 0.5"):
            ok(eng, cmd)
        play_all(eng, DEAD_STONE_GAME)
    assert ok(e, "final_status_list dead") == "A7"
    assert ok(e, "final_score") == "B+6.5"
    assert ok(plain, "final_status_list dead") == ""  # no ownership: everything alive
    assert ok(plain, "final_score") == "W+15.5"
    gnugo = require_program(GNUGO)
    with GTPProcess([gnugo, "--mode", "gtp", "--chinese-rules"]) as g:
        for cmd in ("boardsize 7", "clear_board", "komi 0.5"):
            g.send(cmd, timeout=10)
        for i, v in enumerate(DEAD_STONE_GAME):
            g.send(f"play {'b' if i % 2 == 0 else 'w'} {v}", timeout=10)
        assert g.send("final_status_list dead", timeout=30) == "A7"
        assert g.send("final_score", timeout=30) == "B+6.5"


def test_genmove_cleanup_does_not_pass_while_dead_stones_remain():
    e = make_engine(evaluator=OwnershipEvaluator(_left_black_right_white()))
    for cmd in ("boardsize 7", "clear_board", "komi 0.5"):
        ok(e, cmd)
    play_all(e, [*WALLS, "pass", "A7"])
    move = ok(e, "kgs-genmove_cleanup b")
    assert move.lower() not in ("pass", "resign")
    assert board_rows(ok(e, "showboard")) != WALL_ROWS
    # KGS's cleanup phase comes after both players passed: the game goes on
    e = make_engine(evaluator=OwnershipEvaluator(_left_black_right_white()))
    for cmd in ("boardsize 7", "clear_board", "komi 0.5"):
        ok(e, cmd)
    play_all(e, DEAD_STONE_GAME)
    assert ok(e, "kgs-genmove_cleanup b").lower() not in ("pass", "resign")


# ----------------------------------------------------------------------------- handicap
def test_fixed_handicap_matches_gnugo():
    gnugo = require_program(GNUGO)
    e = make_engine()
    cases = [(n, k) for n in (7, 8, 9, 10, 13, 19) for k in (2, 3, 4, 5, 6, 7, 8, 9, 10)]
    with GTPProcess([gnugo, "--mode", "gtp"]) as g:
        for n, k in cases:
            g.send(f"boardsize {n}", timeout=10)
            ok(e, f"boardsize {n}")
            try:
                expected = set(g.send(f"fixed_handicap {k}", timeout=10).upper().split())
            except GTPError:  # GNU Go refused: so must we
                assert fails(e, f"fixed_handicap {k}") == "invalid number of stones", (n, k)
                continue
            assert set(ok(e, f"fixed_handicap {k}").upper().split()) == expected, (n, k)
            rows = board_rows(ok(e, "showboard"))
            assert sum(r.count("X") for r in rows) == k
            assert "To move: white" in ok(e, "showboard")


def test_handicap_errors_and_free_placement():
    e = make_engine()
    ok(e, "boardsize 9")
    assert fails(e, "fixed_handicap 1") == "invalid number of stones"
    assert fails(e, "fixed_handicap x") == "syntax error"
    ok(e, "play b E5")
    assert fails(e, "fixed_handicap 2") == "board not empty"
    assert fails(e, "place_free_handicap 2") == "board not empty"
    assert fails(e, "set_free_handicap C3 G7") == "board not empty"
    ok(e, "clear_board")
    assert fails(e, "set_free_handicap C3") == "bad vertex list"
    assert fails(e, "set_free_handicap C3 C3") == "bad vertex list"
    assert fails(e, "set_free_handicap C3 pass") == "bad vertex list"
    assert fails(e, "set_free_handicap C3 Z3") == "bad vertex list"
    assert fails(e, "place_free_handicap 81") == "invalid number of stones"
    assert fails(e, "place_free_handicap 1") == "invalid number of stones"
    ok(e, "set_free_handicap A1 B2 C3")
    rows = board_rows(ok(e, "showboard"))
    assert rows[8] == "X........" and rows[7] == ".X......." and rows[6] == "..X......"
    assert "To move: white" in ok(e, "showboard")
    for n in (5, 12):  # within the fixed layouts, and beyond them
        ok(e, "clear_board")
        vs = ok(e, f"place_free_handicap {n}").upper().split()
        assert len(vs) == len(set(vs)) == n and all(VERTEX.match(v) for v in vs)
        assert sum(r.count("X") for r in board_rows(ok(e, "showboard"))) == n
        assert VERTEX.match(ok(e, "genmove w"))


# ----------------------------------------------------------------------------- SGF
SGF_TEXT = b"(;GM[1]FF[4]SZ[9]KM[6.5]AB[cc][gg]PL[W];W[ee];B[ce];W[ec])"


def test_loadsgf_and_printsgf_round_trip(tmp_path: Path):
    src = tmp_path / "game.sgf"
    src.write_bytes(SGF_TEXT)
    e = make_engine()
    assert ok(e, f"loadsgf {src}") == "black"
    empty = "." * 9
    assert board_rows(ok(e, "showboard")) == [
        empty, empty, "..X.O....", empty, "..X.O....", empty, "......X..", empty, empty,
    ]
    assert "komi: 6.5" in ok(e, "showboard")
    assert ok(e, f"loadsgf {src} 2") == "black"  # the position before move 2: W E5 only
    assert board_rows(ok(e, "showboard"))[2:7] == ["..X......", empty, "....O....", empty,
                                                    "......X.."]
    assert ok(e, f"loadsgf {src} 1") == "white"  # before move 1: the setup only
    assert ok(e, f"loadsgf {src} 99") == "black"  # past the end: the whole game
    # printsgf, read back by sgfmill (not by kosumi): the same game
    text = ok(e, "printsgf")
    original, printed = sgf.Sgf_game.from_bytes(SGF_TEXT), sgf.Sgf_game.from_string(text)
    assert printed.get_size() == 9 and printed.get_komi() == 6.5
    assert printed.get_root().get_setup_stones() == original.get_root().get_setup_stones()
    def moves(g):
        return [n.get_move() for n in g.get_main_sequence()[1:]]
    assert moves(printed) == moves(original)
    # printsgf FILE, then loadsgf of that file gives the same board
    out = tmp_path / "out.sgf"
    assert ok(e, f"printsgf {out}") == ""
    before = board_rows(ok(e, "showboard"))
    ok(e, "clear_board")
    assert ok(e, f"loadsgf {out}") == "black"
    assert board_rows(ok(e, "showboard")) == before
    # a played continuation is kept in the printed SGF
    ok(e, "play b D4")
    last = sgf.Sgf_game.from_string(ok(e, "printsgf")).get_main_sequence()[-1].get_move()
    assert last == ("b", (3, 3))  # sgfmill (row from the bottom, column): D4


def test_loadsgf_failures_leave_the_game_alone(tmp_path: Path):
    e = make_engine()
    ok(e, "boardsize 9")
    ok(e, "play b E5")
    bad = tmp_path / "bad.sgf"
    bad.write_bytes(b"(;GM[1]FF[4]SZ[9];B[ee];W[ee])")  # W plays on an occupied point
    assert fails(e, f"loadsgf {bad}") == "cannot load file"
    assert fails(e, f"loadsgf {tmp_path / 'missing.sgf'}") == "cannot load file"
    assert fails(e, f"loadsgf {tmp_path}") == "cannot load file"  # a folder
    assert fails(e, "loadsgf") == "syntax error"
    assert fails(e, f"loadsgf {bad} zero") == "syntax error"
    assert board_rows(ok(e, "showboard"))[4] == "....X...."


# ----------------------------------------------------------------------------- analysis
INFO = re.compile(
    r"info move (\S+) visits (\d+) winrate (\S+)(?: scoreMean (\S+) scoreLead (\S+))?"
    r" prior (\S+) lcb (\S+) order (\d+) pv((?: \S+)+?)(?= info |$| ownership )"
)


def parse_info(line: str) -> list[dict]:
    assert line.startswith("info move "), line
    out = []
    for m in INFO.finditer(line):
        out.append({"move": m.group(1), "visits": int(m.group(2)), "winrate": m.group(3),
                    "score": m.group(5), "prior": m.group(6), "lcb": m.group(7),
                    "order": int(m.group(8)), "pv": m.group(9).split()})
    assert len(out) == line.count("info move"), line
    return out


def test_lz_analyze_format_through_handle():
    e = make_engine(visits=40)
    ok(e, "boardsize 9")
    reply = e.handle("5 lz-analyze 1")
    assert reply.startswith("=5\n") and reply.endswith("\n\n") and reply.count("\n\n") == 1
    lines = reply.split("\n")[1:-2]
    assert lines and all(ln.startswith("info move ") for ln in lines)
    infos = parse_info(lines[-1])
    assert [i["order"] for i in infos] == list(range(len(infos)))
    for i in infos:
        assert VERTEX.match(i["move"]) and i["pv"][0] == i["move"]
        assert all(VERTEX.match(v) for v in i["pv"])
        for key in ("winrate", "prior", "lcb"):
            assert re.fullmatch(r"\d+", i[key]) and 0 <= int(i[key]) <= 10000
        # uniform policy on an empty 9x9 board: 81 points + pass, 1/82 each = 121.95/10000
        assert int(i["prior"]) == 122
    visits = [i["visits"] for i in infos]
    # ordered by the move choice (play-selection weight, with its LCB check), like KataGo's
    # "order", which need not be by visits
    assert sum(visits) <= 40 and max(visits) >= sum(visits) / len(visits)
    # analysis does not play a move
    assert board_rows(ok(e, "showboard")) == ["." * 9] * 9


def test_kata_analyze_format_through_handle():
    e = make_engine(visits=40)
    ok(e, "boardsize 7")
    ok(e, "play b D4")
    reply = e.handle("kata-analyze w interval 1 ownership true")
    lines = reply.split("\n")[1:-2]
    assert reply.startswith("=\n") and lines
    last = lines[-1]
    infos = parse_info(last)
    for i in infos:
        assert i["move"] != "D4"  # occupied
        for key in ("winrate", "prior", "lcb"):
            assert re.fullmatch(r"\d\.\d+", i[key]) and 0.0 <= float(i[key]) <= 1.0
        # uniform policy after one stone on 7x7: 48 points + pass -> 1/49
        assert float(i["prior"]) == pytest.approx(1 / 49, abs=1e-6)
        assert i["score"] is not None  # the area evaluator reports a score lead
    assert " ownership " not in last  # the uniform evaluator has no ownership
    # with an ownership head: the map, from the side to move's (White's) view, top-left first
    black_view = _left_black_right_white()
    e2 = make_engine(visits=20, evaluator=OwnershipEvaluator(black_view))
    ok(e2, "boardsize 7")
    ok(e2, "play b D4")
    last = e2.handle("kata-analyze w 1 ownership true").split("\n")[-3]
    own = np.array([float(x) for x in last.split(" ownership ")[1].split()])
    assert len(own) == 49 and np.allclose(own, -black_view)
    assert " ownership " not in e2.handle("kata-analyze w 1").split("\n")[-3]
    assert fails(e, "kata-analyze w interval") == "syntax error"
    assert fails(e, "kata-analyze w frobnicate 3") == "syntax error"
    assert fails(e, "lz-analyze purple") == "syntax error"


def test_genmove_analyze_streams_then_plays():
    e = make_engine(visits=30)
    ok(e, "boardsize 9")
    for cmd, style in (("lz-genmove_analyze b 1", "lz"), ("genmove_analyze w 1", "kata")):
        reply = e.handle(cmd)
        lines = reply.split("\n")
        assert lines[0] == "=" and reply.endswith("\n\n") and reply.count("\n\n") == 1
        assert lines[-3].startswith("play ") and VERTEX.match(lines[-3][5:])
        info = [ln for ln in lines[1:-3]]
        assert info and all(ln.startswith("info move ") for ln in info)
        if style == "lz":
            assert re.fullmatch(r"\d+", parse_info(info[-1])[0]["winrate"])
        else:
            assert "." in parse_info(info[-1])[0]["winrate"]
    rows = board_rows(ok(e, "showboard"))
    assert sum(r.count("X") for r in rows) == 1 and sum(r.count("O") for r in rows) == 1
    assert fails(e, "lz-genmove_analyze") == "syntax error"  # the colour is required


def test_run_loop_in_process():
    """``run`` over in-memory streams: analysis stops as soon as another line is queued."""
    script = "1 boardsize 5\n2 lz-analyze 1\n3 name\n\n# comment\n4 genmove b\n5 play w A1\n"
    stdout = io.StringIO()
    e = make_engine()
    e.run(io.StringIO(script), stdout)  # ends at the end of input, without quit
    out = stdout.getvalue()
    replies = out.split("\n\n")
    assert replies[-1] == ""
    replies = replies[:-1]
    assert replies[0] == "=1 "
    assert replies[1].split("\n")[0] == "=2"
    assert all(ln.startswith("info move ") for ln in replies[1].split("\n")[1:])
    assert replies[2] == "=3 kosumi"
    assert VERTEX.match(replies[3][3:]) and replies[3].startswith("=4 ")
    assert replies[4] in ("=5 ", "?5 illegal move")
    assert len(replies) == 5


def test_internal_errors_are_answered_and_the_engine_goes_on():
    e = make_engine()

    def broken() -> str:
        raise ZeroDivisionError("boom")

    e.commands["name"] = broken
    reply = e.handle("7 name")
    assert reply.startswith("?7 internal error: ZeroDivisionError") and reply.endswith("\n\n")
    assert "ZeroDivisionError" in e.log.getvalue()  # the traceback went to the log
    assert e.handle("protocol_version") == "= 2\n\n"
    assert VERTEX.match(ok(e, "genmove b"))


def test_lazy_evaluator_factory():
    made = []

    def factory() -> Evaluator:
        made.append(1)
        return UniformEvaluator()

    e = GTPEngine(factory, SearchConfig(visits=4), log=io.StringIO())
    assert e.handle("name") == "= kosumi\n\n" and not made  # no model needed to answer
    ok(e, "boardsize 9")
    assert VERTEX.match(ok(e, "genmove b")) and made == [1]


# ----------------------------------------------------------------------------- subprocesses
def kosumi_gtp(*args: str) -> list[str]:
    return [sys.executable, "-m", "kosumi.cli", "gtp", "--model", "uniform", *args]


class LineReader:
    """Lines of a pipe through a thread, so the test can wait with a timeout."""

    def __init__(self, stream):
        self.q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.q.put(raw.decode())
        self.q.put(None)

    def get(self, timeout: float = 20.0) -> str:
        line = self.q.get(timeout=timeout)
        assert line is not None, "the engine closed its output"
        return line.rstrip("\n")


def test_lz_analyze_streams_until_the_next_command():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(kosumi_gtp("--visits", "50", "--seed", "3"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        out = LineReader(proc.stdout)

        def send(line: str) -> None:
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()

        send("1 boardsize 9")
        assert out.get() == "=1 " and out.get() == ""
        send("2 lz-analyze 10")
        assert out.get() == "=2"
        infos = [out.get() for _ in range(4)]  # updates keep coming every 0.1 s
        assert all(ln.startswith("info move ") for ln in infos), infos
        for ln in infos:
            parse_info(ln)
        t0 = time.monotonic()
        send("3 name")
        while (line := out.get()) != "":  # maybe a few more updates, then the empty line
            assert line.startswith("info move "), line
            assert time.monotonic() - t0 < 5.0, "the analysis did not stop"
        assert out.get() == "=3 kosumi" and out.get() == ""
        assert time.monotonic() - t0 < 5.0
        send("4 kata-analyze b 5")
        assert out.get() == "=4"
        assert out.get().startswith("info move ")
        send("5 protocol_version")
        while out.get() != "":
            pass
        assert out.get() == "=5 2"
        assert out.get() == ""
        send("6 quit")
        assert out.get() == "=6 "
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_full_game_against_gnugo_with_legal_moves_only():
    gnugo = require_program(GNUGO)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    with GTPProcess(kosumi_gtp("--visits", "24", "--seed", "5"), env=env) as me, \
            GTPProcess([gnugo, "--mode", "gtp", "--level", "1", "--chinese-rules",
                        "--seed", "7"]) as ref:
        for engine in (me, ref):
            for cmd in ("boardsize 9", "clear_board", "komi 7"):
                engine.send(cmd, timeout=30)
        mirror = GameState(9, 7.0)
        passes, moves = 0, 0
        while passes < 2 and moves < 300:
            color = "b" if moves % 2 == 0 else "w"
            if color == "b":  # kosumi plays Black; GNU Go referees every move
                vertex = me.send(f"genmove {color}", timeout=60)
                if vertex.lower() == "resign":
                    break
                ref.send(f"play {color} {vertex}", timeout=30)  # raises GTPError if illegal
            else:
                vertex = ref.send(f"genmove {color}", timeout=60)
                if vertex.lower() == "resign":
                    break
                me.send(f"play {color} {vertex}", timeout=30)
            mirror.play(parse_vertex(vertex, 9), BLACK if color == "b" else WHITE)
            passes = passes + 1 if vertex.lower() == "pass" else 0
            moves += 1
        assert moves >= 10
        # both engines see the same board at the end
        rows_me = board_rows(me.send("showboard", timeout=10))
        assert rows_me == mirror.rows()
        assert me.send("final_score", timeout=60)


def test_quit_ends_the_run_loop():
    stdout = io.StringIO()
    make_engine().run(io.StringIO("1 name\n2 quit\n3 name\n"), stdout)
    assert stdout.getvalue() == "=1 kosumi\n\n=2 \n\n"


def test_cli_starts_without_torch_and_reports_bad_models():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    probe = (
        "import sys\n"
        "import kosumi.cli, kosumi.engine.gtp_engine as g\n"
        "g.load_model('uniform')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, timeout=60)
    bad = subprocess.run(
        [sys.executable, "-m", "kosumi.cli", "gtp", "--model", str(ROOT / "no-such-model.bin")],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("kosumi: error: ") and bad.stderr.count("\n") == 1


def test_a_model_that_fails_to_load_is_a_one_line_failure():
    from kosumi.errors import KosumiError

    def factory() -> Evaluator:
        raise KosumiError("model.bin: cannot read model file")

    e = GTPEngine(factory, SearchConfig(visits=4), log=io.StringIO())
    assert e.handle("1 boardsize 9") == "?1 model.bin: cannot read model file\n\n"
    assert e.handle("protocol_version") == "= 2\n\n"


# valid commands to start from
TEMPLATES = [
    "protocol_version", "name", "version", "known_command play", "list_commands", "quit",
    "boardsize 9", "boardsize 5", "boardsize 3", "clear_board", "komi 6.5", "komi -3",
    "play b E5", "play w C3", "play black pass", "play white A1", "genmove b", "genmove w",
    "undo", "showboard", "final_score", "final_status_list dead", "final_status_list alive",
    "final_status_list seki", "time_settings 10 1 1", "time_left b 5 0", "time_left w 1 1",
    "kgs-time_settings canadian 10 5 2", "loadsgf /nonexistent/game.sgf 3", "printsgf",
    "fixed_handicap 4", "place_free_handicap 3", "set_free_handicap C3 G7 E5",
    "kgs-genmove_cleanup b", "lz-analyze 1", "lz-analyze w 2", "kata-analyze b 1",
    "kata-analyze interval 1 ownership true maxmoves 3", "lz-genmove_analyze b 1",
    "genmove_analyze w 1", "kata-genmove_analyze b 1",
]

WEIRD_TOKENS = [
    "", "0", "-1", "1", "2", "19", "20", "-19", "99999999999999999999999999", "1e309", "nan",
    "inf", "-inf", "0.5", "+7", "A0", "Z99", "T19", "J9", "I5", "a1", "pass", "PASS", "resign",
    "b", "w", "black", "white", "x", "#", "\t", "\x00", "\x1b[31m", "é", "五", "\u2028", "🀄",
    "D4", "Q16", "K10", "E5", "A1", "interval", "ownership", "true", "maxmoves", "=", "?",
    "\r", "\n", "9" * 60,
]

token = st.one_of(st.sampled_from(WEIRD_TOKENS), st.text(max_size=8))


@st.composite
def mutated(draw) -> str:
    """A valid command with tokens replaced, dropped, duplicated or appended; maybe an id."""
    tokens = draw(st.sampled_from(TEMPLATES)).split()
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["replace", "drop", "insert", "append"]))
        i = draw(st.integers(0, max(len(tokens) - 1, 0)))
        if op == "replace" and tokens:
            tokens[i] = draw(token)
        elif op == "drop" and tokens:
            del tokens[i]
        elif op == "insert":
            tokens.insert(i, draw(token))
        else:
            tokens.append(draw(token))
    line = " ".join(tokens)
    if draw(st.booleans()):
        line = f"{draw(st.integers(0, 2**40))} {line}"
    return line


lines = st.one_of(
    st.sampled_from(TEMPLATES),
    mutated(),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="ascii"), max_size=40),
)

REPLY_HEAD = re.compile(r"^([=?])(\d*)")


def no_file_writes(line: str) -> str:
    """``printsgf FILE`` writes FILE (and the tests run as any user): keep only ``printsgf``."""
    tokens = preprocess(line).split()
    if tokens and tokens[0].isdigit():
        tokens = tokens[1:]
    return "printsgf" if tokens[:1] == ["printsgf"] else line


def check_reply(line: str, reply: str) -> None:
    text = preprocess(line)
    if not text:
        assert reply == "", (line, reply)
        return
    assert reply.endswith("\n\n"), (line, reply)
    assert reply.count("\n\n") == 1, (line, reply)  # the only blank line ends the reply
    m = REPLY_HEAD.match(reply)
    assert m, (line, reply)
    first = text.split()[0]
    if first.isascii() and first.isdigit() and len(first) <= 100:
        assert m.group(2) == str(int(first)), (line, reply)
    else:
        assert m.group(2) == "", (line, reply)
    if m.group(1) == "?":
        assert reply.count("\n") == 2, (line, reply)  # failures are one line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, min_size=1, max_size=8))
def test_any_command_sequence_gets_well_formed_replies(commands):
    engine = GTPEngine(UniformEvaluator(), SearchConfig(visits=4, batch=2, seed=0),
                       log=io.StringIO())
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # whatever a command might write lands in a scratch folder
        try:
            for line in map(no_file_writes, commands):
                check_reply(line, engine.handle(line))
        finally:
            os.chdir(here)
    assert engine.handle("protocol_version") == "= 2\n\n"
    assert engine.handle("11 name") == "=11 kosumi\n\n"
    assert engine.handle("boardsize 9") == "= \n\n"
    move = engine.handle("genmove b")
    assert re.fullmatch(r"= ([A-HJ]\d|pass|resign)\n\n", move, re.IGNORECASE), move


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_single_line(line):
    engine = GTPEngine(UniformEvaluator(), SearchConfig(visits=2, batch=2, seed=0),
                       log=io.StringIO())
    line = no_file_writes(line)
    check_reply(line, engine.handle(line))
    assert engine.handle("protocol_version") == "= 2\n\n"


def test_every_single_token_replacement_of_every_template():
    """Deterministic sweep: each argument of each valid command replaced by each weird token."""
    engine = GTPEngine(UniformEvaluator(), SearchConfig(visits=2, batch=2, seed=0),
                       log=io.StringIO())
    engine.handle("boardsize 9")
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for template in TEMPLATES:
                tokens = template.split()
                for i in range(len(tokens) + 1):
                    for weird in WEIRD_TOKENS:
                        mutant = [*tokens[:i], weird, *tokens[i + 1:]]
                        line = no_file_writes(" ".join(mutant))
                        check_reply(line, engine.handle(line))
                engine.handle("boardsize 9")  # keep the games small
        finally:
            os.chdir(here)
    assert engine.handle("protocol_version") == "= 2\n\n"


@pytest.mark.parametrize("args,needles", [
    (["--set", "foo=1"], ["unknown search setting 'foo'", "lcb_stdevs"]),
    (["--set", "lcb_stdevs=abc"], ["lcb_stdevs='abc'", "not a float"]),
    (["--set", "c_puct=-1"], ["c_puct=-1.0", "must be >= 0"]),
    (["--set", "novalue"], ["expected name=value"]),
    (["--resign-threshold", "1.5"], ["--resign-threshold must be in [0, 1)"]),
])
def test_kosumi_gtp_bad_search_settings_are_one_line_errors(args, needles):
    assert_one_line_error(cli("gtp", "--model", "uniform", *args), *needles)


def test_kosumi_gtp_search_settings_reach_the_search():
    """--set NAME=VALUE (dashes or underscores, booleans as on/off/true/false) and the direct
    options build the engine's SearchConfig."""
    cfg = SearchConfig(resign_threshold=0.05).with_settings(
        ["lcb-stdevs=2", "noise_pruning=off", "subtree_bias_factor=0", "seed=7"])
    assert (cfg.lcb_stdevs, cfg.noise_pruning, cfg.subtree_bias_factor, cfg.seed) == \
        (2.0, False, 0.0, 7)
    assert cfg.resign_threshold == 0.05 and SearchConfig().noise_pruning
    assert SearchConfig(temperature=0.5, temperature_late=0.1,
                        temperature_halflife=19).temperature_at(19, 19) == pytest.approx(0.3)
    assert SearchConfig(temperature=0.5, temperature_late=0.1,
                        temperature_halflife=19).temperature_at(9, 9) == pytest.approx(0.3)
    assert SearchConfig(temperature=1.0, temperature_moves=8).temperature_at(8, 9) == 0.0
