"""kosumi.go.board_kernels: legal masks, chain liberties and area ownership over a raw board,
in C (the extension, kosumi.accel) and in Python, both checked.

Oracles: KataGo's own illegal points (the null policy entries of the reference file),
hand-checked positions, ``GameState.illegal_reason`` / ``GameState.chain_liberties`` (the
incremental rules code, independent of the kernels) and small set-based oracles (tests/helpers.py).
Every check runs on both implementations. KOSUMI_REQUIRE_REFERENCE=1 turns a missing ../shared
reference file into a failure (conftest).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import (
    board_diagram,
    oracle_area,
    oracle_chain_liberties,
    random_board_positions,
    random_legal_game,
    replay_reference,
    state_ko,
)

from kosumi.go import board_kernels
from kosumi.go.board import KO_SIMPLE, GameState, Rules
from kosumi.go.board_kernels import py_area_ownership, py_chain_liberties, py_legal_mask
from kosumi.go.coords import BLACK, PASS, WHITE, vertex_to_point

try:
    from kosumi import _speedups
except ImportError:  # reported by tests/test_accel.py
    _speedups = None

PY = SimpleNamespace(
    name="python",
    legal_mask=py_legal_mask,
    chain_liberties=py_chain_liberties,
    area_ownership=py_area_ownership,
)
C = _speedups and SimpleNamespace(
    name="c",
    legal_mask=_speedups.legal_mask,
    chain_liberties=_speedups.chain_liberties,
    area_ownership=_speedups.area_ownership,
)
IMPLS = [
    pytest.param(C, id="c",
                 marks=pytest.mark.skipif(C is None, reason="kosumi._speedups not built")),
    pytest.param(PY, id="python"),
]


def pt(size: int, x: int, y: int) -> int:
    return y * size + x


def illegal_points(mask: bytes) -> set[int]:
    return {p for p, v in enumerate(mask) if not v}


# ------------------------------------------------------------------------------------ legal_mask
@pytest.mark.parametrize("impl", IMPLS)
def test_legal_mask_matches_katago(impl, reference_positions):
    """The illegal points are exactly KataGo's (null policy entries), on all 300 positions."""
    assert len(reference_positions) == 300
    ko_checked = 0
    for r in reference_positions:
        s = replay_reference(r)
        n = s.size
        color = BLACK if r["to_move"] == "B" else WHITE
        assert s.to_move == color, r["id"]
        rows = ["".join(".XO"[s.board[y * n + x]] for x in range(n)) for y in range(n)]
        assert rows == r["board"]
        ko = state_ko(s, color)
        assert ko == (-1 if r["ko_ban"] is None else vertex_to_point(r["ko_ban"], n)), r["id"]
        ko_checked += ko >= 0
        katago_illegal = {i for i, v in enumerate(r["katago_raw_nn"]["policy"]) if v is None}
        mask = impl.legal_mask(s.board, n, color, ko, False)
        assert illegal_points(mask) == katago_illegal, r["id"]
    assert ko_checked >= 30  # the file has 35 positions with an active simple-ko ban


def test_gamestate_legal_mask_matches_katago(reference_positions):
    for r in reference_positions:
        s = replay_reference(r)
        katago_illegal = {i for i, v in enumerate(r["katago_raw_nn"]["policy"]) if v is None}
        mask = s.legal_mask()
        assert mask.dtype == np.bool_ and mask.shape == (s.size * s.size,)
        assert set(np.flatnonzero(~mask).tolist()) == katago_illegal, r["id"]


@pytest.mark.parametrize("impl", IMPLS)
def test_single_stone_suicide_never_legal(impl):
    n, b = board_diagram(". O . . .",
                   "O . . . .",
                   ". . . . .",
                   ". . . . .",
                   ". . . . .")
    for allowed in (False, True):
        assert impl.legal_mask(b, n, BLACK, -1, allowed)[0] == 0
        assert impl.legal_mask(b, n, WHITE, -1, allowed)[0] == 1  # own eye: fine
        assert illegal_points(impl.legal_mask(b, n, BLACK, -1, allowed)) == {0, 1, 5}


@pytest.mark.parametrize("impl", IMPLS)
def test_multi_stone_suicide(impl):
    # Black's chain of 5 has one liberty, B5 (point 1); Black there takes its own last liberty.
    n, b = board_diagram("X . X O .",
                   "X X X O .",
                   "O O O O .",
                   ". . . . .",
                   ". . . . .")
    assert impl.legal_mask(b, n, BLACK, -1, False)[1] == 0
    assert impl.legal_mask(b, n, BLACK, -1, True)[1] == 1
    assert impl.legal_mask(b, n, WHITE, -1, False)[1] == 1  # White captures the five stones
    assert impl.legal_mask(b, n, WHITE, -1, True)[1] == 1


