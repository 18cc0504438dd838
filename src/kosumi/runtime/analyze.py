"""``kosumi analyze``: raw network output (no search) for positions, as JSON Lines.

Positions come from a move string (``"B D4 W Q16 ..."``), an SGF game (after N moves) or a JSON
Lines file in the format of ``shared/reference/katago-g170-b6c96/raw_nn.jsonl`` (fields ``id``,
``board_size``, ``komi``, ``moves`` = ``[[colour, vertex], ...]``, optional ``rules``). Every
bad input (unknown vertex, illegal move, bad JSON line, missing field) raises a one-line
``KosumiError`` naming the file/line/field; the whole input is read and checked before any
position is evaluated.

Each output record (``analysis_record``) holds: ``id`` (when the input had one), ``board_size``,
``komi``, ``to_move`` ("B"/"W"), ``num_moves``, ``policy`` (N*N probabilities, row-major from the
top-left point A19/A9, exactly 0 at illegal points), ``policy_pass``, ``winrate`` (the side to
move wins), and when the net has them ``score_lead`` (the side to move's lead in points) and
``ownership`` (N*N in [-1, 1], +1 = the side to move owns the point).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kosumi.errors import KosumiError
from kosumi.go.board import GameState, IllegalMove, Rules, default_komi
from kosumi.go.coords import (
    COLOR_NAMES,
    PASS,
    check_size,
    parse_color,
    point_to_vertex,
    vertex_to_point,
)
from kosumi.runtime.evaluator import Evaluation, Evaluator

DIGITS = 7  # significant digits of the floats printed


@dataclass
class AnalysisQuery:
    """A position to analyse, with the id to echo (if any)."""

    state: GameState
    id: Any = None


def _rules(name: Any, where: str) -> Rules:
    try:
        return Rules.named(str(name))
    except ValueError as e:
        raise KosumiError(f"{where}: {e}") from None


def _size(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise KosumiError(f"{where}: board size must be an integer, not {value!r}")
    try:
        return check_size(value)
    except ValueError as e:
        raise KosumiError(f"{where}: {e}") from None


def _komi(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        raise KosumiError(f"{where}: komi must be a number, not {value!r}")
    return float(value)


def play_moves(size: int, komi: float, moves: Iterable[tuple[str | None, str]], where: str,
               rules: Rules | str = "chinese") -> GameState:
    """Replay ``(colour, vertex)`` pairs from the empty board; errors name ``where`` and the
    move number. A colour of ``None`` means the side to move."""
    state = GameState(size, komi, rules)
    for number, (color_text, vertex) in enumerate(moves, start=1):
        try:
            color = state.to_move if color_text is None else parse_color(color_text)
        except (ValueError, AttributeError):
            raise KosumiError(f"{where}: move {number}: invalid colour {color_text!r}") from None
        try:
            p = vertex_to_point(vertex, size)
        except (ValueError, AttributeError):
            raise KosumiError(f"{where}: move {number}: invalid vertex {vertex!r} on a "
                              f"{size}x{size} board") from None
        try:
            if p < 0 and p != PASS:
                raise IllegalMove(f"{vertex} is not a move")
            state.play(p, color)
        except IllegalMove as e:
            raise KosumiError(f"{where}: move {number} ({COLOR_NAMES[color]} {vertex}) is "
                              f"illegal: {e}") from None
    return state


def parse_move_text(text: str) -> list[tuple[str | None, str]]:
    """``"B D4 W Q16 pass"`` -> [("B","D4"), ("W","Q16"), (None,"pass")]: a colour token is
    optional before each vertex (without one, the side to move plays)."""
    out: list[tuple[str | None, str]] = []
    color: str | None = None
    for tok in text.replace(",", " ").split():
        if tok.upper() in ("B", "W", "BLACK", "WHITE") and color is None:
            color = tok
            continue
        out.append((color, tok))
        color = None
    if color is not None:
        raise KosumiError(f"--moves: colour {color!r} at the end is not followed by a vertex")
    return out


def position_from_moves(text: str, size: int = 19, komi: float | None = None,
                        rules: str = "chinese") -> AnalysisQuery:
    size = _size(size, "--size")
    komi = default_komi(size) if komi is None else komi
    return AnalysisQuery(play_moves(size, komi, parse_move_text(text), "--moves", _rules(rules,
                                                                                   "--rules")))


def position_from_sgf(path: str | os.PathLike[str], move: int | None = None,
                      rules: str = "chinese") -> AnalysisQuery:
    """The position of an SGF game after ``move`` moves (default: all)."""
    from kosumi.go.sgf import load_game

    record = load_game(path)
    return AnalysisQuery(record.to_state(move, rules=_rules(rules, "--rules")), id=None)


def read_queries(path: str | os.PathLike[str], rules: str = "chinese") -> list[AnalysisQuery]:
    """All positions of a JSON Lines file (raw_nn.jsonl format); blank lines are skipped."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise KosumiError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    out = []
    for lineno, line in enumerate(lines, start=1):
        if line.strip():
            out.append(position_from_json(line, f"{path}:{lineno}", rules))
    return out


