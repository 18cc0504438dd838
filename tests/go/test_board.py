"""Rules of Go on hand-checked positions and on KataGo's own boards and illegal points."""

import numpy as np
import pytest
from helpers import replay_reference

from kosumi.go.board import GameState, IllegalMove, Rules
from kosumi.go.coords import BLACK, PASS, WHITE, parse_color, vertex_to_point


def play(state, *moves):
    for m in moves:
        color, vertex = m.split()
        state.play(vertex_to_point(vertex, state.size), parse_color(color))
    return state


def v(vertex, size=9):
    return vertex_to_point(vertex, size)


def test_single_stone_capture_in_the_middle_and_prisoners():
    s = play(GameState(9), "B D5", "W E5", "B F5", "W A1", "B E6", "W A2", "B E4")
    assert s.board[v("E5")] == 0
    assert s.captures[BLACK] == 1
    assert s.rows()[4] == "...X.X..."


def test_corner_and_edge_captures():
    s = play(GameState(5), "B A2", "W A1", "B B1")  # corner stone has two liberties
    assert s.board[v("A1", 5)] == 0
    s = play(GameState(5), "B B3", "W C3", "B D3", "W C4", "B C2", "W A5", "B C5")
    # white C3-C4 chain: liberties gone at the top edge? C4 touches B4, D4: still free
    assert s.board[v("C3", 5)] == WHITE
    s = play(GameState(5), "B B1", "W C1", "B D1", "W E5", "B C2")  # edge capture
    assert s.board[v("C1", 5)] == 0 and s.captures[BLACK] == 1


def test_suicide_is_illegal_and_optionally_legal_for_several_stones():
    s = GameState.from_rows([". X . . .", "X . . . .", ". . . . .", ". . . . .", ". . . . ."],
                            to_move=WHITE)
    with pytest.raises(IllegalMove, match="suicide"):
        s.play(v("A5", 5))
    # multi-stone suicide: white A5-B5 would have no liberty after W A4 fills the last one
    rows = ["O . X . .", "O X . . .", "X . . . .", ". . . . .", ". . . . ."]
    strict = GameState.from_rows(rows, to_move=WHITE)
    assert strict.illegal_reason(v("B5", 5)) == "suicide"
    loose = GameState.from_rows(rows, to_move=WHITE, rules=Rules(suicide=True))
    loose.play(v("B5", 5))
    assert [loose.board[v(x, 5)] for x in ("A5", "A4", "B5")] == [0, 0, 0]
    # single-stone suicide stays illegal even when suicide is allowed
    single = GameState.from_rows([". X . . .", "X . . . .", ". . . . .", ". . . . .",
                                  ". . . . ."], to_move=WHITE, rules=Rules(suicide=True))
    assert single.illegal_reason(v("A5", 5)) == "suicide"


def test_capturing_is_not_suicide():
    s = GameState.from_rows([". O X . .", "O X . . .", "X . . . .", ". . . . .", ". . . . ."],
                            to_move=WHITE)
    # white A5 has no liberty but captures black B5? no: B5 is white here; check the eye capture
    s = GameState.from_rows([". X O . .", "X O . . .", "O . . . .", ". . . . .", ". . . . ."],
                            to_move=WHITE)
    s.play(v("A5", 5))  # captures black A4 and B5 (one liberty each: A5)
    assert s.board[v("A4", 5)] == 0 and s.board[v("B5", 5)] == 0


def test_simple_ko_ban_and_its_release():
    rows = [". . . . .", ". X O . .", "X O . O .", ". X O . .", ". . . . ."]
    s = GameState.from_rows(rows, to_move=BLACK)
    s.play(v("C3", 5))  # black captures B3
    assert s.board[v("B3", 5)] == 0
    assert s.ko == v("B3", 5) and s.ko_color == WHITE
    assert s.illegal_reason(v("B3", 5)) == "ko"
    assert not s.legal_mask()[v("B3", 5)]
    s.play(v("E1", 5))  # ko threat elsewhere
    s.play(v("E2", 5))
    s.play(v("B3", 5))  # white may retake now
    assert s.board[v("C3", 5)] == 0


def test_snapback():
    rows = [". . . . .", ". . . . .", "O O O O .", "O X X X O", "O X . . O"]
    s = GameState.from_rows(rows, to_move=WHITE)
    s.play(v("C1", 5))  # throw-in: black is now in atari
    s.play(v("D1", 5))  # black captures one stone ...
    assert s.board[v("C1", 5)] == 0 and s.captures[BLACK] == 1
    assert s.ko == -1  # not a ko: the capturing group has more than one stone
    s.play(v("C1", 5))  # ... and white takes back five
    assert s.captures[WHITE] == 5
    assert s.rows()[3:] == ["O...O", "O.O.O"]


def test_positional_superko_forbids_what_simple_ko_allows():
    moves = ["B B3", "W A2", "B C2", "W B2", "B A3", "W C3"]  # W C3 captures two stones
    simple = play(GameState(3, 0, "chinese"), *moves)
    assert simple.is_legal(v("B3", 3))  # recapturing one stone restores the board after move 4
    positional = play(GameState(3, 0, "positional"), *moves)
    assert positional.illegal_reason(v("B3", 3)) == "superko"
    assert not positional.legal_mask()[v("B3", 3)]
    with pytest.raises(IllegalMove):
        positional.play(v("B3", 3))


