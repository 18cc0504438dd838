"""Building the dataset cache of a label folder: peak memory (VmHWM) and time.

    PYTHONPATH=src python benchmarks/encode_memory.py LABELS [--features basic] [--size 9]
                                                       [--shards K] [--out FILE]

Encodes the folder's ``--size`` positions for ``--features`` into a fresh, temporary cache
folder with ``kosumi.distill.dataset.load_dataset`` in this process, and reports the positions,
the seconds it took, the cache entry's bytes, and this process's peak resident memory
(``VmHWM`` from ``/proc/self/status``) before and after, and its resident memory after (the
arrays returned are memory-mapped). ``--shards K`` encodes a folder of the first K label shards
only (symbolic links to the shards, a manifest that lists those): the peak should not depend
on K. One JSON object. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from emit import emit

from kosumi.distill.dataset import load_dataset
from kosumi.distill.labels import LabelStore


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _first_shards(labels: Path, k: int, into: Path) -> Path:
    """A label folder of the first ``k`` shards of ``labels`` (links, not copies)."""
    manifest = json.loads((labels / "manifest.json").read_text())
    manifest["shards"] = manifest["shards"][:k]
    into.mkdir()
    for s in manifest["shards"]:
        os.symlink((labels / s["file"]).resolve(), into / s["file"])
    (into / "manifest.json").write_text(json.dumps(manifest))
    return into


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("labels", type=Path)
    ap.add_argument("--features", default="basic")
    ap.add_argument("--size", type=int, default=9)
    ap.add_argument("--shards", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        labels = a.labels
        if a.shards is not None:
            labels = _first_shards(a.labels, a.shards, Path(tmp) / "labels")
        store = LabelStore(labels)
        before = _status_kb("VmHWM")
        t0 = time.perf_counter()
        data = load_dataset(store, a.features, [a.size], cache_dir=Path(tmp) / "cache")
        seconds = time.perf_counter() - t0
        entry = sum(p.stat().st_size for p in (Path(tmp) / "cache").iterdir())
        report = {"labels": str(a.labels), "shards": len(store.dir.shards),
                  "features": a.features, "board_size": a.size,
                  "positions": len(data.sizes[a.size]), "seconds": round(seconds, 2),
                  "cache_bytes": entry, "peak_rss_kb_before": before,
                  "peak_rss_kb": _status_kb("VmHWM"), "rss_kb_after": _status_kb("VmRSS"),
                  "python": sys.version.split()[0]}
    return emit(report, a.out)


if __name__ == "__main__":
    sys.exit(main())
