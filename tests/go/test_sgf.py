"""SGF reading and writing: hand-written records, round trips, malformed input, GNU Go as oracle."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from helpers import GNUGO, require_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE, vertex_to_point
from kosumi.go.sgf import GameRecord, load_game, parse_sgf, save_game, state_to_sgf


def v(vertex: str, size: int = 9) -> int:
    return vertex_to_point(vertex, size)


# ----------------------------------------------------------------------------- reading
def test_handicap_game():
    data = (b"(;GM[1]FF[4]SZ[9]KM[0.5]HA[2]AB[cc][gg]PB[Alice]PW[Bob]RE[W+3.5]"
            b";W[ee];B[dd];W[tt];B[])")
    rec = parse_sgf(data, "handicap.sgf")
    assert (rec.size, rec.komi, rec.handicap) == (9, 0.5, 2)
    assert (rec.black, rec.white, rec.result) == ("Alice", "Bob", "W+3.5")
    # SGF 'cc' is column c, third row from the top: C7 on 9x9; 'gg' is G3
    assert sorted(rec.setup) == sorted([(BLACK, v("C7")), (BLACK, v("G3"))])
    assert rec.moves == [(WHITE, v("E5")), (BLACK, v("D6")), (WHITE, PASS), (BLACK, PASS)]
    start = rec.to_state(0)
    assert start.to_move == WHITE  # after handicap stones White moves first
    final = rec.to_state()
    assert final.rows() == [
        ".........",
        ".........",
        "..X......",
        "...X.....",
        "....O....",
        ".........",
        "......X..",
        ".........",
        ".........",
    ]
    assert final.passes == 2 and final.is_game_over()
    assert rec.to_state(2).passes == 0 and len(rec.to_state(2).moves) == 2


def test_setup_stones_with_player_to_move():
    data = b"(;SZ[5]KM[7]AB[aa][ba]AW[ab][bb]PL[W];W[cc];B[ca])"
    rec = parse_sgf(data)
    assert rec.to_move == WHITE and rec.komi == 7.0 and rec.handicap == 0
    state = rec.to_state()
    assert state.rows() == ["XXX..", "OO...", "..O..", ".....", "....."]
    assert state.to_move == WHITE


def test_setup_both_colours_default_black_to_move():
    rec = parse_sgf(b"(;SZ[5]AB[aa]AW[ee])")
    assert rec.to_state().to_move == BLACK and rec.moves == [] and rec.komi == 0.0


def test_captures_and_ko_replayed():
    # the white stone at 'ba' (B5) on the top edge is captured by Black C5
    data = b"(;SZ[5];B[aa];W[ba];B[bb];W[ee];B[ca])"
    state = parse_sgf(data).to_state()
    assert state.rows()[0] == "X.X.."
    assert state.captures[BLACK] == 1


def test_load_game_from_file(tmp_path: Path):
    path = tmp_path / "g.sgf"
    path.write_bytes(b"(;FF[4]SZ[13]KM[6.5];B[dd];W[jj])")
    rec = load_game(path)
    assert rec.size == 13 and rec.komi == 6.5 and len(rec.moves) == 2
    assert rec.source == str(path)


# ----------------------------------------------------------------------------- malformed
@pytest.mark.parametrize(
    "data, needle",
    [
        (b"(;SZ[9];B[aa];W[bb];B[aa])", "move 3"),  # occupied
        (b"(;SZ[9];B[zz])", "move 1"),  # off board
        (b"(;SZ[25];B[aa])", "size 25"),  # unsupported size
        (b"(;SZ[1])", "size 1"),
        (b"(;SZ[9]", "malformed"),  # bad syntax
        (b"not an sgf at all", "malformed"),
        (b"(;SZ[nine])", "malformed"),
        (b"(;SZ[9]KM[abc])", "komi"),
        (b"(;SZ[9]AB[aa]AW[aa])", "AB and AW"),
        (b"(;SZ[9];B[aa];AB[bb])", "after the root"),
    ],
)
def test_malformed_inputs_name_the_file(data: bytes, needle: str):
    with pytest.raises(KosumiError) as info:
        parse_sgf(data, "bad.sgf")
    message = str(info.value)
    assert message.startswith("bad.sgf:")
    assert needle in message
    assert "\n" not in message


def test_illegal_ko_recapture_names_the_move():
    # a ko on 5x5: W B3 captures the black stone at C3; Black retakes at once (illegal)
    data = b"(;SZ[5];B[bb];W[cb];B[ac];W[dc];B[bd];W[cd];B[cc];W[bc];B[cc])"
    with pytest.raises(KosumiError, match=r"ko\.sgf: move 9 \(B C3\) is illegal.*ko"):
        parse_sgf(data, "ko.sgf")


def test_missing_file_is_a_kosumi_error(tmp_path: Path):
    with pytest.raises(KosumiError, match="cannot read"):
        load_game(tmp_path / "absent.sgf")


VALID = (b"(;GM[1]FF[4]CA[UTF-8]SZ[9]KM[7.5]HA[2]AB[cc][gg]PL[W]PB[a]PW[b]RE[B+R]"
         b";W[ee]C[hi];B[dd];W[ed];B[tt];W[fe](;B[gf])(;B[aa]))")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_sgf_raises_only_kosumi_error(data):
    raw = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        i = data.draw(st.integers(0, len(raw) - 1))
        byte = data.draw(st.sampled_from(list(b"()[];\\:abtzAEBWKMSZ019.-+ \n\xff")))
        if op == "replace":
            raw[i] = byte
        elif op == "delete" and len(raw) > 1:
            del raw[i]
        else:
            raw.insert(i, byte)
    try:
        rec = parse_sgf(bytes(raw), "fuzz.sgf")
    except KosumiError as e:
        assert str(e).startswith("fuzz.sgf:")
        return
    assert isinstance(rec, GameRecord)
    rec.to_state()  # a record that loads must replay


# ----------------------------------------------------------------------------- writing
def random_game(size: int, seed: int, moves: int) -> GameState:
    rng = random.Random(seed)
    state = GameState(size, komi=rng.choice([0.0, 5.5, 7.5, -3.0]))
    for _ in range(moves):
        legal = [int(p) for p in state.legal_mask().nonzero()[0]]
        p = PASS if (not legal or rng.random() < 0.05) else rng.choice(legal)
        state.play(p)
    return state


@pytest.mark.parametrize("size, seed", [(9, 1), (13, 2), (19, 3), (5, 4)])
def test_round_trip_random_game(tmp_path: Path, size: int, seed: int):
    state = random_game(size, seed, moves=size * size)
    path = save_game(tmp_path / "rt.sgf", state, result="W+12.5", black="me", white="you",
                     comments={0: "root comment", 3: "third move"})
    rec = load_game(path)
    assert (rec.size, rec.komi, rec.result, rec.black, rec.white) == (
        size, state.komi, "W+12.5", "me", "you")
    assert rec.moves == state.moves
    again = rec.to_state()
    assert again.rows() == state.rows()
    assert again.to_move == state.to_move
    assert [p.name for p in tmp_path.iterdir()] == ["rt.sgf"]  # no temporary file left


def test_round_trip_setup_and_white_first():
    state = GameState(9, 0.5)
    state.place_setup(BLACK, [v("C3"), v("G7"), v("E5")])
    assert state.to_move == WHITE
    state.play(v("D4"))
    state.play(PASS)
    text = state_to_sgf(state)
    assert b"HA[3]" in text and b"PL[" not in text
    rec = parse_sgf(text)
    assert rec.handicap == 3 and rec.to_state().rows() == state.rows()

    mixed = GameState(9, 7.5)
    mixed.place_setup(BLACK, [v("A1")])
    mixed.place_setup(WHITE, [v("J9")], to_move=WHITE)
    rec = parse_sgf(state_to_sgf(mixed))
    assert rec.to_move == WHITE
    restored = rec.to_state()
    assert restored.rows() == mixed.rows() and restored.to_move == WHITE


def test_save_replaces_existing_file(tmp_path: Path):
    path = tmp_path / "g.sgf"
    path.write_bytes(b"old")
    save_game(path, random_game(9, 5, 10), result="0")
    assert load_game(path).result == "0"


def test_unwritable_target_is_a_kosumi_error(tmp_path: Path):
    with pytest.raises(KosumiError, match="cannot write"):
        save_game(tmp_path / "missing-dir" / "g.sgf", GameState(9))


def _gnugo_stones(sgf_path: Path, gnugo: str) -> tuple[set[str], set[str]]:
    script = f"loadsgf {sgf_path}\nlist_stones black\nlist_stones white\nquit\n"
    out = subprocess.run([gnugo, "--mode", "gtp"], input=script, capture_output=True, check=False,
                         text=True, timeout=60).stdout
    replies = [block.strip() for block in out.split("\n\n") if block.strip()]
    assert replies[0].startswith("="), out
    black = set(replies[1].lstrip("= ").split())
    white = set(replies[2].lstrip("= ").split())
    return black, white


@pytest.mark.parametrize("size, seed", [(9, 11), (19, 12)])
def test_gnugo_reads_our_sgf_as_the_same_position(tmp_path: Path, size: int, seed: int):
    """GNU Go (an independent SGF reader) sees the same stones as kosumi after our SGF."""
    gnugo = require_program(GNUGO)
    state = random_game(size, seed, moves=size * size // 2)
    path = save_game(tmp_path / "g.sgf", state)
    black, white = _gnugo_stones(path, gnugo)
    rows = state.rows()
    cols = "ABCDEFGHJKLMNOPQRST"
    ours_b = {f"{cols[x]}{size - y}" for y, r in enumerate(rows) for x, c in enumerate(r)
              if c == "X"}
    ours_w = {f"{cols[x]}{size - y}" for y, r in enumerate(rows) for x, c in enumerate(r)
              if c == "O"}
    assert (black, white) == (ours_b, ours_w)