def position_from_json(line: str, where: str, rules: str = "chinese") -> AnalysisQuery:
    """One JSON object with ``board_size``, ``komi``, ``moves`` (and ``id``, ``rules``)."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise KosumiError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise KosumiError(f"{where}: a position must be a JSON object")
    for name in ("board_size", "moves"):
        if name not in obj:
            raise KosumiError(f"{where}: field {name!r} is missing")
    size = _size(obj["board_size"], f"{where}: field 'board_size'")
    komi = _komi(obj.get("komi", default_komi(size)), f"{where}: field 'komi'")
    moves = obj["moves"]
    if not isinstance(moves, list):
        raise KosumiError(f"{where}: field 'moves' must be a list of [colour, vertex]")
    pairs = []
    for i, m in enumerate(moves):
        if (not isinstance(m, list) or len(m) != 2
                or not all(isinstance(x, str) for x in m)):
            raise KosumiError(f"{where}: field 'moves'[{i}] must be [colour, vertex], not {m!r}")
        pairs.append((m[0], m[1]))
    rule_set = _rules(obj.get("rules", rules), f"{where}: field 'rules'")
    state = play_moves(size, komi, pairs, f"{where}: field 'moves'", rule_set)
    return AnalysisQuery(state, id=obj.get("id"))


def _floats(values: Iterable[float]) -> list[float]:
    return [float(f"{v:.{DIGITS}g}") for v in values]


def analysis_record(state: GameState, ev: Evaluation, id: Any = None) -> dict[str, Any]:
    """The JSON-ready record of one evaluation (see the module docstring)."""
    n2 = state.num_points
    rec: dict[str, Any] = {}
    if id is not None:
        rec["id"] = id
    rec.update(
        board_size=state.size,
        komi=state.komi,
        to_move=COLOR_NAMES[state.to_move],
        num_moves=len(state.moves),
        last_move=None if not state.moves else point_to_vertex(state.moves[-1][1], state.size),
        policy=_floats(ev.policy[:n2].tolist()),
        policy_pass=float(f"{float(ev.policy[n2]):.{DIGITS}g}"),
        winrate=float(f"{ev.value:.{DIGITS}g}"),
    )
    if ev.score_lead is not None:
        rec["score_lead"] = float(f"{ev.score_lead:.{DIGITS}g}")
    if ev.ownership is not None:
        rec["ownership"] = _floats(ev.ownership.tolist())
    return rec


def analyze(evaluator: Evaluator, positions: list[AnalysisQuery],
            batch_size: int = 64) -> Iterator[dict[str, Any]]:
    """Evaluate ``positions`` in batches; yield one record per position, in order."""
    for start in range(0, len(positions), batch_size):
        chunk = positions[start : start + batch_size]
        for pos, ev in zip(chunk, evaluator.evaluate([p.state for p in chunk]), strict=True):
            yield analysis_record(pos.state, ev, pos.id)


def analysis_line(rec: dict[str, Any]) -> str:
    """A short human summary of one analysis record."""
    n = rec["board_size"]
    pol = rec["policy"] + [rec["policy_pass"]]
    top = sorted(range(len(pol)), key=lambda i: -pol[i])[:5]
    moves = ", ".join(f"{point_to_vertex(i, n)} {pol[i]:.3f}" for i in top)
    parts = [f"{rec['id']}: " if "id" in rec else "", f"{rec['to_move']} to move, ",
             f"winrate {rec['winrate']:.3f}"]
    if "score_lead" in rec:
        parts.append(f", lead {rec['score_lead']:+.1f}")
    parts.append(f"; policy {moves}")
    return "".join(parts)
