"""The referee: how a game that ended on the board (two passes or the move limit) gets its score.

The game is replayed into a referee engine (GNU Go by default, as GoGui's twogtp does with
``-referee``). Its ``final_score`` is the result, since it plays out boundaries the engines left
open. Kosumi also counts the area itself (Tromp-Taylor after removing the referee's
``final_status_list dead``) and flags any disagreement in the log and in the game's notes (about
2 in 100 GNU Go level 1 games on 9x9 end with a boundary open). Without a referee, or when it
fails, kosumi's count is the result.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from kosumi.engine.gtp_client import EngineCrashed, EngineError, GTPTimeout
from kosumi.engine.match_results import GameResult, parse_score
from kosumi.go.board import GameState
from kosumi.go.coords import COLOR_NAMES, PASS, point_to_vertex, vertex_to_point
from kosumi.go.sgf import format_result

log = logging.getLogger("kosumi.match")


class RefereeEngine(Protocol):
    """What the referee needs of an engine: a GTP command with a timeout, and a kill."""

    def send(self, command: str, timeout: float | None) -> str: ...

    def kill(self) -> None: ...


@dataclass
class _Count:
    area: float  # kosumi's Tromp-Taylor count with the referee's dead stones
    dead: list[int]
    referee_result: str | None
    notes: list[str]


def _count(state: GameState, referee: RefereeEngine | None, timeout: float) -> _Count:
    """Kosumi's area count with the referee's dead stones, and the referee's own score."""
    notes: list[str] = []
    if referee is None:
        return _Count(state.area_score(), [], None, ["no referee: Tromp-Taylor score as played"])
    size = state.size
    try:
        referee.send(f"boardsize {size}", timeout)
        referee.send(f"komi {state.komi:g}", timeout)
        referee.send("clear_board", timeout)
        for color, p in [*state.setup, *state.moves]:  # setup stones first, as plays
            vertex = "pass" if p == PASS else point_to_vertex(p, size)
            referee.send(f"play {COLOR_NAMES[color].lower()} {vertex}", timeout)
        reply = referee.send("final_status_list dead", timeout)
        dead = [vertex_to_point(v, size) for v in reply.split()]
    except (EngineError, ValueError) as e:
        if isinstance(e, (GTPTimeout, EngineCrashed)):
            referee.kill()
        note = f"referee failed ({e}); scored without removing dead stones"
        log.warning(note)
        return _Count(state.area_score(), [], None, [note])
    referee_result = None
    try:
        referee_result = referee.send("final_score", timeout).split()[0]
    except (EngineError, IndexError) as e:
        if isinstance(e, (GTPTimeout, EngineCrashed)):
            referee.kill()
        notes.append(f"referee final_score failed: {e}")
    return _Count(state.area_score(dead), dead, referee_result, notes)


def score_game(game: GameResult, state: GameState, referee: RefereeEngine | None,
               timeout: float) -> None:
    """Fill in a finished game's score and result: the referee's final_score where it gave one,
    else kosumi's area count with the referee's dead stones (see the module docstring)."""
    counted = _count(state, referee, timeout)
    game.area_score = counted.area
    game.dead = sorted(point_to_vertex(p, state.size) for p in counted.dead)
    game.referee_result = counted.referee_result
    game.notes.extend(counted.notes)
    game.score = counted.area
    if counted.referee_result is not None:
        try:
            game.score = parse_score(counted.referee_result)
        except ValueError:
            game.notes.append(f"the referee's final_score {counted.referee_result!r} is not a "
                              "score: the result is kosumi's area count")
        game.referee_agrees = abs(game.score - counted.area) < 1e-6
    game.result = format_result(game.score)
    game.winner = None if game.score == 0 else ("B" if game.score > 0 else "W")
    if game.referee_agrees is False:
        note = (f"score disagreement: kosumi's area count {format_result(counted.area)} (dead: "
                f"{' '.join(game.dead) or 'none'}), referee {counted.referee_result}")
        game.notes.append(note)
        log.warning("game %d: %s", game.index, note)
