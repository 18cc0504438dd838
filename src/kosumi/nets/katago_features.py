"""KataGo's input features V7 (model versions 8-17): 22 spatial planes + 19 global inputs.

Computed with kosumi's own rules engine (``GameState``), ladder reader (``go.ladder_planes``) and
pass-alive analysis (``go.benson``), following the published definition of KataGo's V7 inputs
for area scoring in the main phase (kosumi has no territory scoring, encore, tax or button, so
the planes and globals for those are always 0). Everything is from the side to move's view
("own" = the player to move, "opponent" = the other one).

Spatial planes [22, N, N]:

    0   on board (all ones: the net runs at the board's exact size)
    1   own stones                      2   opponent stones
    3   stones whose chain has exactly 1 liberty; 4: exactly 2; 5: exactly 3
    6   points the side to move may not play because of ko: the simple-ko point and, under
        positional superko, every superko-banned point
    7-8 0 (encore ko-recapture blocks)
    9-13 the last five moves: 9 = the opponent's last move, 10 = our move before it, ... (a plane
        stays empty for a pass; the walk stops at the first move whose colour breaks the
        alternation, and at the history limit below)
    14  stones of chains with 1 or 2 liberties that are ladder-captured (1 liberty: their owner to
        move; 2 liberties: the attacker to move), on the current board
    15  the same on the board one move ago; 16: two moves ago (the current board -- resp. the
        board one move ago -- when that much history is hidden, see below)
    17  moves that capture an opponent chain of 2 liberties in a ladder (working ladder moves)
    18  own area, 19 opponent area: ``go.benson.area_map`` (pass-alive stones and territory, then
        single-coloured empty regions, then every remaining stone), with multi-stone suicide
        legal exactly when the rules allow it
    20-21 0 (second-encore starting stones)

Global inputs [19]:

    0-4 the last five moves were passes (same walk as planes 9-13)
    5   komi / 20 from the side to move's view (+komi for White, -komi for Black), komi clipped
        to +-(N*N + 20); kosumi's komi is the whole compensation (no per-handicap-stone bonus,
        as kosumi's area scoring has none)
    6-7 ko rule: simple (0, 0), positional superko (1, 0.5)
    8   multi-stone suicide legal
    9-13 0 (territory scoring, tax, encore phases)
    14  a pass now would end the game
    15-17 0 (playout doubling advantage, button)
    18  komi parity wave: a triangle wave of the side to move's komi with period 2, rising through
        the komis that allow a draw on this board (even komis when N*N is even, odd ones else)

Passes and hidden history (KataGo with ``friendlyPassOk``, as in its ``chinese`` preset; off for
Tromp-Taylor rules, see ``default_friendly_pass_ok``; the encoder takes an override): a pass
that would end the game right after the opponent's pass is treated as not ending it, and then
the net sees NO history at all (planes 9-13 and globals 0-4 empty, planes 15/16 from the
current board, global 14 = 0). Under simple ko a pass also ends the game when the same player
already passed in the same position (the same stones); that pass is not hidden. After a finished
game (the last move ended it) only the last move is shown.

Public API: ``KataGoV7`` (the feature set, registered as ``katago_v7``), ``encode_v7(states)``,
``encode_position``, and the helpers ``pass_status``, ``ko_after``, ``komi_wave``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kosumi.go import board_kernels
from kosumi.go.benson import area_map
from kosumi.go.board import KO_POSITIONAL, KO_SIMPLE, GameState, Rules
from kosumi.go.coords import EMPTY, PASS, WHITE, neighbor_table
from kosumi.go.ladder_planes import ladder_features
from kosumi.nets.features import (
    FEATURE_SETS,
    FeatureSet,
    batch_board_size,
    register_feature_set,
)

NUM_SPATIAL = 22
NUM_GLOBAL = 19
HISTORY = 5
KOMI_CLIP_RADIUS = 20.0


# ------------------------------------------------------------------------------ history helpers
def ko_after(state: GameState, j: int) -> int:
    """The simple-ko point (any colour) right after the first ``j`` moves of ``state``, or -1.

    A ko arises when a move captures exactly one stone and the capturing stone is alone with one
    liberty; a pass clears it."""
    moves = state.moves
    if j == len(moves):
        return state.ko if state.ko >= 0 else -1
    if j <= 0:
        return -1
    color, p = moves[j - 1]
    if p == PASS:
        return -1
    before, after = state.boards[j - 1], state.boards[j]
    # exactly one stone captured: the boards differ at the new stone and one other point
    diff = np.flatnonzero(np.frombuffer(before, np.uint8) != np.frombuffer(after, np.uint8))
    if len(diff) != 2:
        return -1
    captured = int(diff[0]) if diff[1] == p else int(diff[1])
    if before[captured] != 3 - color:
        return -1
    libs = 0
    for q in neighbor_table(state.size)[p]:
        c = after[q]
        if c == color:
            return -1
        if c == EMPTY:
            libs += 1
    return captured if libs == 1 else -1


def default_friendly_pass_ok(rules: Rules) -> bool:
    """KataGo's ``friendlyPassOk`` for the KataGo preset matching kosumi's rules: off for
    Tromp-Taylor (positional superko, suicide legal), on otherwise (``chinese``)."""
    return rules.friendly_pass_ok


def pass_status(state: GameState, friendly_pass_ok: bool | None = None) -> tuple[int, bool]:
    """(how many recent moves the net may see, "a pass would end the game" flag).

    Area scoring, main phase (KataGo's rules logic for these inputs): a pass ends the game after
    the opponent's pass (two consecutive passes) or, under simple ko, when the player to move
    already passed in this very position. With ``friendly_pass_ok`` the first case is not taken
    to end the game and the whole history is hidden from the net."""
    if friendly_pass_ok is None:
        friendly_pass_ok = default_friendly_pass_ok(state.rules)
    moves = state.moves
    pla = state.to_move
    trailing = 0
    for _, p in reversed(moves):
        if p != PASS:
            break
        trailing += 1
    spight = False
    if state.rules.ko == KO_SIMPLE:
        current = state.boards[-1]
        for i, (c, p) in enumerate(moves):
            if p == PASS and c == pla and state.boards[i] == current:
                spight = True
                break
    would_end = trailing + 1 >= 2 or spight
    if would_end and friendly_pass_ok and trailing + 1 == 2 and not spight:
        return 0, False
    # did the last move end the game? (two passes, or a repeated pass under simple ko)
    finished = False
    if moves and moves[-1][1] == PASS:
        if trailing >= 2:
            finished = True
        elif state.rules.ko == KO_SIMPLE:
            c_last = moves[-1][0]
            before = state.boards[-2]
            finished = any(p == PASS and c == c_last and state.boards[i] == before
                           for i, (c, p) in enumerate(moves[:-1]))
    return (1 if finished else HISTORY), would_end


def komi_wave(self_komi: float, size: int) -> float:
    """Global input 18: triangle wave (period 2) of the side to move's komi."""
    if (size * size) % 2 == 0:
        floor = math.floor(self_komi / 2.0) * 2.0
    else:
        floor = math.floor((self_komi - 1.0) / 2.0) * 2.0 + 1.0
    delta = min(max(self_komi - floor, 0.0), 2.0)
    if delta < 0.5:
        return delta
    if delta < 1.5:
        return 1.0 - delta
    return delta - 2.0


# ------------------------------------------------------------------------------ one position
def encode_position(state: GameState, planes: np.ndarray, glob: np.ndarray,
                    friendly_pass_ok: bool | None = None) -> None:
    """Fill ``planes`` float32 [22, N*N] and ``glob`` float32 [19] (both zeroed) for ``state``."""
    n = state.size
    nn = n * n
    pla = state.to_move
    opp = 3 - pla
    rules = state.rules
    board = bytes(state.board)
    b = np.frombuffer(board, dtype=np.uint8)
    libs = np.frombuffer(board_kernels.chain_liberties(board, n), dtype=np.uint8)

    planes[0] = 1.0
    planes[1] = b == pla
    planes[2] = b == opp
    planes[3] = libs == 1
    planes[4] = libs == 2
    planes[5] = libs == 3

    # 6: ko bans for the side to move
    if state.ko >= 0 and state.ko_color == pla:
        planes[6, state.ko] = 1.0
    if rules.ko == KO_POSITIONAL:
        simple = np.empty(nn, dtype=bool)
        board_kernels.legal_mask(board, n, pla, state.ko if state.ko_color == pla else -1,
                         rules.suicide, out=simple)
        planes[6][simple & ~state.legal_mask(pla)] = 1.0

    # 18/19: area
    area = area_map(board, n, suicide_legal=rules.suicide)
    planes[18] = area == pla
    planes[19] = area == opp

    # 9-13 and globals 0-4: recent moves
    max_turns, pass_ends = pass_status(state, friendly_pass_ok)
    moves = state.moves
    included = 0
    for k in range(min(max_turns, len(moves))):
        color, p = moves[-1 - k]
        if color != (opp if k % 2 == 0 else pla):
            break
        included = k + 1
        if p == PASS:
            glob[k] = 1.0
        else:
            planes[9 + k, p] = 1.0

    # 14-17: ladders now, one and two moves ago (oldest first: each board reuses the reading
    # of the previous one wherever the move in between changed nothing it looked at)
    nmoves = len(moves)
    prev2 = prev = None
    if included >= 2:
        prev2 = ladder_features(state.boards[nmoves - 2], n, ko_after(state, nmoves - 2))
    if included >= 1:
        prev = ladder_features(state.boards[nmoves - 1], n, ko_after(state, nmoves - 1),
                               hint=prev2)
    cur = ladder_features(board, n, ko_after(state, nmoves), hint=prev)
    if prev is None:  # hidden history: the current board stands in for the older ones
        prev = cur
    if prev2 is None:
        prev2 = prev
    planes[14] = cur.captured
    planes[15] = prev.captured
    planes[16] = prev2.captured
    planes[17] = cur.working[opp]

    # globals
    self_komi = state.komi if pla == WHITE else -state.komi
    bound = nn + KOMI_CLIP_RADIUS
    self_komi = min(max(self_komi, -bound), bound)
    glob[5] = self_komi / 20.0
    if rules.ko == KO_POSITIONAL:
        glob[6] = 1.0
        glob[7] = 0.5
    if rules.suicide:
        glob[8] = 1.0
    glob[14] = 1.0 if pass_ends else 0.0
    glob[18] = komi_wave(self_komi, n)


# ------------------------------------------------------------------------------ feature set
class KataGoV7(FeatureSet):
    """KataGo's V7 inputs (see the module docstring); ``encode`` -> ([B, 22, N, N], [B, 19])."""

    name = "katago_v7"
    num_planes = NUM_SPATIAL
    num_globals = NUM_GLOBAL
    description = ("KataGo V7: stones, liberties, ko, 5 moves, ladders (now/-1/-2, working "
                   "moves), pass-alive area; komi, rules, pass flags")

    plane_names = ("on board", "own stones", "opp stones", "1 liberty", "2 liberties",
                   "3 liberties", "ko ban", "encore ko", "unused", "move -1", "move -2",
                   "move -3", "move -4", "move -5", "ladder now", "ladder -1", "ladder -2",
                   "ladder moves", "own area", "opp area", "encore own", "encore opp")
    global_names = ("pass -1", "pass -2", "pass -3", "pass -4", "pass -5", "komi / 20",
                    "ko rule a", "ko rule b", "suicide", "territory", "tax a", "tax b",
                    "encore a", "encore b", "pass ends", "pda a", "pda b", "button",
                    "komi wave")

    def __init__(self, friendly_pass_ok: bool | None = None):
        self.friendly_pass_ok = friendly_pass_ok

    def encode(self, states: Sequence[GameState]) -> tuple[np.ndarray, np.ndarray]:
        n = batch_board_size(states)
        bsz = len(states)
        planes = np.zeros((bsz, NUM_SPATIAL, n * n), dtype=np.float32)
        glob = np.zeros((bsz, NUM_GLOBAL), dtype=np.float32)
        for i, s in enumerate(states):
            encode_position(s, planes[i], glob[i], self.friendly_pass_ok)
        return planes.reshape(bsz, NUM_SPATIAL, n, n), glob


KATAGO_V7 = FEATURE_SETS.get("katago_v7") or register_feature_set(KataGoV7())


def encode_v7(states: Sequence[GameState], friendly_pass_ok: bool | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """V7 features of a same-size batch: planes float32 [B, 22, N, N], globals float32 [B, 19]."""
    return KataGoV7(friendly_pass_ok).encode(states)
