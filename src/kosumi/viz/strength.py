"""Strength per byte as a picture: a size-vs-strength table (``engine.strength``) as one figure.

``strength_figure(table, highlight)`` draws each net's Elo against the opponent with its 95%
interval over the net's file size (log scale, smaller files to the left), the names beside the
points (their W-D-L is in the report's table), the level line (Elo 0: as strong as the
opponent) and the 64 KB mark; the net the report is about (``highlight``: its SHA-256) is
drawn filled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kosumi.viz.weights import _figure, _png

GOAL_BYTES = 64 * 1024


def strength_figure(table: dict[str, Any], highlight: str | None = None) -> bytes:
    """``highlight``: the SHA-256 of the file the report is about (or a file name)."""
    rows = table["rows"]
    fig = _figure(8, 4.6)
    ax = fig.add_subplot(1, 1, 1)
    for i, r in enumerate(sorted(rows, key=lambda r: r["bytes"])):
        kb = r["bytes"] / 1024.0
        mine = highlight is not None and highlight in (r.get("sha256"),
                                                       Path(str(r.get("model", ""))).name)
        colour = "#b2182b" if mine else "#2166ac"
        ax.errorbar([kb], [r["elo"]], yerr=[[r["elo"] - r["low"]], [r["high"] - r["elo"]]],
                    fmt="o", color=colour, mfc=colour if mine else "white", capsize=3)
        ax.annotate(r["name"], (kb, r["elo"]), fontsize=7, color=colour, zorder=1,
                    xytext=(-5, 4) if i % 2 else (5, -9), textcoords="offset points",
                    ha="right" if i % 2 else "left")
    ax.axhline(0, color="#555", lw=0.8, ls="--")
    ax.axvline(GOAL_BYTES / 1024.0, color="#1b7837", lw=0.8, ls=":")
    ax.text(GOAL_BYTES / 1024.0, ax.get_ylim()[0], " 64 KB", color="#1b7837", fontsize=7,
            va="bottom")
    ax.set_xscale("log")
    lo, hi = (min(r["bytes"] for r in rows) / 1024.0, max(r["bytes"] for r in rows) / 1024.0)
    ticks = [2.0 ** k for k in range(-2, 16) if lo / 2 <= 2.0 ** k <= hi * 2]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlim(lo / 1.5, hi * 1.8)  # room for the outer labels
    ax.minorticks_off()
    ax.set_xlabel("file size (KB, log scale)")
    ax.set_ylabel(f"Elo against {table.get('opponent') or 'the opponent'} (95% interval)")
    ax.grid(alpha=0.3, which="both")
    size = table.get("board_size")
    fig.suptitle(f"strength per byte{f' on {size}x{size}' if size else ''}: above the dashed "
                 "line = stronger than the opponent (W-D-L in the table)", fontsize=10)
    fig.tight_layout()
    return _png(fig)
