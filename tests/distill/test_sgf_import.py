"""SGF import into position shards (kosumi.distill.sgf_import): counts, sampling, rules, and
failures that store nothing.

Oracles are hand-written SGF files whose positions are counted and decoded by hand."""

from __future__ import annotations

import pytest
from helpers import write_sgfs

from kosumi.distill.positions import (
    PositionStore,
    PositionWriter,
    read_positions,
)
from kosumi.distill.sgf_import import import_sgf
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE


# ----------------------------------------------------------------------------- SGF import
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
