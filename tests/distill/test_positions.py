"""Position shards: canonical keys up to symmetry, dedup, round trips, SGF import, bad input.

Oracles are hand-built: diagrams rotated and mirrored by hand, hand-written SGF files whose
positions are counted and decoded by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.distill.positions import (
    Position,
    PositionStore,
    PositionWriter,
    canonical_key,
    read_positions,
    write_positions,
)
from kosumi.distill.sgf_import import import_sgf
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE

EMPTY9 = ["." * 9] * 9

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
SGF_9 = b"(;GM[1]FF[4]SZ[9]KM[6.5];B[ee];W[cc];B[gc];W[tt];B[ge])"
SGF_13 = b"(;GM[1]FF[4]SZ[13]KM[0.5]HA[2]AB[dd][jj];W[gg];B[];W[])"
SGF_COLLECTION = b"(;SZ[9];B[aa];W[bb])(;SZ[9];B[ii])"


def write_sgfs(root: Path) -> Path:
    root.mkdir()
    (root / "a.sgf").write_bytes(SGF_9)
    (root / "sub").mkdir()
    (root / "sub" / "b.SGF").write_bytes(SGF_13)
    (root / "sub" / "collection.sgf").write_bytes(SGF_COLLECTION)
    (root / "notes.txt").write_text("not an sgf")
    return root


def test_import_sgf_counts_and_moves(tmp_path):
    games = write_sgfs(tmp_path / "games")
    out = tmp_path / "pos"
    stats = import_sgf([games], out)
    # a.sgf: 5 moves -> 6 positions; b.SGF: 3 moves, the last one ends the game -> 3;
    # collection: game 1 gives 3, game 2's two positions are game 1's (empty board, and a
    # black stone in the opposite corner = a 180-degree rotation)
    assert (stats.files, stats.added, stats.duplicates) == (3, 12, 2)
    store = PositionStore(out)
    assert store.board_sizes() == [9, 13]
    nine = [p for p in store.positions(9) if p.source.endswith("a.sgf")]
    # by hand: ee = E5 = (4, 4) -> 40, cc -> 20, gc -> 24, tt = pass, ge -> 42
    game = ((BLACK, 40), (WHITE, 20), (BLACK, 24), (WHITE, PASS), (BLACK, 42))
    assert [p.moves for p in nine] == [game[:k] for k in range(6)]
    assert {p.komi for p in nine} == {6.5}
    thirteen = list(store.positions(13))
    assert [len(p.moves) for p in thirteen] == [0, 1, 2]
    assert thirteen[0].to_move == WHITE and len(thirteen[0].setup) == 2
    assert thirteen[2].to_state().passes == 1
    coll = [p for p in store.positions(9) if "collection" in p.source]
    assert [p.source.rsplit("#", 1)[1] for p in coll] == ["1", "1", "1"]
    # a rerun adds nothing
    again = import_sgf([games], out)
    assert (again.added, again.duplicates) == (0, 14)
    assert len(PositionStore(out)) == 12


def test_import_sampling_and_min_moves(tmp_path):
    games = write_sgfs(tmp_path / "games")
    half = import_sgf([games / "a.sgf"], tmp_path / "half", sample=0.5, seed=3)
    again = import_sgf([games / "a.sgf"], tmp_path / "half2", sample=0.5, seed=3)
    assert 0 < half.added < 6
    assert read_positions(tmp_path / "half") == read_positions(tmp_path / "half2")
    assert again.added == half.added
    # the same game elsewhere (another folder, another name) samples alike: keyed on content
    moved = tmp_path / "elsewhere" / "renamed.sgf"
    moved.parent.mkdir()
    moved.write_bytes((games / "a.sgf").read_bytes())
    import_sgf([moved], tmp_path / "half3", sample=0.5, seed=3)
    assert ([p.moves for p in read_positions(tmp_path / "half3")]
            == [p.moves for p in read_positions(tmp_path / "half")])
    import_sgf([games / "a.sgf"], tmp_path / "late", min_moves=2)
    assert [len(p.moves) for p in read_positions(tmp_path / "late")] == [2, 3, 4, 5]


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


def test_a_game_that_fails_to_replay_adds_nothing(tmp_path):
    """The positions before a bad game's illegal move are not stored, nor remembered as
    stored: a later game through the same positions stores them."""
    d4, e5, f6 = (9 * 5 + 3, 9 * 4 + 4, 9 * 3 + 5)
    with PositionWriter(tmp_path / "pos") as w:
        with pytest.raises(KosumiError, match="bad: move 3"):
            w.add_game(GameState(9), [(BLACK, d4), (WHITE, e5), (BLACK, d4)], "bad")
        assert w.add_game(GameState(9), [(BLACK, d4), (WHITE, e5), (BLACK, f6)], "good") == 4
    assert [len(p.moves) for p in read_positions(tmp_path / "pos")] == [0, 1, 2, 3]


def test_import_checks_moves_under_the_chosen_rules(tmp_path):
    """A multi-stone suicide is legal under Tromp-Taylor rules, illegal under chinese."""
    # Black's A5-B5 are surrounded by C5, B4, A3; Black A4 then has no liberty and captures
    # nothing: a 3-stone suicide
    sgf = b"(;GM[1]FF[4]SZ[5]KM[0];B[aa];W[ca];B[ba];W[bb];B[ee];W[ac];B[ab])"
    (tmp_path / "s.sgf").write_bytes(sgf)
    with pytest.raises(KosumiError, match="illegal"):
        import_sgf([tmp_path / "s.sgf"], tmp_path / "a")
    stats = import_sgf([tmp_path / "s.sgf"], tmp_path / "b", rules="tromp-taylor")
    assert stats.files == 1 and stats.added == 8


def test_a_failed_write_stops_an_import_that_skips_bad_files(tmp_path, monkeypatch):
    """--skip-bad skips bad SGF files, never a write error (disk full): that one stops."""
    import errno

    from kosumi.distill import shards
    from kosumi.errors import WriteFailed

    games = write_sgfs(tmp_path / "games")

    def disk_full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shards, "atomic_write", disk_full)
    with pytest.raises(WriteFailed, match=r"cannot write .No space left on device"):
        import_sgf([games], tmp_path / "pos", skip_bad=True, shard_size=1)


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