@pytest.mark.parametrize("impl", IMPLS)
def test_capture_to_escape(impl):
    # A5 (point 0): Black's B5-B4 chain and White's A4 stone both have A5 as their only liberty.
    n, b = board_diagram(". X O . .",
                   "O X O . .",
                   "X O . . .",
                   ". . . . .",
                   ". . . . .")
    for allowed in (False, True):
        assert impl.legal_mask(b, n, BLACK, -1, allowed)[0] == 1  # captures A4
        assert impl.legal_mask(b, n, WHITE, -1, allowed)[0] == 1  # captures B5-B4
    # Give White's A4 stone a second liberty (remove Black's A3): Black's A5 no longer captures
    # and becomes a multi-stone suicide, legal only where suicide is.
    b[pt(n, 0, 2)] = 0
    assert impl.legal_mask(b, n, BLACK, -1, False)[0] == 0
    assert impl.legal_mask(b, n, BLACK, -1, True)[0] == 1
    assert impl.legal_mask(b, n, WHITE, -1, False)[0] == 1


@pytest.mark.parametrize("impl", IMPLS)
def test_ko_point(impl):
    s = GameState(5)
    s.place_setup(BLACK, [pt(5, 1, 0), pt(5, 0, 1), pt(5, 1, 2)], to_move=BLACK)
    s.place_setup(WHITE, [pt(5, 1, 1), pt(5, 2, 0), pt(5, 2, 2), pt(5, 3, 1)], to_move=BLACK)
    s.play(pt(5, 2, 1))  # Black captures the white stone at B4: a ko
    ko = pt(5, 1, 1)
    assert (s.ko, s.ko_color) == (ko, WHITE)
    assert s.illegal_reason(ko) == "ko"
    assert impl.legal_mask(s.board, 5, WHITE, ko, False)[ko] == 0
    assert impl.legal_mask(s.board, 5, WHITE, -1, False)[ko] == 1  # a capture, without the ban
    assert impl.legal_mask(s.board, 5, BLACK, -1, False)[ko] == 1  # Black fills its own eye
    assert not s.legal_mask()[ko]
    # the ban also applies to an otherwise legal point with liberties
    assert impl.legal_mask(s.board, 5, WHITE, pt(5, 4, 4), False)[pt(5, 4, 4)] == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_eyes_of_a_living_group(impl):
    n, b = board_diagram(". X . X O",
                   "X X X X O",
                   "O O O O O",
                   ". . . . .",
                   ". . . . .")
    for allowed in (False, True):
        white = impl.legal_mask(b, n, WHITE, -1, allowed)
        black = impl.legal_mask(b, n, BLACK, -1, allowed)
        assert white[0] == 0 and white[2] == 0  # single-stone suicide into either eye
        assert black[0] == 1 and black[2] == 1  # Black may fill one of its eyes
        assert black[15] == 1 and white[15] == 1


@pytest.mark.parametrize("impl", IMPLS)
def test_legal_mask_on_empty_and_full_boards(impl):
    for size in (2, 9, 19):
        assert impl.legal_mask(bytes(size * size), size, BLACK, -1, False) == b"\x01" * size**2
        assert impl.legal_mask(b"\x01" * size**2, size, WHITE, -1, True) == bytes(size * size)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("suicide", [False, True])
def test_legal_mask_matches_illegal_reason(impl, suicide):
    """Random games on every size: the mask agrees with GameState.illegal_reason (incremental
    chains and pseudo-liberties, no flood fill) for both colours."""
    rng = random.Random(11 + suicide)
    for i in range(36):
        size = 2 + i % 18
        s = random_legal_game(size, rng.randrange(0, 2 * size * size + 2), rng,
                              Rules(suicide=suicide))
        for color in (BLACK, WHITE):
            mask = impl.legal_mask(s.board, size, color, state_ko(s, color), suicide)
            expected = bytes(s.illegal_reason(p, color) is None for p in range(size * size))
            assert mask == expected, (size, color, str(s))


@pytest.mark.parametrize("rules", ["chinese", "tromp-taylor", "positional",
                                   Rules(ko=KO_SIMPLE, suicide=True)])
def test_gamestate_legal_mask_matches_illegal_reason(rules):
    """GameState.legal_mask (accel + positional superko in Python) stays exactly what
    illegal_reason says, for every rules variant."""
    rng = random.Random(5)
    for i in range(30):
        size = 2 + i % 12
        s = random_legal_game(size, rng.randrange(0, 2 * size * size + 2), rng, rules)
        for color in (BLACK, WHITE):
            expected = [s.illegal_reason(p, color) is None for p in range(size * size)]
            assert s.legal_mask(color).tolist() == expected, (size, color, str(s))


