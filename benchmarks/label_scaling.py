"""Labelling on 1 and 2 workers, the local process pool against Ray: labels/s and efficiency.

    python benchmarks/label_scaling.py [--games 40] [--chunk 256] [--teacher KATAGO]

The positions are ``--games`` 9x9 self-play games of the teacher (raw policy at temperature 1,
3 random opening moves, seed 1). Each configuration labels them into a fresh folder with
``kosumi.distill.labels.label_positions`` (batch 64, 1 thread per worker, ``--chunk``
positions per unit): the local pool with 1 and 2 workers, then Ray (``--ray local``) with 1
and 2 actors. Wall times include starting the workers (and, for Ray, the local Ray instance:
its start-up alone is timed too). Efficiency = rate(2) / (2 * rate(1)); Ray's overhead per unit
= (Ray's time - Ray's start-up - the pool's time) / units, with one worker each. Every folder is
checked to be byte-identical to the first. One JSON object.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from emit import emit

from kosumi.distill.labels import label_positions
from kosumi.distill.selfplay import SelfPlayConfig, run_selfplay

ROOT = Path(__file__).resolve().parents[1]
KATAGO = ROOT.parent / "shared" / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"


def ray_startup(workers: int) -> float:
    """Seconds to start a local Ray instance and have ``workers`` actors answer."""
    import ray

    t = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
             configure_logging=False)

    @ray.remote(num_cpus=1)
    class Ping:
        def ping(self) -> int:
            return os.getpid()

    ray.get([a.ping.remote() for a in [Ping.remote() for _ in range(workers)]])
    took = time.perf_counter() - t
    ray.shutdown()
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--teacher", type=Path, default=KATAGO)
    ap.add_argument("--games", type=int, default=40)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = Path(tempfile.mkdtemp(prefix="kosumi-scaling-"))
    config = SelfPlayConfig(size=9, komi=7.0, policy_temperature=1.0, random_opening=3, seed=1)
    run_selfplay(str(args.teacher), tmp / "positions", args.games, config, workers=2)
    runs = []
    first = None
    for mode, workers in (("pool", 1), ("pool", 2), ("ray", 1), ("ray", 2)):
        out = tmp / f"{mode}{workers}"
        t = time.perf_counter()
        stats = label_positions(str(args.teacher), tmp / "positions", out, batch=64,
                                chunk_size=args.chunk, workers=workers,
                                ray="local" if mode == "ray" else None)
        took = time.perf_counter() - t
        first = first or out
        names = sorted(p.name for p in first.iterdir())
        same = names == sorted(p.name for p in out.iterdir()) and all(
            (first / n).read_bytes() == (out / n).read_bytes() for n in names)
        runs.append({"mode": mode, "workers": workers, "positions": stats.labelled,
                     "units": stats.shards, "seconds": round(took, 2),
                     "labels_per_s": round(stats.labelled / took, 1), "identical": same})
    rate = {(r["mode"], r["workers"]): r["labels_per_s"] for r in runs}
    secs = {(r["mode"], r["workers"]): r["seconds"] for r in runs}
    startup = ray_startup(1)
    units = runs[0]["units"]
    report = {
        "benchmark": "label_scaling", "teacher": args.teacher.name, "cpus": os.cpu_count(),
        "runs": runs,
        "efficiency": {m: round(rate[(m, 2)] / (2 * rate[(m, 1)]), 3) for m in ("pool", "ray")},
        "ray_startup_s": round(startup, 2),
        "ray_overhead_per_unit_s": round((secs[("ray", 1)] - startup - secs[("pool", 1)])
                                         / max(1, units), 4),
    }
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
