"""Strength per byte: several nets' matches against one opponent, as one size-vs-strength table.

``strength_row(name, model, matches)`` sums the games of ``kosumi match --json`` files in which
the net was the first engine (any number of matches, colours swapped or not), counting from the
games themselves: wins, draws, losses, as Black and as White, forfeits, and the first engine's
Elo with its 95% interval (``engine.elo``). The row carries the net's size: its file's bytes and
parameter count. The opponent is named as its engine label without ``--seed``, since matches
usually differ by the seed alone. ``write_strength_table`` / ``read_strength_table`` keep the
rows as JSON::

    {"format": "kosumi-strength", "version": 1, "opponent": "...", "board_size": 9,
     "rows": [{"name", "model", "sha256", "arch", "params", "bytes", "games", "wins", "draws",
               "losses", "black": [w, l], "white": [w, l], "forfeits", "score", "elo", "low",
               "high", "capped", "matches"}, ...]}

``kosumi viz --strength TABLE.json`` draws it (strength against bytes), and
``benchmarks/size_vs_strength.py`` writes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from kosumi.engine.elo import elo_estimate
from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write, output_errors
from kosumi.models import resolve_model_for_sizes

FORMAT, VERSION = "kosumi-strength", 1
_SEED = re.compile(r"\s*--seed\s+\S+")  # matches differ by the opponent's seed only
ROW_KEYS = ("name", "bytes", "games", "wins", "draws", "losses", "elo", "low", "high")


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise KosumiError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    except ValueError as e:
        raise KosumiError(f"{path}: not a {what} (JSON: {e})") from None


def _read_match(path: Path) -> dict[str, Any]:
    data = _read_json(path, "match result")
    if not isinstance(data, dict) or not isinstance(data.get("games"), list):
        raise KosumiError(f"{path}: not a match result (no 'games' list; write it with "
                          "kosumi match --json)")
    return data


def _count(matches: list[str | os.PathLike[str]]) -> dict[str, Any]:
    """The first engine's games of ``matches``, counted from the games themselves."""
    out: dict[str, Any] = {"wins": 0, "draws": 0, "losses": 0, "forfeits": 0,
                           "black": [0, 0], "white": [0, 0]}  # colour: [wins, losses]
    opponents: list[str] = []
    size = None
    for m in matches:
        data = _read_match(Path(m))
        label = _SEED.sub("", str(data.get("second") or "the opponent")).strip()
        if label not in opponents:
            opponents.append(label)
        size = size or data.get("size")
        for g in data["games"]:
            color, winner = g.get("first_color"), g.get("winner")
            if color not in ("B", "W"):
                raise KosumiError(f"{m}: game {g.get('index')}: no first_color")
            out["forfeits"] += g.get("forfeit") is not None
            side = out["black" if color == "B" else "white"]
            if winner is None:
                out["draws"] += 1
            elif winner == color:
                out["wins"] += 1
                side[0] += 1
            else:
                out["losses"] += 1
                side[1] += 1
    out["opponent"], out["board_size"] = " / ".join(opponents), size
    return out


def strength_row(name: str, model: str | os.PathLike[str],
                 matches: list[str | os.PathLike[str]]) -> dict[str, Any]:
    """One net's row: the games of its matches (it is each match's first engine) summed."""
    from kosumi.nets.describe import describe_checkpoint_parts
    from kosumi.nets.formats import read_model_file

    if not matches:
        raise KosumiError(f"{name}: no match results given")
    counts = _count(matches)
    size = counts.get("board_size")  # a model set: the net that played this size
    file = resolve_model_for_sizes(model, [int(size)] if size else [])
    fmt, ckpt = read_model_file(file)
    elo = elo_estimate(counts["wins"], counts["draws"], counts["losses"])
    return {"name": name, "model": str(model),
            "sha256": hashlib.sha256(file.read_bytes()).hexdigest(), "arch": ckpt.config.arch,
            "params": describe_checkpoint_parts(ckpt.config, ckpt.tensors,
                                                fmt.name)["parameters"],
            "bytes": file.stat().st_size, "games": elo.games, **counts,
            "score": round(elo.score, 4), "elo": round(elo.elo, 1), "low": round(elo.low, 1),
            "high": round(elo.high, 1), "capped": elo.capped,
            "matches": [str(m) for m in matches]}


def write_strength_table(rows: list[dict[str, Any]], out: str | os.PathLike[str]) -> dict[str, Any]:
    """The table of ``rows`` (smallest file first), written atomically."""
    opponents = {r.get("opponent") for r in rows}
    table = {"format": FORMAT, "version": VERSION,
             "opponent": " / ".join(sorted(str(o) for o in opponents)),
             "board_size": rows[0].get("board_size") if rows else None,
             "rows": sorted(rows, key=lambda r: (r["bytes"] or 0, r["name"]))}
    with output_errors(out):
        atomic_write(out, (json.dumps(table, indent=1) + "\n").encode())
    return table


def read_strength_table(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A table written by ``write_strength_table``; KosumiError naming the file and field."""
    path = Path(path)
    data = _read_json(path, "strength table")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise KosumiError(f"{path}: not a strength table (format is not {FORMAT!r}; write it "
                          "with benchmarks/size_vs_strength.py)")
    if int(data.get("version", 0)) > VERSION:
        raise KosumiError(f"{path}: strength table version {data.get('version')} is newer than "
                          f"this kosumi reads ({VERSION})")
    rows = data.get("rows")
    if not isinstance(rows, list) or not rows:
        raise KosumiError(f"{path}: strength table has no rows")
    for i, row in enumerate(rows):
        missing = [k for k in ROW_KEYS if not isinstance(row, dict) or row.get(k) is None]
        if missing:
            raise KosumiError(f"{path}: rows[{i}]: missing {', '.join(missing)}")
    return data
