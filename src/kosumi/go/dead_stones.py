"""Dead stones from an ownership estimate: what the referee will take off the board.

A chain is dead when the mean ownership over its stones, seen from its own colour, is below
``-DEAD_OWNERSHIP``. Used where kosumi must score a position as a referee would (the GTP
engine's ``final_score`` and ``final_status_list``, and the search's choice to end a game by
passing). Seki is not recognised: seki stones count as alive.
"""

from __future__ import annotations

import numpy as np

from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, EMPTY

#: a chain is dead when its mean ownership (its own colour's view) is below minus this
DEAD_OWNERSHIP = 0.3


def dead_stones(state: GameState, own: np.ndarray | None) -> set[int]:
    """Stones whose chain's mean ownership from its own colour's view < -DEAD_OWNERSHIP
    (``own``: Black's view, +1 Black, one value per point; None: every stone is alive)."""
    if own is None:
        return set()
    s = state
    dead: set[int] = set()
    seen: set[int] = set()
    for p in range(s.num_points):
        c = s.board[p]
        if c == EMPTY or p in seen:
            continue
        stones = s.chain_stones(p)
        seen.update(stones)
        mean = float(np.mean(own[stones])) * (1.0 if c == BLACK else -1.0)
        if mean < -DEAD_OWNERSHIP:
            dead.update(stones)
    return dead