def test_two_passes_end_the_game_and_undo():
    s = play(GameState(9), "B E5", "W pass")
    assert not s.is_game_over()
    s.play(PASS)
    assert s.is_game_over()
    s.undo()
    assert not s.is_game_over() and s.to_move == BLACK and s.board[v("E5")] == BLACK
    s.undo()
    s.undo()
    assert s.moves == [] and sum(s.board) == 0


def test_area_scoring_dame_and_shared_liberties():
    rows = [". X . O .", ". X . O .", ". X . O .", ". X . O .", ". X . O ."]
    s = GameState.from_rows(rows, komi=0.5)
    assert s.area_score() == -0.5  # 10 - 10: the middle column touches both colours
    rows = ["X X O . O", "X . O O O", "X X O O O", "X X X O O", ". X O O O"]
    s = GameState.from_rows(rows, komi=0)
    # hand-counted: black 9 stones + A1 = 10 (B4 also touches white C4: a shared liberty,
    # neutral as in seki); white 13 stones + D5 = 14
    assert s.area_score() == 10 - 14
    # marking C5 dead removes its whole chain (all 13 white stones): every point is black's
    assert s.area_score(dead=[v("C5", 5)]) == 25


def test_handicap_setup_gives_white_the_move():
    s = GameState(9)
    s.place_setup(BLACK, [v("C3"), v("G7")])
    assert s.to_move == WHITE
    s.play(v("E5"))
    s.undo()
    assert s.to_move == WHITE and s.board[v("C3")] == BLACK


def test_copy_is_independent():
    s = play(GameState(9), "B E5", "W E6")
    t = s.copy()
    t.play(v("D6"))
    assert s.board[v("D6")] == 0 and len(s.moves) == 2 and len(t.moves) == 3


def test_boards_ko_bans_and_illegal_points_match_katago(reference_positions):
    for rec in reference_positions:
        n = rec["board_size"]
        s = replay_reference(rec)
        assert s.rows() == rec["board"], rec["id"]
        assert s.to_move == parse_color(rec["to_move"])
        ko = rec.get("ko_ban")
        if ko:
            assert s.ko == vertex_to_point(ko, n) and s.ko_color == s.to_move, rec["id"]
        else:
            assert s.ko == -1 or s.ko_color != s.to_move, rec["id"]
        illegal = np.array([p is None for p in rec["katago_raw_nn"]["policy"]])
        np.testing.assert_array_equal(~s.legal_mask(), illegal, err_msg=rec["id"])


def _recount(history: list[tuple[tuple[str, ...], int]]) -> int:
    """Earlier entries equal to the last one (diagram and side to move)."""
    return sum(1 for h in history[:-1] if h == history[-1])


def test_repetitions_triple_ko_and_random_games():
    """A hand-built triple ko on 9x9 brings the same position back every 6 moves; on random
    5x5 games with many captures, ``repetitions()`` agrees with a recount of diagrams."""
    black = ["B1", "A2", "B3", "G1", "F2", "G3", "B6", "A7", "B8", "H2", "pass",
             *["C2", "C7", "H2"] * 3]
    white = ["C1", "D2", "C3", "H1", "J2", "H3", "C6", "D7", "C8", "B2", "B7",
             *["G2", "B2", "B7"] * 3]
    s = GameState(9, 7.0)
    counts = []
    for b, w in zip(black, white, strict=True):
        for v in (b, w):
            s.play(vertex_to_point(v, 9))
            counts.append(s.repetitions())
    assert counts[:27] == [0] * 27  # setup (22 moves), then the first 5 moves of the cycle
    assert counts[27:] == [1] * 6 + [2] * 6 + [3]
    rng = np.random.default_rng(7)
    for _ in range(20):
        s = GameState(5, 0.5)
        history = [(tuple(s.rows()), s.to_move)]
        for _ in range(120):
            legal = np.flatnonzero(s.legal_mask())
            p = int(rng.choice(legal)) if len(legal) and rng.random() > 0.1 else PASS
            s.play(p)
            history.append((tuple(s.rows()), s.to_move))
            assert s.repetitions() == _recount(history)


def test_positional_superko_bans_a_quiet_move_that_repeats_a_position():
    """White A5 captures B5-C5, Black B5 recaptures A5, White passes: Black C5 captures
    nothing, yet it would recreate the first position, so positional superko forbids it."""
    rows = [".XXO.", "XOO..", ".....", ".....", "....."]
    for rules, banned in (("positional", True), ("chinese", False)):
        s = GameState.from_rows(rows, to_move=WHITE, rules=rules)
        for v in ("A5", "B5", "pass"):
            s.play(vertex_to_point(v, 5) if v != "pass" else PASS)
        c5 = vertex_to_point("C5", 5)
        assert (s.illegal_reason(c5) == "superko") is banned
        assert bool(s.legal_mask()[c5]) is not banned


def test_multi_stone_suicide_touching_one_chain_twice_is_legal_under_tromp_taylor():
    """A5 touches Black's chain B5-B4-A4 twice and fills its last liberty: a 4-stone suicide,
    legal under Tromp-Taylor rules, which removes the chain."""
    s = GameState.from_rows([".XO..", "XXO..", "OO...", ".....", "....."],
                            rules="tromp-taylor")
    a5 = vertex_to_point("A5", 5)
    assert s.illegal_reason(a5) is None and s.legal_mask()[a5]
    s.play(a5)
    assert s.rows()[:3] == ["..O..", "..O..", "OO..."]
