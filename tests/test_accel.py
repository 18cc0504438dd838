"""kosumi.accel: the C extension (kosumi._speedups) and its numpy/Python fallbacks.

Oracles: KataGo's own illegal points (the null policy entries of the reference file),
hand-checked positions, ``GameState.illegal_reason`` / ``GameState.chain_liberties`` (the
incremental rules code, independent of accel) and small set-based oracles written here (the
search's own rules and their C versions are tested in tests/engine/test_puct.py). Every check
runs on both implementations. Environment: KOSUMI_REQUIRE_REFERENCE=1 turns a missing ../shared
reference file into a failure (conftest); KOSUMI_ALLOW_PURE_PYTHON=1 accepts a machine where the
C extension could not be built; KOSUMI_NO_SPEEDUPS=1 makes kosumi.accel (and so GameState /
MCTS) use the fallbacks.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import ROOT, oracle_area, oracle_chain_liberties, replay_reference

from kosumi import accel
from kosumi.go.board import KO_SIMPLE, GameState, Rules
from kosumi.go.coords import BLACK, PASS, WHITE, vertex_to_point

try:
    from kosumi import _speedups
except ImportError:  # reported by test_c_extension_is_built
    _speedups = None

PY = SimpleNamespace(
    name="python",
    legal_mask=accel.py_legal_mask,
    chain_liberties=accel.py_chain_liberties,
    area_ownership=accel.py_area_ownership,
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


# ------------------------------------------------------------------------------------ helpers
def diagram(*rows: str) -> tuple[int, bytearray]:
    """Rows from the top: 'X' black, 'O' white, '.' empty (spaces ignored)."""
    grid = [r.replace(" ", "") for r in rows]
    n = len(grid)
    assert all(len(r) == n for r in grid)
    return n, bytearray(".XO".index(c) for r in grid for c in r)


def pt(size: int, x: int, y: int) -> int:
    return y * size + x


def illegal_points(mask: bytes) -> set[int]:
    return {p for p, v in enumerate(mask) if not v}


def state_ko(state: GameState, color: int) -> int:
    return state.ko if color == state.ko_color else -1


def random_game(size: int, num_moves: int, rng: random.Random, rules="chinese") -> GameState:
    """A random legal game (random empty points until one is legal; 3% passes)."""
    s = GameState(size, rules=rules)
    for _ in range(num_moves):
        empties = [p for p in range(size * size) if s.board[p] == 0]
        rng.shuffle(empties)
        move = next((p for p in empties if s.is_legal(p)), PASS)
        if rng.random() < 0.03:
            move = PASS
        s.play(move)
        if s.is_game_over():
            break
    return s


def random_positions(count: int, seed: int):
    """(size, board bytes, ko) from random games on sizes 2..19 at every stage, plus arbitrary
    random stone patterns (chains without liberties included)."""
    rng = random.Random(seed)
    for i in range(count):
        size = 2 + i % 18
        if i % 4 == 3:
            fill = rng.random()
            board = bytes(rng.choice((0, 1, 2)) if rng.random() < fill else 0
                          for _ in range(size * size))
            yield size, board, rng.randrange(-1, size * size)
        else:
            s = random_game(size, rng.randrange(0, 2 * size * size + 2), rng,
                            rules=Rules(suicide=rng.random() < 0.5))
            yield size, bytes(s.board), state_ko(s, s.to_move)


# ------------------------------------------------------------------------------------ build
def test_c_extension_is_built():
    """CI must notice a silently failed (optional) build. Set KOSUMI_ALLOW_PURE_PYTHON=1 on a
    machine without a compiler, where the fallbacks are expected."""
    if os.environ.get("KOSUMI_ALLOW_PURE_PYTHON") == "1":
        pytest.skip("KOSUMI_ALLOW_PURE_PYTHON=1: the pure-Python fallbacks are allowed")
    assert _speedups is not None, \
        "kosumi._speedups is not built (pip install -e . needs a C compiler)"
    if os.environ.get("KOSUMI_NO_SPEEDUPS", "").strip() not in ("", "0"):
        assert not accel.HAVE_C  # built, but deliberately not used
        return
    assert accel.HAVE_C and accel.IMPLEMENTATION == "c"
    assert accel.legal_mask is _speedups.legal_mask


def test_env_forces_fallback():
    code = ("import kosumi.accel as a; "
            "print(a.HAVE_C, a.IMPLEMENTATION, a.legal_mask is a.py_legal_mask)")
    env = dict(os.environ, KOSUMI_NO_SPEEDUPS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    assert out == ["False", "python", "True"]


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
    n, b = diagram(". O . . .",
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
    n, b = diagram("X . X O .",
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
    n, b = diagram(". X O . .",
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
    n, b = diagram(". X . X O",
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
        s = random_game(size, rng.randrange(0, 2 * size * size + 2), rng, Rules(suicide=suicide))
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
        s = random_game(size, rng.randrange(0, 2 * size * size + 2), rng, rules)
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
    n, b = diagram("X X . . .",
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
        s = random_game(size, rng.randrange(0, 2 * size * size), rng)
        libs = impl.chain_liberties(s.board, size)
        want = [len(s.chain_liberties(p)) if s.board[p] else 0 for p in range(size**2)]
        assert want == list(libs)


# -------------------------------------------------------------------------------- area_ownership
@pytest.mark.parametrize("impl", IMPLS)
def test_area_ownership_hand_checked(impl):
    # the two-point region B2-C2 touches both colours: dame, neutral
    n, b = diagram("X X O . O",
                   ". X O O O",
                   "X X O . O",
                   "X . . O O",
                   "X X X O .")
    assert impl.area_ownership(b, n) == diagram("X X O O O",
                                                "X X O O O",
                                                "X X O O O",
                                                "X . . O O",
                                                "X X X O O")[1]
    # seki: Black's eight stones and White's C5 share their only liberties B5 and D5; those
    # stay neutral under Tromp-Taylor, the rest is White's
    n, b = diagram("X . O . X",
                   "X X X X X",
                   "O O O O O",
                   ". . . . .",
                   ". . . . .")
    assert impl.chain_liberties(b, n)[0] == impl.chain_liberties(b, n)[2] == 2
    assert impl.area_ownership(b, n) == diagram("X . O . X",
                                                "X X X X X",
                                                "O O O O O",
                                                "O O O O O",
                                                "O O O O O")[1]
    n, b = diagram("X X X . O O",
                   "X . X . O .",
                   "X X X . O O",
                   ". . . . . .",
                   "O O O O O O",
                   ". . . . . .")
    assert impl.area_ownership(b, n) == diagram("X X X . O O",
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
    for size, board, _ in random_positions(60, seed=21):
        assert list(impl.area_ownership(board, size)) == oracle_area(board, size)


def test_gamestate_area_ownership_agrees():
    rng = random.Random(8)
    for i in range(20):
        size = 2 + i % 18
        s = random_game(size, rng.randrange(0, 2 * size * size), rng)
        own = s.area_ownership()
        assert own.tolist() == list(accel.area_ownership(s.board, size))
        assert own.tolist() == list(accel.py_area_ownership(s.board, size))


# ------------------------------------------------------------------------------------ C == fallback
@pytest.mark.skipif(C is None, reason="kosumi._speedups not built")
def test_c_equals_fallback_on_random_positions():
    count = 0
    for size, board, ko in random_positions(300, seed=1234):
        for color in (BLACK, WHITE):
            for allowed in (False, True):
                assert C.legal_mask(board, size, color, ko, allowed) == PY.legal_mask(
                    board, size, color, ko, allowed), (size, board, color, ko, allowed)
        libs = C.chain_liberties(board, size)
        assert libs == PY.chain_liberties(board, size)
        assert list(libs) == oracle_chain_liberties(board, size)
        assert C.area_ownership(board, size) == PY.area_ownership(board, size)
        rng = random.Random(count)
        moves = [(BLACK, rng.randrange(-1, size * size)) for _ in range(rng.randrange(6))]
        for color in (BLACK, WHITE):
            c_out = np.full(11 * size * size, 7.0, np.float32)
            py_out = np.full(11 * size * size, 7.0, np.float32)
            assert _speedups.basic_planes(board, size, color, ko, moves, c_out) is c_out
            assert accel.py_basic_planes(board, size, color, ko, moves, py_out) is py_out
            np.testing.assert_array_equal(c_out, py_out)
        count += 1
    assert count == 300


@pytest.mark.parametrize("fn", [
    pytest.param(_speedups and _speedups.basic_planes, id="c",
                 marks=pytest.mark.skipif(C is None, reason="kosumi._speedups not built")),
    pytest.param(accel.py_basic_planes, id="python"),
])
def test_basic_planes_hand_checked_and_bad_arguments(fn):
    n, b = diagram("X O . . .",
                   "X O . . .",
                   "O . . X X",
                   ". . . X O",
                   ". . . . .")
    out = np.full((11, n * n), 7.0, np.float32)
    moves = [(BLACK, 0), (WHITE, 1), (BLACK, -1), (WHITE, 19), (BLACK, 13), (WHITE, 1)]
    assert fn(b, n, WHITE, 7, moves, out) is out
    grid = out.reshape(11, n, n)
    assert (grid[0] == 1).all()
    assert grid[1].sum() == 4 and grid[1][0, 1] == grid[1][3, 4] == 1  # white, to move
    assert grid[2].sum() == 5 and grid[2][0, 0] == grid[2][2, 4] == 1  # black
    # liberties counted by hand (the corner X pair has none: not a real position, but counted)
    libs = {(0, 0): 0, (1, 0): 0, (0, 1): 3, (1, 1): 3, (2, 0): 2, (2, 3): 5, (2, 4): 5,
            (3, 3): 5, (3, 4): 1}
    for (y, x), k in libs.items():
        expect = [k == 1, k == 2, k >= 3]
        assert [bool(grid[j][y, x]) for j in (3, 4, 5)] == expect, (y, x, k)
    empty = np.frombuffer(bytes(b), np.uint8).reshape(n, n) == 0
    assert not grid[1:6, empty].any()
    # ko at point 7; the last 4 moves newest first: 1, 13, 19, pass (plane 10 stays empty)
    for plane, point in ((6, 7), (7, 1), (8, 13), (9, 19)):
        assert grid[plane].sum() == 1 and out[plane, point] == 1, plane
    assert not grid[10].any()
    fn(b, n, BLACK, -1, [], out)
    assert grid[1].sum() == 5 and grid[2].sum() == 4  # the view swaps with the side to move
    assert not grid[6:].any()
    bad_calls = [
        (b, n, 3, -1, [], out),  # colour
        (b, n, BLACK, 25, [], out),  # ko off the board
        (b, n, BLACK, -1, [(BLACK, 25)], out),  # move off the board
        (b, n, BLACK, -1, [(BLACK, 3, 4)], out),  # not a pair
        (b, n, BLACK, -1, [], np.zeros(11 * n * n, np.float64)),
        (b, n, BLACK, -1, [], np.zeros(10 * n * n, np.float32)),
        (b, n, BLACK, -1, [], np.zeros(22 * n * n, np.float32)[::2]),  # not contiguous
        (bytes(24), n, BLACK, -1, [], out),
        (b, 20, BLACK, -1, [], out),
    ]
    for args in bad_calls:
        with pytest.raises(ValueError):
            fn(*args)
    with pytest.raises(TypeError):
        fn(b, n, BLACK, -1, None, out)


# ------------------------------------------------------------------------------------ arguments
@pytest.mark.parametrize("impl", IMPLS)
def test_out_argument_and_buffer_types(impl):
    n, b = diagram("X X . O .",
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


# ------------------------------------------------------------------------------------ softmax
@pytest.mark.parametrize("fn", [
    pytest.param(_speedups and _speedups.masked_softmax, id="c",
                 marks=pytest.mark.skipif(C is None, reason="kosumi._speedups not built")),
    pytest.param(accel.py_masked_softmax, id="python"),
])
def test_masked_softmax_hand_checked_and_bad_arguments(fn):
    logits = np.array([[0.0, math.log(3.0), 50.0, 0.0],  # the 50 is illegal: ignored
                       [-1000.0, -1000.0, -999.0, 2.0]], np.float32)  # huge gaps: no overflow
    legal = np.array([[1, 1, 0, 0], [1, 0, 1, 0]], np.bool_)
    out = np.full_like(logits, 7.0)
    assert fn(logits, legal, 4, out) is out
    np.testing.assert_allclose(out[0], [0.25, 0.75, 0.0, 0.0], rtol=1e-6)
    e = 1 / (1 + math.e)
    np.testing.assert_allclose(out[1], [e, 0.0, 1 - e, 0.0], rtol=1e-6)
    assert out[0, 2] == 0.0 and out[1, 3] == 0.0  # exactly
    inplace = logits.copy()
    fn(inplace, legal, 4, inplace)  # out may be the logits
    np.testing.assert_array_equal(inplace, out)
    with pytest.raises(ValueError, match="row 1 has no legal entry"):
        fn(logits, np.array([[1, 0, 0, 0], [0, 0, 0, 0]], np.bool_), 4, out)
    with pytest.raises(ValueError):
        fn(logits, legal, 3, out)  # 8 is not a whole number of rows of 3
    with pytest.raises(ValueError):
        fn(logits, legal[:1], 4, out)  # mask too short
    with pytest.raises(ValueError):
        fn(logits.astype(np.float64), legal, 4, out)
    with pytest.raises(ValueError):
        fn(logits, legal, 4, np.empty(7, np.float32))
    with pytest.raises(ValueError):
        fn(logits, legal, 0, out)


@pytest.mark.skipif(C is None, reason="kosumi._speedups not built")
def test_masked_softmax_c_equals_fallback():
    rng = np.random.default_rng(3)
    for rows, k in ((1, 5), (16, 82), (3, 362)):
        logits = (rng.standard_normal((rows, k)) * 8).astype(np.float32)
        legal = rng.random((rows, k)) < 0.7
        legal[:, -1] = True
        a = _speedups.masked_softmax(logits, legal, k, np.empty_like(logits))
        b = accel.py_masked_softmax(logits, legal, k, np.empty_like(logits))
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-12)
        np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-6)
        assert not a[~legal].any()
