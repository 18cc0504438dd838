"""How the GTP engine scores a position: dead stones from ownership, and the score's GTP text.

Dead stones (``final_score``, ``final_status_list``, ``kgs-genmove_cleanup``): a chain is dead
when the mean ownership over its stones, seen from its own colour, is below ``-DEAD_OWNERSHIP``
(``kosumi.go.dead_stones``). The ownership is the search's mean ownership on the position
(trailing passes removed so the search can run), else the net's raw ownership, and when the net
has none every stone is alive (the score is then plain Tromp-Taylor area). Seki is not
recognised: seki stones count as alive.
"""

from __future__ import annotations

import numpy as np

from kosumi.engine.mcts import MCTS
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS
from kosumi.go.dead_stones import DEAD_OWNERSHIP, dead_stones

__all__ = ["DEAD_OWNERSHIP", "black_ownership", "dead_stones", "format_score"]
from kosumi.runtime.evaluator import Evaluator

#: visits of the search that estimates ownership for scoring
OWNERSHIP_VISITS = 128


def black_ownership(state: GameState, mcts: MCTS, evaluator: Evaluator,
                    visits: int) -> np.ndarray | None:
    """Ownership of every point from Black's view (+1 Black), or None if the net has none.

    A search of ``min(visits, OWNERSHIP_VISITS)`` visits, else the net's raw ownership."""
    s = state
    # a finished game cannot be searched: look at it with the trailing passes removed
    trailing = 0
    while trailing < len(s.moves) and s.moves[-1 - trailing][1] == PASS:
        trailing += 1
    probe = s.replay(len(s.moves) - trailing) if trailing else s.copy()
    own = mcts.search(probe, visits=min(visits, OWNERSHIP_VISITS)).ownership
    if own is None:
        own = evaluator.evaluate_one(probe).ownership
    if own is not None:
        own = np.asarray(own, dtype=np.float64) * (1.0 if probe.to_move == BLACK else -1.0)
    return own


def format_score(score: float) -> str:
    """An area score from Black's view -> ``B+3.5`` / ``W+0.5`` / ``0``."""
    if score == 0:
        return "0"
    text = f"{abs(score):.2f}".rstrip("0")
    if text.endswith("."):
        text += "0"
    return ("B+" if score > 0 else "W+") + text
