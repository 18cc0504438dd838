"""Strength per byte: each net's matches against one opponent, summed into one table.

    python benchmarks/size_vs_strength.py \
        --net b1c8 runs/tiny/b1c8.kpk 'runs/tiny/strength/b1c8-s*.json' \
        --net b2c16 runs/tiny/b2c16.kpk 'runs/tiny/strength/b2c16-s*.json' ... \
        --out runs/tiny/strength.json

Each ``--net NAME MODEL GLOB`` names a net, its file (the pack that played, whose bytes are the
size) and the ``kosumi match --json`` results in which it was the first engine (the match
commands are in benchmarks/RESULTS.md). Prints the table as JSON (``kosumi.engine.strength``:
W-D-L, as Black and as White, Elo with its 95% interval, parameters, bytes) and writes it to
``--out``, which ``kosumi viz MODEL --strength TABLE`` draws.
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path

from emit import emit

from kosumi.engine.strength import strength_row, write_strength_table
from kosumi.errors import KosumiError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", nargs=3, action="append", required=True,
                    metavar=("NAME", "MODEL", "GLOB"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    try:
        rows = [strength_row(name, model, sorted(glob.glob(pattern)))
                for name, model, pattern in args.net]
        table = write_strength_table(rows, args.out)
    except KosumiError as e:
        print(f"size_vs_strength: {e}", file=sys.stderr)
        return 2
    return emit({"benchmark": "size_vs_strength", **table}, None)


if __name__ == "__main__":
    sys.exit(main())