def test_superko_applies_to_multi_stone_suicide():
    """Tromp-Taylor rules: a multi-stone suicide that recreates an earlier position is illegal
    (superko), though legal under simple ko; the mask must keep saying so."""
    # setup:  . . . O     then Black A4, White pass, Black B4, White pass
    #         O O O O
    #         . . . .
    #         . . . .
    for rules, legal in (("tromp-taylor", False), (Rules(ko=KO_SIMPLE, suicide=True), True)):
        s = GameState(4, rules=rules)
        s.place_setup(WHITE, [3, 4, 5, 6, 7], to_move=BLACK)
        s.play(0)
        s.play(PASS)
        s.play(1)
        s.play(PASS)
        # Black at C4 kills its own three stones: the board is the setup position again
        assert s.illegal_reason(2) == (None if legal else "superko")
        assert bool(s.legal_mask()[2]) is legal
        expected = [s.illegal_reason(p) is None for p in range(16)]
        assert s.legal_mask().tolist() == expected


# ------------------------------------------------------------------------------- chain_liberties
@pytest.mark.parametrize("impl", IMPLS)
def test_chain_liberties_hand_checked(impl):
    n, b = board_diagram("X X . . .",
                   "X . . O .",
                   ". . O X O",
                   ". . . O .",
                   ". . . . X")
    libs = impl.chain_liberties(b, n)
    assert isinstance(libs, bytes) and len(libs) == 25
    assert libs[pt(n, 0, 0)] == libs[pt(n, 1, 0)] == libs[pt(n, 0, 1)] == 3  # B4 counted once
    assert libs[pt(n, 3, 2)] == 0  # surrounded (not a legal position, still counted)
    assert libs[pt(n, 3, 1)] == 3
    assert libs[pt(n, 2, 2)] == 3
    assert libs[pt(n, 4, 2)] == 2
    assert libs[pt(n, 3, 3)] == 3
    assert libs[pt(n, 4, 4)] == 2
    assert all(libs[p] == 0 for p in range(25) if b[p] == 0)
    # one stone in the middle of an empty 19x19 board; a long wall along the edge
    b = bytearray(361)
    b[pt(19, 9, 9)] = BLACK
    assert impl.chain_liberties(b, 19)[pt(19, 9, 9)] == 4
    b = bytearray(361)
    b[0:19] = b"\x02" * 19
    assert set(impl.chain_liberties(b, 19)[0:19]) == {19}


@pytest.mark.parametrize("impl", IMPLS)
def test_chain_liberties_matches_gamestate(impl):
    rng = random.Random(3)
    for i in range(36):
        size = 2 + i % 18
        s = random_legal_game(size, rng.randrange(0, 2 * size * size), rng)
        libs = impl.chain_liberties(s.board, size)
        want = [len(s.chain_liberties(p)) if s.board[p] else 0 for p in range(size**2)]
        assert want == list(libs)


# -------------------------------------------------------------------------------- area_ownership
@pytest.mark.parametrize("impl", IMPLS)
def test_area_ownership_hand_checked(impl):
    # the two-point region B2-C2 touches both colours: dame, neutral
    n, b = board_diagram("X X O . O",
                   ". X O O O",
                   "X X O . O",
                   "X . . O O",
                   "X X X O .")
    assert impl.area_ownership(b, n) == board_diagram("X X O O O",
                                                "X X O O O",
                                                "X X O O O",
                                                "X . . O O",
                                                "X X X O O")[1]
    # seki: Black's eight stones and White's C5 share their only liberties B5 and D5; those
    # stay neutral under Tromp-Taylor, the rest is White's
    n, b = board_diagram("X . O . X",
                   "X X X X X",
                   "O O O O O",
                   ". . . . .",
                   ". . . . .")
    assert impl.chain_liberties(b, n)[0] == impl.chain_liberties(b, n)[2] == 2
    assert impl.area_ownership(b, n) == board_diagram("X . O . X",
                                                "X X X X X",
                                                "O O O O O",
                                                "O O O O O",
                                                "O O O O O")[1]
    n, b = board_diagram("X X X . O O",
                   "X . X . O .",
                   "X X X . O O",
                   ". . . . . .",
                   "O O O O O O",
                   ". . . . . .")
    assert impl.area_ownership(b, n) == board_diagram("X X X . O O",
                                                "X X X . O O",
                                                "X X X . O O",
                                                ". . . . . .",
                                                "O O O O O O",
                                                "O O O O O O")[1]
    assert impl.area_ownership(bytes(81), 9) == bytes(81)  # empty board: all neutral
    b = bytearray(81)
    b[40] = WHITE
    assert impl.area_ownership(b, 9) == b"\x02" * 81


