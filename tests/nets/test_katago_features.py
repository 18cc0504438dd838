"""KataGo's V7 input features (kosumi.nets.katago_features) on hand-made positions.

Agreement with the real KataGo through the network's outputs is in test_katago.py."""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.go.board import GameState, Rules
from kosumi.go.coords import BLACK, PASS, WHITE, parse_color, vertex_to_point
from kosumi.nets.features import get_feature_set
from kosumi.nets.katago_features import (
    KataGoV7,
    encode_v7,
    ko_after,
    komi_wave,
    pass_status,
)


def play(moves: str, size: int = 19, komi: float = 7.5, rules: Rules | str = "chinese"
         ) -> GameState:
    """'B D4 W Q16 B pass' -> the position."""
    s = GameState(size, komi, rules)
    toks = moves.split()
    for color, vertex in zip(toks[::2], toks[1::2], strict=True):
        s.play(vertex_to_point(vertex, size), parse_color(color))
    return s


def feats(s: GameState, **kw) -> tuple[np.ndarray, np.ndarray]:
    planes, glob = encode_v7([s], **kw)
    return planes[0].reshape(22, -1), glob[0]


def marked(plane: np.ndarray, size: int = 19) -> set[int]:
    return set(np.flatnonzero(plane).tolist())


def v(vertex: str, size: int = 19) -> int:
    return vertex_to_point(vertex, size)


def test_registered_and_shapes():
    fs = get_feature_set("katago_v7")
    assert (fs.num_planes, fs.num_globals) == (22, 19)
    states = [GameState(9, 7.0), play("B E5", 9, 7.0)]
    planes, glob = KataGoV7().encode(states)
    assert planes.shape == (2, 22, 9, 9) and planes.dtype == np.float32
    assert glob.shape == (2, 19) and glob.dtype == np.float32


def test_empty_board_black_to_move():
    p, g = feats(GameState(19, 7.5))
    assert (p[0] == 1).all()
    assert not p[1:].any()
    assert g[5] == pytest.approx(-7.5 / 20)  # komi from Black's view
    assert g[18] == pytest.approx(-0.5)
    assert not np.delete(g, [5, 18]).any()


def test_komi_and_parity_wave():
    _, g = feats(play("B D4"))  # White to move
    assert g[5] == pytest.approx(7.5 / 20)
    assert g[18] == pytest.approx(0.5)
    # N*N odd: draws at odd komi; even: at even komi. Triangle wave with period 2.
    assert komi_wave(7.0, 9) == pytest.approx(0.0)
    assert komi_wave(7.5, 9) == pytest.approx(0.5)
    assert komi_wave(8.0, 9) == pytest.approx(0.0)
    assert komi_wave(8.5, 9) == pytest.approx(-0.5)
    assert komi_wave(6.0, 8) == pytest.approx(0.0)
    assert komi_wave(6.5, 8) == pytest.approx(0.5)
    # komi is clipped to +-(N*N + 20)
    _, g = feats(GameState(9, 500.0))
    assert g[5] == pytest.approx(-(81 + 20) / 20)


def test_stones_and_liberties():
    s = play("B D4 W D5 B Q16 W Q17 B R17 W K10 B A1 W B1")
    p, _ = feats(s)  # Black to move
    assert marked(p[2]) == {v("D5"), v("Q17"), v("K10"), v("B1")}
    assert marked(p[1]) == {v("D4"), v("Q16"), v("R17"), v("A1")}
    assert marked(p[3]) == {v("A1")}  # A1: B1 white, A2 the last liberty
    # Q17: Q18, P17 empty, R17 and Q16 black -> 2 liberties; B1 has A1? no: C1, B2 -> 2
    assert marked(p[4]) == {v("Q17"), v("B1")}
    # exactly three: D4 (C4 D3 E4), D5, Q16 (P16 R16 Q15), R17 (R18 R16 S17)
    assert marked(p[5]) == {v("D4"), v("D5"), v("Q16"), v("R17")}
    assert v("K10") not in marked(p[3]) | marked(p[4]) | marked(p[5])  # four liberties


def test_last_moves_and_pass_flags():
    s = play("B D4 W Q16 B pass W C3")  # Black to move
    p, g = feats(s)
    assert marked(p[9]) == {v("C3")}  # the opponent's last move
    assert not p[10].any() and g[1] == 1.0  # our pass before it
    assert marked(p[11]) == {v("Q16")}
    assert marked(p[12]) == {v("D4")}
    assert not p[13].any() and not g[4]
    assert g[[0, 2, 3]].tolist() == [0.0, 0.0, 0.0]
    assert g[14] == 0.0


def test_history_hidden_after_a_single_pass():
    s = play("B D4 W Q16 B C3 W pass")  # a black pass now would end the game
    p, g = feats(s)
    assert not p[9:14].any() and not g[0:5].any()
    assert g[14] == 0.0
    # KataGo's friendlyPassOk off (its tromp-taylor preset): the history and the flag show
    p, g = feats(s, friendly_pass_ok=False)
    assert g[0] == 1.0 and marked(p[10]) == {v("C3")} and g[14] == 1.0
    # kosumi's tromp-taylor rules default to that
    tt = play("B D4 W Q16 B C3 W pass", rules="tromp-taylor")
    _, g = feats(tt)
    assert g[0] == 1.0 and g[14] == 1.0 and g[6] == 1.0 and g[7] == 0.5 and g[8] == 1.0
    # after a move follows the pass, the history (the pass included) is back
    s = play("B D4 W Q16 B C3 W pass B R3")
    p, g = feats(s)
    assert marked(p[9]) == {v("R3")} and g[1] == 1.0 and marked(p[11]) == {v("C3")}


