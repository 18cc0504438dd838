"""Named input feature sets: a batch of same-size ``GameState`` -> numpy arrays for a network.

Every feature set has a ``name``, ``num_planes`` (C), ``num_globals`` (G) and
``encode(states) -> (planes, globals)`` with ``planes`` float32 [B, C, N, N] (row-major from the
top-left point, as everywhere in kosumi) and ``globals`` float32 [B, G] (or ``None`` when G = 0).
All states of one call must have the same board size. Encoding is vectorised over the batch with
numpy; it runs at every MCTS leaf, so keep it cheap.

``lz18`` — exactly Leela Zero's 18 input planes (19x19 nets; any size works here):

    0-7    the side to move's stones at T = 0, -1, ..., -7 (the board after the last move, the
           one before, ...; boards before the first move are empty planes)
    8-15   the opponent's stones at T = 0, -1, ..., -7
    16     all ones if Black is to move
    17     all ones if White is to move

    "Side to move" is the player to move NOW for every history plane (as in Leela Zero). A pass
    repeats the previous board. Setup stones (handicap) are part of the board at T = -len(moves).

``basic`` — cheap features for every board size (11 planes, 4 globals):

    0      on board (all ones)
    1      the side to move's stones
    2      the opponent's stones
    3      stones (either colour) whose chain has exactly 1 liberty (distinct empty points,
           counted by ``kosumi.accel.chain_liberties``)
    4      ... exactly 2 liberties
    5      ... 3 or more liberties
    6      the point where the side to move may not play because of simple ko (at most one)
    7-10   the last 4 moves: 7 = the most recent move (the opponent's), 8 = the one before, ...;
           a plane is empty if that move was a pass or does not exist
  globals:
    0      1 if Black is to move
    1      1 if White is to move
    2      komi / 15 from the side to move's view (komi is given to White: +komi/15 when White
           is to move, -komi/15 when Black is to move)
    3      1 if the last move was a pass

``basic_ladder`` — ``basic`` and two ladder planes (13 planes, 4 globals;
``kosumi.nets.basic_ladder``).

New feature sets: subclass ``FeatureSet`` and call ``register_feature_set``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, WHITE
from kosumi.nets.basic_planes import basic_planes


class FeatureSet(ABC):
    """A named way to turn positions into network inputs."""

    name: str = ""
    num_planes: int = 0
    num_globals: int = 0
    description: str = ""
    plane_names: tuple[str, ...] = ()  # short names, for plots (empty: "plane i")
    global_names: tuple[str, ...] = ()
    #: the feature set whose planes and globals are this one's first ones ("" for none): a net
    #: for it widens into one for this set with zero weights on the new planes
    extends: str = ""

    @abstractmethod
    def encode(self, states: Sequence[GameState]) -> tuple[np.ndarray, np.ndarray | None]:
        """planes float32 [B, C, N, N], globals float32 [B, G] or None (G = 0)."""

    def __repr__(self) -> str:
        return f"<FeatureSet {self.name}: {self.num_planes} planes, {self.num_globals} globals>"


FEATURE_SETS: dict[str, FeatureSet] = {}
#: feature sets defined in modules that are imported when first asked for (their import is
#: heavier: they need the ladder reader, and KataGo's V7 inputs the pass-alive analysis)
LAZY_FEATURE_SETS: dict[str, str] = {"katago_v7": "kosumi.nets.katago_features",
                                     "basic_ladder": "kosumi.nets.basic_ladder"}


def register_feature_set(fs: FeatureSet) -> FeatureSet:
    """Add a feature set to the registry (the name must be new)."""
    if fs.name in FEATURE_SETS:
        raise ValueError(f"feature set {fs.name!r} is already registered")
    FEATURE_SETS[fs.name] = fs
    return fs


def known_feature_sets() -> list[str]:
    """The names of every feature set, registered or importable on demand."""
    return sorted(set(FEATURE_SETS) | set(LAZY_FEATURE_SETS))


def get_feature_set(name: str) -> FeatureSet:
    """The feature set called ``name`` (importing its module if needed); KosumiError if unknown."""
    fs = FEATURE_SETS.get(name)
    if fs is None and isinstance(name, str) and name in LAZY_FEATURE_SETS:
        import importlib

        importlib.import_module(LAZY_FEATURE_SETS[name])
        fs = FEATURE_SETS.get(name)
    if fs is None:
        raise KosumiError(f"unknown feature set {name!r} "
                          f"(known: {', '.join(known_feature_sets())})")
    return fs


def batch_board_size(states: Sequence[GameState]) -> int:
    """The common board size of a non-empty batch (ValueError on a mixed or empty batch)."""
    if not states:
        raise ValueError("cannot encode an empty batch")
    n = states[0].size
    for s in states:
        if s.size != n:
            raise ValueError(f"a feature batch must have one board size, got {n} and {s.size}")
    return n


class LeelaZero18(FeatureSet):
    """Leela Zero's 18 planes (see the module docstring)."""

    name = "lz18"
    num_planes = 18
    num_globals = 0
    description = "Leela Zero: 8 own + 8 opponent history planes, black/white to move"
    plane_names = (*(f"own T-{t}" for t in range(8)), *(f"opp T-{t}" for t in range(8)),
                   "black to move", "white to move")
    history = 8

    def encode(self, states: Sequence[GameState]) -> tuple[np.ndarray, None]:
        n = batch_board_size(states)
        nn = n * n
        bsz = len(states)
        h = self.history
        blank = bytes(nn)
        chunks: list[bytes] = []
        to_move = np.empty(bsz, dtype=np.uint8)
        for i, s in enumerate(states):
            past = s.boards[-1 : -h - 1 : -1]  # T = 0, -1, ... (newest first)
            chunks.extend(past)
            if len(past) < h:
                chunks.extend([blank] * (h - len(past)))
            to_move[i] = s.to_move
        hist = np.frombuffer(b"".join(chunks), dtype=np.uint8).reshape(bsz, h, nn)
        planes = np.empty((bsz, 18, nn), dtype=np.float32)
        own = to_move[:, None, None]
        planes[:, 0:h] = hist == own
        planes[:, h : 2 * h] = hist == (3 - own)
        planes[:, 16] = (to_move == BLACK)[:, None]
        planes[:, 17] = (to_move == WHITE)[:, None]
        return planes.reshape(bsz, 18, n, n), None