@pytest.mark.parametrize("impl", IMPLS)
def test_area_ownership_matches_oracle(impl):
    for size, board, _ in random_board_positions(60, seed=21):
        assert list(impl.area_ownership(board, size)) == oracle_area(board, size)


def test_gamestate_area_ownership_agrees():
    rng = random.Random(8)
    for i in range(20):
        size = 2 + i % 18
        s = random_legal_game(size, rng.randrange(0, 2 * size * size), rng)
        own = s.area_ownership()
        assert own.tolist() == list(board_kernels.area_ownership(s.board, size))
        assert own.tolist() == list(py_area_ownership(s.board, size))


# ------------------------------------------------------------------------------------ C == fallback
@pytest.mark.skipif(C is None, reason="kosumi._speedups not built")
def test_c_equals_fallback_on_random_board_positions():
    count = 0
    for size, board, ko in random_board_positions(300, seed=1234):
        for color in (BLACK, WHITE):
            for allowed in (False, True):
                assert C.legal_mask(board, size, color, ko, allowed) == PY.legal_mask(
                    board, size, color, ko, allowed), (size, board, color, ko, allowed)
        libs = C.chain_liberties(board, size)
        assert libs == PY.chain_liberties(board, size)
        assert list(libs) == oracle_chain_liberties(board, size)
        assert C.area_ownership(board, size) == PY.area_ownership(board, size)
        count += 1
    assert count == 300


# ------------------------------------------------------------------------------------ arguments
@pytest.mark.parametrize("impl", IMPLS)
def test_out_argument_and_buffer_types(impl):
    n, b = board_diagram("X X . O .",
                   "X . X O .",
                   ". X O . O",
                   ". . . O .",
                   ". . . . .")
    ref = {f: getattr(impl, f)(b, n) for f in ("chain_liberties", "area_ownership")}
    ref["legal_mask"] = impl.legal_mask(b, n, WHITE, -1, False)
    args = {"legal_mask": (WHITE, -1, False), "chain_liberties": (), "area_ownership": ()}
    for f, extra in args.items():
        fn = getattr(impl, f)
        for board in (bytes(b), bytearray(b), np.frombuffer(bytes(b), np.uint8).reshape(n, n),
                      np.frombuffer(bytes(b), np.int8), memoryview(bytes(b))):
            assert fn(board, n, *extra) == ref[f]
        for dtype in (np.uint8, np.int8, np.bool_):
            out = np.full(n * n, 7 if dtype != np.bool_ else True, dtype=dtype)
            assert fn(b, n, *extra, out=out) is out
            assert out.view(np.uint8).tobytes() == ref[f]
        out = bytearray(n * n)
        assert fn(b, n, *extra, out=out) is out and bytes(out) == ref[f]
        alias = bytearray(b)  # out may be the board itself
        assert fn(alias, n, *extra, out=alias) is alias and bytes(alias) == ref[f]
        names = ("color", "ko", "suicide_allowed")[: len(extra)]  # legal_mask's extras only
        assert fn(board=b, size=n, out=None, **dict(zip(names, extra, strict=True))) == ref[f]


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_arguments(impl):
    b = bytes(25)
    for size in (1, 20, 0, -3):
        with pytest.raises(ValueError):
            impl.legal_mask(bytes(max(size, 0) ** 2), size, BLACK, -1, False)
        with pytest.raises(ValueError):
            impl.chain_liberties(bytes(max(size, 0) ** 2), size)
        with pytest.raises(ValueError):
            impl.area_ownership(bytes(max(size, 0) ** 2), size)
    for f in ("chain_liberties", "area_ownership"):
        fn = getattr(impl, f)
        with pytest.raises(ValueError):
            fn(bytes(24), 5)  # wrong length
        with pytest.raises(ValueError):
            fn(np.zeros(25, np.int16), 5)  # two-byte items
        with pytest.raises(ValueError):
            fn(bytes(24) + b"\x03", 5)  # not a colour
        with pytest.raises(ValueError):
            fn(np.zeros((5, 10), np.uint8)[:, ::2], 5)  # not contiguous
        with pytest.raises(ValueError):
            fn(b, 5, out=bytes(25))  # read-only out
        with pytest.raises(ValueError):
            fn(b, 5, out=bytearray(26))
        with pytest.raises(TypeError):
            fn([0] * 25, 5)
    for color in (0, 3, -1):
        with pytest.raises(ValueError):
            impl.legal_mask(b, 5, color, -1, False)
    for ko in (-2, 25, 1000):
        with pytest.raises(ValueError):
            impl.legal_mask(b, 5, BLACK, ko, False)
    with pytest.raises(ValueError):
        impl.legal_mask(bytes(24) + b"\xff", 5, BLACK, -1, False)
