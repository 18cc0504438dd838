"""Position shards: canonical keys up to symmetry, dedup, round trips, SGF import, bad input.

Oracles are hand-built: diagrams rotated and mirrored by hand, hand-written SGF files whose
positions are counted and decoded by hand.
"""

from __future__ import annotations

import json

import pytest
from helpers import SGF_9, write_sgfs
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.distill.positions import (
    Position,
    PositionStore,
    canonical_key,
    read_positions,
    write_positions,
)
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE

A = ["X........",
     ".....O...",
     "..O......",
     ".........",
     "....X...."] + ["." * 9] * 4

A_ROTATED = ["........X",  # A turned a quarter clockwise, by hand: (x, y) -> (8 - y, x)
             ".........",
             "......O..",
             ".........",
             "....X....",
             ".......O."] + ["." * 9] * 3

A_MIRRORED = ["........X",  # A mirrored left-right, by hand: (x, y) -> (8 - x, y)
              "...O.....",
              "......O..",
              ".........",
              "....X...."] + ["." * 9] * 4

B = ["X........",  # A with one white stone moved: no symmetry maps it onto A
     ".........",
     "..O..O...",
     ".........",
     "....X...."] + ["." * 9] * 4


def pos(rows, to_move=BLACK, komi=7.0, source="") -> Position:
    return Position.from_state(GameState.from_rows(rows, komi=komi, to_move=to_move), source)


# ----------------------------------------------------------------------------- canonical keys
def test_symmetric_positions_share_a_key_others_do_not():
    key = pos(A).key()
    assert pos(A_ROTATED).key() == key
    assert pos(A_MIRRORED).key() == key
    assert pos(B).key() != key
    assert pos(A, to_move=WHITE).key() != key  # side to move matters
    assert pos(A, komi=6.5).key() != key  # komi too (it changes the value)


def test_ko_point_is_part_of_the_key():
    rows = [".XO..",
            "X.XO.",
            ".XO..",
            ".....",
            "....."]
    state = GameState.from_rows(rows, to_move=WHITE)
    state.play(6, WHITE)  # W B4 (x=1, y=1) captures the black stone at C4: a ko
    assert state.ko == 7 and state.to_move == BLACK
    same_stones = GameState.from_rows(state.rows(), to_move=BLACK)
    assert same_stones.rows() == state.rows() and same_stones.ko == -1
    assert canonical_key(state) != canonical_key(same_stones)


def test_write_dedups_up_to_symmetry(tmp_path):
    out = tmp_path / "pos"
    stats = write_positions(out, [pos(A, source="a"), pos(A_ROTATED, source="r"),
                                  pos(B, source="b"), pos(A_MIRRORED, source="m")])
    assert (stats.added, stats.duplicates) == (2, 2)
    got = read_positions(out)
    assert [p.source for p in got] == ["a", "b"]
    # adding again (a rerun) adds nothing; a new position is added
    stats = write_positions(out, [pos(A_ROTATED), pos(A, to_move=WHITE)])
    assert (stats.added, stats.duplicates) == (1, 1)
    assert len(read_positions(out)) == 3 == len(PositionStore(out))


# ----------------------------------------------------------------------------- round trips
def game_positions(size: int, moves: list[tuple[int, int]], source: str,
                   setup=(), first=BLACK) -> list[Position]:
    out = []
    for k in range(len(moves) + 1):
        out.append(Position(size, 7.5, "chinese", tuple(setup), first, tuple(moves[:k]), source))
    return out


def test_round_trip_many_sizes_setup_and_passes(tmp_path):
    g9 = game_positions(9, [(WHITE, 40), (BLACK, 41), (WHITE, PASS), (BLACK, 30)], "g9",
                        setup=((BLACK, 20), (BLACK, 60)), first=WHITE)
    g19 = game_positions(19, [(BLACK, 72), (WHITE, 288), (BLACK, PASS)], "g19")
    tt = Position(9, 0.5, "tromp-taylor", (), BLACK, ((BLACK, 0), (WHITE, 80)), "tt")
    everything = g9 + g19 + [tt]
    stats = write_positions(tmp_path / "p", everything, shard_size=3)
    assert stats.added == len(everything)
    store = PositionStore(tmp_path / "p")
    assert store.board_sizes() == [9, 19]
    for entry in store.shards:  # every shard holds one board size
        assert {p.board_size for _, p in store.read_shard(entry)} == {entry["board_size"]}
    assert list(store.positions(9)) == [*g9, tt]
    assert list(store.positions(19)) == g19
    state = g9[-1].to_state()
    assert state.to_move == WHITE and state.moves[-1] == (BLACK, 30)
    assert state.setup == [(BLACK, 20), (BLACK, 60)]
    assert tt.to_state().rules.ko == "positional"


def test_orphans_and_temporaries_are_ignored(tmp_path):
    out = tmp_path / "p"
    write_positions(out, [pos(A)])
    (out / "positions-000001-9x9.jsonl.zst").write_bytes(b"half a shard from a killed run")
    (out / ".positions-000001-9x9.jsonl.zst.abc.tmp").write_bytes(b"junk")
    assert len(read_positions(out)) == 1
    write_positions(out, [pos(B)])  # reuses the orphan's name, cleans the temporary
    assert len(read_positions(out)) == 2
    assert not list(out.glob(".*.tmp"))


# ----------------------------------------------------------------------------- SGF import
# ----------------------------------------------------------------------------- bad input
def one_line_exit_2(result, needle: str) -> None:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and needle in lines[0], result.output


def test_bad_input(tmp_path):
    out = tmp_path / "pos"
    write_positions(out, [pos(A), pos(B)])
    with pytest.raises(KosumiError, match="no such folder"):
        read_positions(tmp_path / "missing")
    shard = next(out.glob("positions-*.zst"))
    good = shard.read_bytes()
    shard.write_bytes(good[:-3] + bytes(3))
    with pytest.raises(KosumiError, match=shard.name):
        read_positions(out)
    shard.write_bytes(good)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shards"][0]["count"] = 7
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(KosumiError, match="manifest says 7"):
        read_positions(out)
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(KosumiError, match=r"manifest.json: not valid JSON"):
        read_positions(out)
    (out / "manifest.json").write_text(json.dumps({"format": "kosumi-labels", "version": 1,
                                                   "shards": []}))
    with pytest.raises(KosumiError, match="field 'format'"):
        read_positions(out)


def test_cli_positions(tmp_path):
    games = write_sgfs(tmp_path / "games")
    runner = CliRunner()
    r = runner.invoke(app, ["positions", "--from-sgf", str(games / "a.sgf"),
                            str(games / "sub" / "b.SGF"), "--from-sgf",
                            str(games / "sub" / "collection.sgf"), "--out", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    assert "12 new positions" in r.output
    assert len(read_positions(tmp_path / "p")) == 12

    r = runner.invoke(app, ["positions", "--from-sgf", str(tmp_path / "nope.sgf"), "--out",
                            str(tmp_path / "q")])
    one_line_exit_2(r, "nope.sgf")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "illegal.sgf").write_bytes(b"(;SZ[9];B[ee];W[ee])")
    (bad / "ok.sgf").write_bytes(SGF_9)
    r = runner.invoke(app, ["positions", "--from-sgf", str(bad), "--out", str(tmp_path / "q")])
    one_line_exit_2(r, "illegal.sgf")
    r = runner.invoke(app, ["positions", "--from-sgf", str(bad), "--out", str(tmp_path / "q"),
                            "--skip-bad"])
    assert r.exit_code == 0 and "warning" in r.output and "illegal.sgf" in r.output
    assert len(read_positions(tmp_path / "q")) == 6