class Basic(FeatureSet):
    """Cheap features for every board size (see the module docstring)."""

    name = "basic"
    num_planes = 11
    num_globals = 4
    description = "stones, liberties 1/2/3+, ko, last 4 moves; side to move, komi, last pass"
    plane_names: tuple[str, ...] = (
        "on board", "own stones", "opp stones", "1 liberty", "2 liberties", "3+ liberties",
        "ko ban", "last move", "move -2", "move -3", "move -4")
    global_names = ("black to move", "white to move", "komi / 15", "last move pass")

    def encode(self, states: Sequence[GameState]) -> tuple[np.ndarray, np.ndarray]:
        n = batch_board_size(states)
        nn = n * n
        bsz = len(states)
        planes = np.empty((bsz, 11, nn), dtype=np.float32)
        rows: list[tuple[float, float, float, float]] = []
        for i, s in enumerate(states):  # this runs at every search leaf: keep it lean
            tm = s.to_move
            moves = s.moves
            ko = s.ko if s.ko_color == tm else -1
            basic_planes(s.board, n, tm, ko, moves, planes[i])  # C when built
            komi = s.komi if tm == WHITE else -s.komi
            last_pass = 1.0 if moves and moves[-1][1] < 0 else 0.0
            rows.append((1.0, 0.0, komi / 15.0, last_pass) if tm == BLACK
                        else (0.0, 1.0, komi / 15.0, last_pass))
        glob = np.array(rows, dtype=np.float32)
        return planes.reshape(bsz, 11, n, n), glob


register_feature_set(LeelaZero18())
register_feature_set(Basic())
