"""The ``basic_ladder`` feature set: ``basic`` plus the two ladder planes of KataGo's V7 inputs.

``basic`` shows liberties but not ladders, and a search of a few hundred visits cannot read a
ladder across a 19x19 board; these two planes give the net the reading of
``kosumi.go.ladder_planes.ladder_features`` on the current board:

    0-10   ``basic``'s planes (``kosumi.nets.features``), the same order
    11     stones of chains with 1 or 2 liberties that a ladder captures (a 1-liberty chain with
           its owner to move; a 2-liberty chain with the attacker to move) -- V7's plane 14
    12     the side to move's moves that capture an opponent chain of 2 liberties in a ladder
           -- V7's plane 17
  globals: ``basic``'s 4

The first 11 planes and the globals are ``basic``'s (``extends = "basic"``), so a ``basic`` net
becomes a ``basic_ladder`` one with zero weights on planes 11-12 and plays exactly as before
(``kosumi distill --init NET --features basic_ladder``). The reading is cached by board and
reuses the previous position's reading where the last move changed nothing it looked at, so a
search leaf whose parent was evaluated pays only for what the move changed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.ladder_planes import HAVE_C, cached_ladder_features, ladder_features
from kosumi.nets.features import Basic, batch_board_size, register_feature_set


class BasicLadder(Basic):
    """``basic`` + ladder-captured stones + ladder-capturing moves (see the module docstring)."""

    name = "basic_ladder"
    extends = "basic"
    num_planes = 13
    description = "basic + ladders: ladder-captured stones, ladder-capturing moves"
    plane_names = (*Basic.plane_names, "ladder captured", "ladder moves")

    def encode(self, states: Sequence[GameState]) -> tuple[np.ndarray, np.ndarray]:
        n = batch_board_size(states)
        base, glob = super().encode(states)
        planes = np.zeros((len(states), 13, n * n), dtype=np.float32)
        planes[:, :11] = base.reshape(len(states), 11, n * n)
        for i, s in enumerate(states):
            ko = s.ko if s.ko >= 0 else -1
            hint = None
            if not HAVE_C and len(s.boards) >= 2:  # the C reading needs no hint
                hint = cached_ladder_features(s.boards[-2], n, -1)
            cur = ladder_features(s.board, n, ko, hint=hint)
            planes[i, 11] = cur.captured
            planes[i, 12] = cur.working[3 - s.to_move]  # the opponent's chains
        return planes.reshape(len(states), 13, n, n), glob


register_feature_set(BasicLadder())
