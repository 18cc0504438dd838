"""KataGo's area map (``go.benson.area_map``) in C against the Python algorithm it replaced.

Times both on the positions of a positions folder (replayed) and checks that they agree there
and on random boards of every size and density. Prints JSON.

    python benchmarks/area_map.py runs/tiny/pos9 --positions 2000
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np

from kosumi import accel
from kosumi.distill.positions import PositionStore
from kosumi.go.benson import area_map, area_map_py


def best_time(fn, boards, size: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for b in boards:
            fn(b, size)
        best = min(best, time.perf_counter() - t)
    return best / len(boards)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("positions", help="a positions folder (one board size)")
    ap.add_argument("--positions", dest="count", type=int, default=2000)
    ap.add_argument("--random-boards", type=int, default=4200)
    args = ap.parse_args()
    store = PositionStore(args.positions)
    picked = [p for _, p in store.read_shard(store.shards[0])[: args.count]]
    size = picked[0].board_size
    boards = [bytes(p.to_state().board) for p in picked]
    game_mismatches = sum(not np.array_equal(area_map(b, size), area_map_py(b, size))
                          for b in boards)
    rng = random.Random(1)
    random_mismatches = 0
    for k in range(args.random_boards):
        n = (2, 3, 5, 7, 9, 13, 19)[k % 7]
        density = rng.random()
        b = bytes(rng.choice((0, 1, 2)) if rng.random() < density else 0 for _ in range(n * n))
        suicide = bool(k % 2)
        random_mismatches += not np.array_equal(area_map(b, n, suicide),
                                                area_map_py(b, n, suicide))
    c_us = best_time(area_map, boards, size) * 1e6
    py_us = best_time(area_map_py, boards, size) * 1e6
    print(json.dumps({"implementation": accel.IMPLEMENTATION, "board_size": size,
                      "positions": len(boards), "us_per_board_c": round(c_us, 2),
                      "us_per_board_python": round(py_us, 2), "x_python": round(py_us / c_us, 1),
                      "game_mismatches": game_mismatches, "random_boards": args.random_boards,
                      "random_mismatches": random_mismatches}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
