"""Feature sets: hand-built positions whose planes are known by hand, plus properties checked
against independent oracles (GameState.chain_liberties, the board bytes, per-state encoding)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE, vertex_to_point
from kosumi.nets.features import FEATURE_SETS, batch_board_size, get_feature_set

BASIC = get_feature_set("basic")
LZ18 = get_feature_set("lz18")


def play(size: int, moves: str, komi: float = 7.5) -> GameState:
    """Alternate moves from the empty board: "B5 C5 pass ..." (Black first)."""
    s = GameState(size, komi)
    for v in moves.split():
        s.play(vertex_to_point(v, size))
    return s


def points(plane: np.ndarray) -> set[int]:
    """The set of flat indices where a [N, N] plane is 1 (and check it is 0/1 only)."""
    flat = plane.reshape(-1)
    assert set(np.unique(flat)) <= {0.0, 1.0}
    return set(np.flatnonzero(flat).tolist())


def random_state(size: int, num_moves: int, seed: int, pass_prob: float = 0.03) -> GameState:
    rng = random.Random(seed)
    s = GameState(size, 7.5)
    for _ in range(num_moves):
        legal = np.flatnonzero(s.legal_mask()).tolist()
        if not legal or rng.random() < pass_prob:
            if s.passes >= 1:
                continue
            s.play(PASS)
        else:
            s.play(rng.choice(legal))
    return s


def test_registry():
    assert {"basic", "lz18"} <= set(FEATURE_SETS)
    assert (BASIC.num_planes, BASIC.num_globals) == (11, 4)
    assert (LZ18.num_planes, LZ18.num_globals) == (18, 0)
    with pytest.raises(KosumiError, match="unknown feature set 'nope'"):
        get_feature_set("nope")
    with pytest.raises(ValueError, match="one board size"):
        batch_board_size([GameState(9), GameState(19)])


# ----------------------------------------------------------------------------- basic, by hand
# 5x5 flat indices (top-left row-major): A5=0 B5=1 C5=2 D5=3 E5=4 / A4=5 B4=6 C4=7 D4=8 E4=9 /
# A3=10 B3=11 C3=12 D3=13 E3=14 / A2..E2=15..19 / A1..E1=20..24
KO_GAME = "B5 C5 A4 D4 B3 C3 E1 B4 C4"  # Black's C4 (move 9) takes White's B4: a simple ko
#   A B C D E
# 5 . X O . .
# 4 X . X O .      White to move, may not retake at B4 (6)
# 3 . X O . .
# 2 . . . . .
# 1 . . . . X


def test_basic_ko_position_by_hand():
    s = play(5, KO_GAME, komi=7.5)
    assert s.to_move == WHITE
    planes, glob = BASIC.encode([s])
    assert planes.shape == (1, 11, 5, 5) and planes.dtype == np.float32
    assert glob.shape == (1, 4) and glob.dtype == np.float32
    p = planes[0]
    assert points(p[0]) == set(range(25))  # on board
    assert points(p[1]) == {2, 8, 12}  # White's stones (side to move)
    assert points(p[2]) == {1, 5, 7, 11, 24}  # Black's stones
    # liberties by hand: C4 {B4}, C5 {D5}; B5 {A5,B4}, E1 {D1,E2}, C3 {D3,C2};
    # A4 {A5,B4,A3}, B3 {B4,A3,B2}, D4 {D5,E4,D3}
    assert points(p[3]) == {7, 2}
    assert points(p[4]) == {1, 24, 12}
    assert points(p[5]) == {5, 11, 8}
    assert points(p[6]) == {6}  # the ko point B4, banned for White
    assert points(p[7]) == {7}  # last move C4
    assert points(p[8]) == {6}  # White's B4 (since captured: the point is still marked)
    assert points(p[9]) == {24}  # E1
    assert points(p[10]) == {12}  # C3
    np.testing.assert_allclose(glob[0], [0.0, 1.0, 7.5 / 15, 0.0])


def test_basic_ko_plane_only_for_the_banned_player_and_pass_flags():
    s = play(5, KO_GAME + " pass")  # White passes: the ko ban is lifted, Black to move
    planes, glob = BASIC.encode([s])
    p = planes[0]
    assert points(p[6]) == set()
    assert points(p[7]) == set()  # the last move was a pass
    assert points(p[8]) == {7} and points(p[9]) == {6} and points(p[10]) == {24}
    np.testing.assert_allclose(glob[0], [1.0, 0.0, -7.5 / 15, 1.0])
    assert points(p[1]) == {1, 5, 7, 11, 24}  # Black is now the side to move


def test_basic_shared_liberty_counts_once():
    # An L-shaped white chain B4-C4-C3 (a point touching two of its stones counts once):
    #   A B C D E
    # 5 X X X . .
    # 4 X O O X .
    # 3 . . O X .
    # 2 . . X . .
    s = GameState(5)
    black = [vertex_to_point(v, 5) for v in ["A5", "B5", "C5", "A4", "D4", "D3", "C2"]]
    white = [vertex_to_point(v, 5) for v in ["B4", "C4", "C3"]]
    s.place_setup(BLACK, black)
    s.place_setup(WHITE, white, to_move=BLACK)
    # White chain: B4 -> B3; C4 -> none; C3 -> B3, (D3 black), (C2 black): distinct {B3} = 1,
    # though its pseudo-liberties are B3 twice.
    planes, _ = BASIC.encode([s])
    p = planes[0]
    assert points(p[3]) & set(white) == set(white)
    # Black: A5-B5-C5-A4 chain: libs D5, A3 -> 2; D4-D3 chain: E4, E3, D5 -> 3 ; C2: B2, D2, C1 -> 3
    chain_a = {vertex_to_point(v, 5) for v in ["A5", "B5", "C5", "A4"]}
    assert points(p[4]) == chain_a
    assert points(p[5]) == {vertex_to_point(v, 5) for v in ["D4", "D3", "C2"]}


# ----------------------------------------------------------------------------- lz18, by hand
def test_lz18_history_planes_by_hand():
    # B B5 (1), W A5 (0), B A4 (5) captures A5: White to move after 3 moves
    s = play(5, "B5 A5 A4")
    assert s.to_move == WHITE
    planes, glob = LZ18.encode([s])
    assert glob is None and planes.shape == (1, 18, 5, 5)
    p = planes[0]
    own = [points(p[i]) for i in range(8)]  # White's stones at T=0..-7
    opp = [points(p[8 + i]) for i in range(8)]  # Black's
    assert own == [set(), {0}, set(), set(), set(), set(), set(), set()]
    assert opp == [{1, 5}, {1}, {1}, set(), set(), set(), set(), set()]
    assert points(p[16]) == set() and points(p[17]) == set(range(25))


def test_lz18_keeps_only_eight_boards_and_pass_repeats_the_board():
    s = play(5, "A5 A1 C5 C1 E5 E1 A3 C3 pass E3")  # 10 moves, no capture, Black to move
    assert s.to_move == BLACK
    p = LZ18.encode([s])[0][0]
    black_after = {  # Black's / White's stones after k moves; boards after 0..2 moves drop out
        10: {0, 2, 4, 10}, 9: {0, 2, 4, 10}, 8: {0, 2, 4, 10}, 7: {0, 2, 4, 10}, 6: {0, 2, 4},
        5: {0, 2, 4}, 4: {0, 2}, 3: {0, 2},
    }
    white_after = {10: {20, 22, 24, 12, 14}, 9: {20, 22, 24, 12}, 8: {20, 22, 24, 12},
                   7: {20, 22, 24}, 6: {20, 22, 24}, 5: {20, 22}, 4: {20, 22}, 3: {20}}
    for t in range(8):
        assert points(p[t]) == black_after[10 - t], t
        assert points(p[8 + t]) == white_after[10 - t], t
    assert points(p[16]) == set(range(25)) and points(p[17]) == set()


def test_lz18_empty_board():
    p = LZ18.encode([GameState(19)])[0][0]
    assert p[:16].sum() == 0 and p[16].sum() == 361 and p[17].sum() == 0


# ----------------------------------------------------------------------------- properties
def _same_stones_other_side(s: GameState) -> tuple[GameState, GameState]:
    """The same stones (as setup stones, no history) with Black and with White to move."""
    black = [i for i, c in enumerate(s.board) if c == BLACK]
    white = [i for i, c in enumerate(s.board) if c == WHITE]
    out = []
    for to_move in (BLACK, WHITE):
        t = GameState(s.size, s.komi)
        if black:
            t.place_setup(BLACK, black)
        if white:
            t.place_setup(WHITE, white, to_move=to_move)
        t.to_move = to_move
        out.append(t)
    return out[0], out[1]


@pytest.mark.parametrize("size,seed", [(5, 1), (9, 2), (19, 3)])
def test_perspective_swap(size, seed):
    s = random_state(size, size * size // 2, seed)
    sb, sw = _same_stones_other_side(s)
    (pb, gb), (pw, gw) = BASIC.encode([sb]), BASIC.encode([sw])
    np.testing.assert_array_equal(pb[0, 1], pw[0, 2])
    np.testing.assert_array_equal(pb[0, 2], pw[0, 1])
    np.testing.assert_array_equal(pb[0, [0, 3, 4, 5]], pw[0, [0, 3, 4, 5]])
    np.testing.assert_allclose(gb[0], [1, 0, -s.komi / 15, 0])
    np.testing.assert_allclose(gw[0], [0, 1, s.komi / 15, 0])
    lb, lw = LZ18.encode([sb])[0][0], LZ18.encode([sw])[0][0]
    np.testing.assert_array_equal(lb[0], lw[8])
    np.testing.assert_array_equal(lb[8], lw[0])
    np.testing.assert_array_equal(lb[16], lw[17])
    np.testing.assert_array_equal(lb[17], lw[16])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.sampled_from([2, 3, 5, 7, 9, 13, 19]), moves=st.integers(0, 200),
       seed=st.integers(0, 10**6))
def test_basic_matches_board_oracles(size, moves, seed):
    s = random_state(size, min(moves, size * size * 2), seed)
    p = BASIC.encode([s])[0][0].reshape(11, -1)
    board = np.frombuffer(bytes(s.board), np.uint8)
    me, opp = s.to_move, 3 - s.to_move
    np.testing.assert_array_equal(p[1], board == me)
    np.testing.assert_array_equal(p[2], board == opp)
    libs = np.zeros(size * size, int)
    for q in np.flatnonzero(board):
        libs[q] = len(s.chain_liberties(int(q)))  # board.py's set-based walk
    np.testing.assert_array_equal(p[3], libs == 1)
    np.testing.assert_array_equal(p[4], libs == 2)
    np.testing.assert_array_equal(p[5], libs >= 3)
    ko = np.zeros(size * size)
    if s.ko >= 0 and s.ko_color == s.to_move:
        ko[s.ko] = 1
    np.testing.assert_array_equal(p[6], ko)
    # lz18 plane 0/8 = the current board
    lz = LZ18.encode([s])[0][0].reshape(18, -1)
    np.testing.assert_array_equal(lz[0], board == me)
    np.testing.assert_array_equal(lz[8], board == opp)


@pytest.mark.parametrize("name", ["basic", "lz18"])
def test_batch_equals_single(name):
    fs = get_feature_set(name)
    states = [random_state(9, m, m) for m in (0, 3, 20, 45, 70, 90)]
    planes, glob = fs.encode(states)
    for i, s in enumerate(states):
        p1, g1 = fs.encode([s])
        np.testing.assert_array_equal(planes[i], p1[0])
        if glob is not None:
            np.testing.assert_array_equal(glob[i], g1[0])


@pytest.mark.parametrize("features", ["basic", "lz18", "katago_v7"])
def test_every_input_plane_has_a_name(features):
    from kosumi.nets.features import get_feature_set

    fs = get_feature_set(features)
    assert len(fs.plane_names) == fs.num_planes and len(set(fs.plane_names)) == fs.num_planes
    assert len(fs.global_names) == fs.num_globals
