"""GTP analysis commands: their arguments and the ``info`` lines GUIs read.

``lz-analyze`` (Leela Zero / Lizzie / Sabaki): winrate, prior and lcb as integers in units of
1/10000. ``kata-analyze`` (KataGo / Sabaki / KaTrain): floats in [0, 1], plus ``scoreMean`` /
``scoreLead`` when the net predicts a score, and an ``ownership`` block on request. One line per
update holds every root move with visits, best first, each with its principal variation (and,
on request, KataGo's ``pvVisits`` / ``pvEdgeVisits``: each pv node's visits, and those through
the line's own moves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kosumi.engine.mcts import SearchResult
from kosumi.go import gtp
from kosumi.go.gtp import GTPCommandError

#: default analysis interval in centiseconds
DEFAULT_INTERVAL = 100


@dataclass
class AnalyzeOptions:
    color: int | None = None
    interval: float = DEFAULT_INTERVAL / 100.0  # seconds; 0 = only a final line
    max_moves: int = 0  # 0 = all
    ownership: bool = False
    pv_visits: bool = False  # kata-analyze: each pv move's visits (pvVisits)
    pv_edge_visits: bool = False  # ... through the pv's own edges (pvEdgeVisits)


def parse_analyze_args(args: list[str], color_required: bool) -> AnalyzeOptions:
    """``[color] [interval] [key value]...`` (lz-analyze / kata-analyze syntax)."""
    opts = AnalyzeOptions()
    i = 0
    if args and args[0].lower() in ("b", "w", "black", "white"):
        opts.color = gtp.parse_color(args[0])
        i = 1
    elif color_required:
        raise GTPCommandError(gtp.SYNTAX_ERROR)
    if i < len(args) and looks_numeric(args[i]):
        opts.interval = gtp.parse_int(args[i], high=10**9) / 100.0
        i += 1
    while i < len(args):
        key = args[i].lower()
        if i + 1 >= len(args):
            raise GTPCommandError(gtp.SYNTAX_ERROR)
        value = args[i + 1]
        if key == "interval":
            opts.interval = gtp.parse_int(value, high=10**9) / 100.0
        elif key == "maxmoves":
            opts.max_moves = gtp.parse_int(value)
        elif key == "minmoves":
            gtp.parse_int(value)  # accepted; only moves with visits are reported
        elif key == "ownership":
            opts.ownership = parse_bool(value)
        elif key == "pvvisits":
            opts.pv_visits = parse_bool(value)
        elif key == "pvedgevisits":
            opts.pv_edge_visits = parse_bool(value)
        elif key in ("ownershipstdev", "movesownership", "rootinfo"):
            parse_bool(value)  # accepted and ignored
        else:
            raise GTPCommandError(gtp.SYNTAX_ERROR)
        i += 2
    return opts


def info_line(style: str, result: SearchResult, size: int,
               opts: AnalyzeOptions) -> str:
    # the moves searched (a one-visit search lists the raw policy's moves, none searched)
    moves = [m for m in result.moves if m.visits > 0] or result.moves
    moves = moves[: opts.max_moves] if opts.max_moves else moves
    parts = []
    for order, mi in enumerate(moves):
        v = gtp.format_vertex(mi.move, size)
        pv = " ".join(gtp.format_vertex(m, size) for m in (mi.pv or [mi.move]))
        lcb = unit(mi.lcb)  # NaN (a NaN from the net) prints as 0, like the win rate
        if style == "lz":
            parts.append(
                f"info move {v} visits {mi.visits} winrate {permyriad(mi.winrate)}"
                f" prior {permyriad(mi.prior)} lcb {permyriad(lcb)} order {order} pv {pv}"
            )
        else:
            score = ""
            if mi.score_lead is not None and math.isfinite(mi.score_lead):
                score = f" scoreMean {mi.score_lead:.4f} scoreLead {mi.score_lead:.4f}"
            parts.append(
                f"info move {v} visits {mi.visits} winrate {unit(mi.winrate):.6f}{score}"
                f" prior {unit(mi.prior):.6f} lcb {lcb:.6f} order {order} pv {pv}"
                + _counts(" pvVisits", mi.pv_visits, mi.visits, opts.pv_visits)
                + _counts(" pvEdgeVisits", mi.pv_edge_visits, mi.visits, opts.pv_edge_visits)
            )
    if parts and style == "kata" and opts.ownership and result.ownership is not None:
        parts.append("ownership " + " ".join(f"{x:.4f}" for x in result.ownership))
    return " ".join(parts)


def _counts(key: str, counts: list[int], visits: int, asked: bool) -> str:
    """`` pvVisits 12 7 3`` (one count per pv move; a move without a line: its visits)."""
    return f"{key} {' '.join(str(c) for c in (counts or [visits]))}" if asked else ""


def permyriad(x: float) -> int:
    return round(unit(x) * 10000)


def unit(x: float) -> float:
    return min(max(float(x), 0.0), 1.0) if math.isfinite(x) else 0.0


def looks_numeric(token: str) -> bool:
    t = token[1:] if token[:1] in "+-" else token
    return t.isascii() and t.isdigit()


def parse_bool(token: str) -> bool:
    t = token.lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise GTPCommandError(gtp.SYNTAX_ERROR)