def test_game_over_shows_one_move():
    s = play("B D4 W pass B pass")
    assert pass_status(s) == (1, True)
    p, g = feats(s)
    assert g[0] == 1.0 and not g[1:5].any() and g[14] == 1.0
    assert not p[9:14].any()  # only the last move (a pass) is shown


def test_repeated_pass_ends_the_game_under_simple_ko():
    """Black passed once in this very position: a second pass by Black ends the game."""
    s = play("B D4 W Q16")
    s.play(PASS, BLACK)
    s.play(v("C3"), WHITE)
    # make the stones repeat: take White's C3 off by hand, as a capture would (synthetic)
    s.board[v("C3")] = 0
    s.boards[-1] = bytes(s.board)
    assert s.boards[-1] == s.boards[2] and s.to_move == BLACK
    assert pass_status(s) == (5, True)
    _, g = feats(s)
    assert g[14] == 1.0
    # positional superko has no such rule
    s.rules = Rules.named("positional")
    assert pass_status(s) == (5, False)


# A ko on the lower edge: black D2 captures white C2; White may not retake at once.
KO_ROWS = ["........."] * 6 + ["..XO.....", ".XO.O....", "..XO....."]


def test_ko_plane_simple_and_positional():
    s = GameState.from_rows(KO_ROWS, to_move=BLACK)
    s.play(v("D2", 9))
    assert (s.ko, s.ko_color) == (v("C2", 9), WHITE)
    assert ko_after(s, len(s.moves)) == v("C2", 9)
    p, g = feats(s)
    assert marked(p[6]) == {v("C2", 9)}
    assert g[6] == 0.0 and g[7] == 0.0  # simple ko
    # the ko is the opponent's problem after White moves elsewhere... and ko_after knows the
    # history: one move later the ban is gone, the board one move ago still had it
    s.play(v("J9", 9))
    assert ko_after(s, len(s.moves)) == -1 and ko_after(s, len(s.moves) - 1) == v("C2", 9)
    assert not feats(s)[0][6].any()

    # positional superko: after two passes the simple ko is gone, but retaking would repeat
    # the position before black's capture -- banned, and marked
    s = GameState.from_rows(KO_ROWS, to_move=BLACK, rules="positional")
    s.play(v("D2", 9))
    s.play(PASS)
    s.play(PASS)
    assert s.ko == -1 and s.illegal_reason(v("C2", 9)) == "superko"
    p, g = feats(s)
    assert marked(p[6]) == {v("C2", 9)}
    assert g[6] == 1.0 and g[7] == 0.5 and g[8] == 0.0
    # under simple ko the same point is legal and unmarked
    s.rules = Rules.named("chinese")
    assert not feats(s)[0][6].any()


LADDER = "B C16 W D16 B D17 W Q16 B E17"


def test_ladder_planes_now_and_before():
    p, _ = feats(play(LADDER + " W C4"))  # Black to move; D15 ladders white D16
    assert marked(p[14]) == {v("D16")}
    assert marked(p[17]) == {v("D15")}
    assert marked(p[15]) == {v("D16")}  # before W C4: the same
    assert marked(p[16]) == set()  # before B E17, white escapes through E16-E17
    p, _ = feats(play(LADDER + " W Q4"))  # the breaker ends the ladder...
    assert not p[14].any() and not p[17].any()
    assert marked(p[15]) == {v("D16")}  # ... which worked on the board before it
    p, _ = feats(play(LADDER + " W C4 B D15"))  # White to move, D16 in atari and still caught
    assert marked(p[14]) == {v("D16")}
    assert marked(p[15]) == {v("D16")} and marked(p[16]) == {v("D16")}
    assert not p[17].any()  # no black chain to ladder


def test_ladder_history_planes_follow_hidden_history():
    # after a single pass the net sees no history: planes 15/16 repeat the current board
    s = play(LADDER + " W pass")  # Black to move: D16 laddered now, not before B E17
    p, _ = feats(s)
    assert marked(p[14]) == {v("D16")}
    assert marked(p[15]) == {v("D16")} and marked(p[16]) == {v("D16")}  # the current board
    p, _ = feats(s, friendly_pass_ok=False)  # history shown: the real boards 1 and 2 moves ago
    assert marked(p[15]) == {v("D16")} and marked(p[16]) == set()


TWO_EYES = [
    ".X.XO....",
    "XXXXO....",
    "OOOOO....",
] + ["........."] * 6


def test_area_planes():
    s = GameState.from_rows(TWO_EYES, to_move=WHITE)
    p, _ = feats(s)
    black = {v(x, 9) for x in ("A9", "B9", "C9", "D9", "A8", "B8", "C8", "D8")}
    assert marked(p[19]) == black  # opponent (Black) area
    assert marked(p[18]) == set(range(81)) - black  # White's: stones + the region it borders
    # multi-stone suicide legal rules compute the same here (the eyes are empty)
    s.rules = Rules.named("tromp-taylor")
    p2, g = feats(s)
    assert np.array_equal(p2[18], p[18]) and g[8] == 1.0
