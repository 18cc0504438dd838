"""``kosumi bench``: network evaluations per second, latency and memory, every cell in one run.

A cell is (model, backend, batch, board size). Each cell times the backend's forward pass on
real feature arrays (positions of a seeded random game, encoded once by the net's own feature
set), so the figures are those of the network, not of the encoding or the search. The cells are
interleaved: every round times every cell for ``seconds``, in a rotating order, so that a noisy
machine (another job, a clock change) hurts every row alike; latencies of all rounds are pooled.
Ratios against the first backend of the same model, batch and size are in the same table, and
only they compare across machines.

With ``katago`` (the path of a KataGo engine), every KataGo model of the plan is also timed by
KataGo itself in the same run: its ``benchmark`` command on the same board sizes, one search
thread per batch slot, pinned to one core (``taskset -c 0``, as the plan's one thread), and its
``nnEvals/s`` reported as the row of backend ``katago`` -- the peer -- with the batch its
search actually filled (``katago_avg_batch``: on the CPU its evaluator takes what is queued, so
16 threads fill batches of about 2; KataGo refuses a fixed batch of 16 in this mode).

Peak memory is measured per (model, backend) in a fresh process (``python -m
kosumi.runtime.bench --probe ...``) that loads the model and runs its largest cell: its peak
resident set, and the part of it above the interpreter with kosumi imported.
"""

from __future__ import annotations

import contextlib
import json
import platform
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.runtime.options import LoadOptions

WARMUP_CALLS = 2


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise KosumiError(f"--{what}: {text!r} is not a comma-separated list of integers") from None
    if not values or any(v < 1 for v in values):
        raise KosumiError(f"--{what}: give positive integers, not {text!r}")
    return values


@dataclass
class BenchPlan:
    """What to time (see the module docstring)."""

    models: list[str]
    backends: list[str]
    batches: list[int]
    sizes: list[int]
    threads: int = 1
    device: str | None = None
    precision: str = "auto"
    seconds: float = 0.5
    rounds: int = 5
    memory: bool = True
    seed: int = 0
    katago: str | None = None  # a KataGo engine to time the KataGo models on, as the peer
    katago_config: str | None = None  # its config (default: katago-gtp.cfg beside it)

    @classmethod
    def parse(cls, models: list[str], backends: str, batches: str, sizes: str,
              **kw: Any) -> BenchPlan:
        from kosumi.runtime.backend import BACKENDS

        names = [b.strip() for b in backends.split(",") if b.strip()]
        known = ["auto", *BACKENDS]  # registered backends too (register_backend)
        for b in names:
            name, _, precision = b.partition(":")
            if name not in known:
                raise KosumiError(f"--backend: unknown backend {name!r} (known: "
                                  f"{', '.join(known)})")
            if precision and precision not in ("fp32", "fp16"):
                raise KosumiError(f"--backend {b}: the precision after ':' is fp32 or fp16")
        return cls(models=list(models), backends=names or ["auto"],
                   batches=_ints(batches, "batch"), sizes=_ints(sizes, "size"), **kw)


def bench_states(size: int, count: int, seed: int = 0) -> list[GameState]:
    """``count`` distinct positions of one seeded random game on ``size`` (a game is replayed
    from the start when it ends), for realistic feature planes."""
    rng = random.Random(seed * 1000 + size)
    out: list[GameState] = []
    s = GameState(size)
    while len(out) < count:
        legal = np.flatnonzero(s.legal_mask())
        if len(legal) == 0 or len(s.moves) > size * size:
            s = GameState(size)
            continue
        s.play(int(rng.choice(legal.tolist())))
        if len(s.moves) >= 3:
            out.append(s.copy())
    return out


@dataclass
class _Cell:
    model: str
    backend: str
    batch: int
    size: int
    inputs: tuple[np.ndarray, np.ndarray | None]
    runner: Any
    times: list[float] = field(default_factory=list)


def _open(model: str, backend: str, plan: BenchPlan) -> Any:
    from kosumi.runtime.loader import open_evaluator

    name, _, precision = backend.partition(":")  # "onnxruntime:fp16": that backend's fp16
    options = LoadOptions(backend=name, threads=plan.threads, device=plan.device,
                          precision=precision or plan.precision)
    return open_evaluator(Path(model), options)


def _resolved_backend(model: str, backend: str, plan: BenchPlan) -> str:
    if backend != "auto":
        return backend
    from kosumi.models import resolve_model
    from kosumi.nets.formats import read_model
    from kosumi.runtime.backend import choose_backend

    fmt, ckpt = read_model(resolve_model(model))
    options = LoadOptions(threads=plan.threads, device=plan.device)
    return choose_backend(fmt.name, fmt.native, options, quantized=ckpt.config.quantized)[0]


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version(), "numpy": np.__version__}
    for pkg in ("torch", "onnxruntime", "onnx", "tensorrt"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[pkg] = md.version(pkg)
    return out


def run_bench(plan: BenchPlan, progress: bool = False) -> dict[str, Any]:
    """Time every cell of ``plan``; a JSON-able report (``format_bench`` prints it)."""
    from kosumi.runtime.cpu import cpu_capabilities

    if plan.katago:
        _katago_paths(plan)  # before anything is timed
    pairs: list[tuple[str, str]] = []
    for model in plan.models:
        for b in plan.backends:
            backend = _resolved_backend(model, b, plan)
            if (model, backend) not in pairs:
                pairs.append((model, backend))
    skipped: list[str] = []
    evaluators, opened, cells = _open_cells(plan, pairs, skipped)
    try:
        _time_cells(plan, cells, progress)
    finally:
        for ev in evaluators:
            ev.close()
    memory: dict[tuple[str, str], dict[str, float]] = {}
    if plan.memory:
        for model, backend in opened:
            memory[(model, backend)] = probe_memory(model, backend, plan)
    rows = [_row(cell, memory.get((cell.model, cell.backend))) for cell in cells]
    if plan.katago:
        rows += katago_rows(plan, skipped, progress)
    _add_ratios(rows)
    return {"machine": {"cpu": cpu_capabilities(), "platform": platform.platform(),
                        **_versions()},
            "plan": asdict(plan), "rows": rows, "skipped": skipped}


def _open_cells(plan: BenchPlan, pairs: list[tuple[str, str]], skipped: list[str]
                ) -> tuple[list[Any], list[tuple[str, str]], list[_Cell]]:
    """Open each (model, backend) and encode each (size, batch) cell's inputs; what cannot
    run is noted in ``skipped`` (or raised when it is the only pair)."""
    evaluators: list[Any] = []
    opened: list[tuple[str, str]] = []
    cells: list[_Cell] = []
    for model, backend in pairs:
        try:
            ev = _open(model, backend, plan)
        except KosumiError as e:  # e.g. a plan file asked for on onnxruntime: say, go on
            if len(plan.models) * len(plan.backends) == 1:
                raise
            skipped.append(f"{model} on {backend}: {e}")
            continue
        evaluators.append(ev)
        opened.append((model, backend))
        for size in plan.sizes:
            if not ev.supports_size(size):
                note = f"{model} does not play {size}x{size}"
                if note not in skipped:
                    skipped.append(note)
                continue
            for batch in plan.batches:
                inputs = ev.features.encode(bench_states(size, batch, plan.seed))
                cells.append(_Cell(model, backend, batch, size, inputs, ev.backend))
    return evaluators, opened, cells


def _time_cells(plan: BenchPlan, cells: list[_Cell], progress: bool) -> None:
    """Warm every cell up, then time it for ``plan.seconds`` per round, in a rotating order."""
    from kosumi.progress import progress_bar

    for cell in cells:  # warm-up: first-call allocations, lazy initialisation
        for _ in range(WARMUP_CALLS):
            cell.runner.forward(*cell.inputs)
    with progress_bar(len(cells) * plan.rounds, "bench", unit="cell",
                      enabled=progress) as bar:
        for r in range(plan.rounds):
            k = r % len(cells) if cells else 0
            for cell in cells[k:] + cells[:k]:  # a rotating order, round after round
                end = time.perf_counter() + plan.seconds
                while True:
                    t0 = time.perf_counter()
                    cell.runner.forward(*cell.inputs)
                    t1 = time.perf_counter()
                    cell.times.append(t1 - t0)
                    if t1 >= end:
                        break
                bar.advance(1, info=f"round {r + 1}/{plan.rounds}")


def _katago_paths(plan: BenchPlan) -> tuple[Path, Path]:
    """The KataGo engine and config of the plan; KosumiError naming the option if absent."""
    engine = Path(str(plan.katago))
    if not engine.is_file():
        raise KosumiError(f"--katago: {engine} is not a file (KataGo's engine binary)")
    config = Path(plan.katago_config) if plan.katago_config else \
        engine.parent / "katago-gtp.cfg"
    if not config.is_file():
        raise KosumiError(f"--katago-config: {config} is not a file (a KataGo GTP config)")
    return engine, config


def katago_rows(plan: BenchPlan, skipped: list[str], progress: bool = False
                ) -> list[dict[str, Any]]:
    """KataGo's own evaluation speed for each KataGo model of the plan (see the module
    docstring); a model KataGo cannot read is noted in ``skipped``."""
    import re
    import shutil
    import tempfile

    from kosumi.nets.katago import is_katago_file

    engine, config = _katago_paths(plan)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    rows = []
    for model in plan.models:
        if not Path(model).is_file() or not is_katago_file(model):
            continue
        for size in plan.sizes:
            for batch in plan.batches:
                visits = max(40, 8 * batch)
                with tempfile.TemporaryDirectory() as logs:
                    cmd = [*pin, str(engine), "benchmark", "-model", str(model), "-config",
                           str(config), "-t", str(batch),
                           "-v", str(visits), "-n", "2", "-boardsize", str(size),
                           "-override-config", f"logDir={logs},numEigenThreadsPerModel=1"]
                    try:
                        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                    except (OSError, subprocess.TimeoutExpired) as e:
                        skipped.append(f"KataGo benchmark of {model}: {e}")
                        continue
                found = re.findall(r"nnEvals/s = ([0-9.]+).*?avgBatchSize = ([0-9.]+)",
                                   out.stdout)
                if out.returncode != 0 or not found:
                    tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
                    skipped.append(f"KataGo benchmark of {model} on {size}x{size}: {tail[0]}")
                    continue
                evals, avg_batch = (float(x) for x in found[-1])
                rows.append({"model": model, "backend": "katago", "batch": batch, "size": size,
                             "evals_per_s": round(evals, 1), "katago_avg_batch": avg_batch,
                             "katago_visits": visits})
                if progress:
                    print(f"KataGo {Path(model).name} {size}x{size} batch {batch}: "
                          f"{evals:.1f} evals/s", file=sys.stderr)
    return rows


def _row(cell: _Cell, memory: dict[str, float] | None) -> dict[str, Any]:
    t = np.array(cell.times)
    row: dict[str, Any] = {
        "model": cell.model, "backend": cell.backend, "batch": cell.batch, "size": cell.size,
        "evals_per_s": round(cell.batch * len(t) / float(t.sum()), 1),
        "latency_ms_p50": round(float(np.percentile(t, 50)) * 1e3, 3),
        "latency_ms_p99": round(float(np.percentile(t, 99)) * 1e3, 3),
        "calls": len(t),
    }
    form = getattr(cell.runner, "int8_weights", "int8")  # onnxruntime_backend
    if form != "int8":
        row["int8_weights"] = form
    if memory:
        row.update(memory)
    return row

def _add_ratios(rows: list[dict[str, Any]]) -> None:
    """``x_first``: evals/s over the first backend's for the same model, batch and size."""
    first: dict[tuple[str, int, int], dict[str, Any]] = {}
    for row in rows:
        key = (row["model"], row["batch"], row["size"])
        base = first.setdefault(key, row)
        row["x_first"] = round(row["evals_per_s"] / base["evals_per_s"], 3)
        row["first_backend"] = base["backend"]


#: the line under the table for nets whose int8 weights the backend recoded
FORM_LINES = {
    "uint8": "int8 weights held as uint8 (exact; +-127 would saturate without VNNI)",
    "offset": "int8 weights held with zero point -1 (same integers, ONNX Runtime's AMX kernels)",
}


def format_bench(report: dict[str, Any]) -> str:
    """The report as a rich table (text)."""
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    from kosumi.runtime.cpu import cpu_line

    table = Table(title="kosumi bench: network evaluations (forward pass only)")
    for col in ("model", "backend", "batch", "size", "evals/s", "x first", "p50 ms", "p99 ms",
                "peak MB", "model MB"):
        table.add_column(col, justify="left" if col in ("model", "backend") else "right")
    for r in report["rows"]:
        table.add_row(Path(r["model"]).name, r["backend"], str(r["batch"]), str(r["size"]),
                      f"{r['evals_per_s']:,.1f}", f"{r['x_first']:.2f}",
                      f"{r['latency_ms_p50']:.2f}" if "latency_ms_p50" in r else "-",
                      f"{r['latency_ms_p99']:.2f}" if "latency_ms_p99" in r else "-",
                      f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "-",
                      f"{r['model_rss_mb']:.0f}" if "model_rss_mb" in r else "-")
    buf = StringIO()
    console = Console(file=buf, width=120)
    console.print(table)
    plan = report["plan"]
    console.print(f"cpu: {cpu_line()}; {plan['threads']} thread(s), {plan['rounds']} rounds x "
                  f"{plan['seconds']} s per cell")
    for form, why in FORM_LINES.items():
        names = sorted({Path(r["model"]).name for r in report["rows"]
                        if r.get("int8_weights") == form})
        if names:
            console.print(f"{why}: {', '.join(names)}")
    if any(r["backend"] == "katago" for r in report["rows"]):
        console.print("katago: KataGo's own benchmark (nnEvals/s; one search thread per batch "
                      "slot, pinned to one core; its batches average "
                      + ", ".join(f"{r['katago_avg_batch']:.1f}" for r in report["rows"]
                                  if r["backend"] == "katago") + ")")
    for s in report.get("skipped", []):
        console.print(f"skipped: {s}")
    return buf.getvalue().rstrip()


# ---------------------------------------------------------------------------- memory probe
def _rss_mb() -> tuple[float, float]:
    """(current, peak) resident set of this process in MB, from ``/proc/self/status`` (VmRSS,
    VmHWM: the peak of this program; ``getrusage``'s maxrss would carry the parent's peak over
    fork and exec)."""
    values = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values[key] = int(rest.split()[0]) / 1024.0
    except (OSError, ValueError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        return peak, peak
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def probe_memory(model: str, backend: str, plan: BenchPlan) -> dict[str, float]:
    """Peak memory of a fresh process that loads ``model`` on ``backend`` and runs the plan's
    largest batch at its largest board size the model plays."""
    args = [sys.executable, "-m", "kosumi.runtime.bench", "--probe", model, backend,
            str(max(plan.batches)), ",".join(map(str, plan.sizes)), str(plan.threads),
            plan.device or "cpu", plan.precision]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        return {}
    try:
        peaks: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
        return peaks
    except (ValueError, IndexError):
        return {}


def _probe(model: str, backend: str, batch: int, sizes: str, threads: int, device: str,
           precision: str) -> None:
    base, _ = _rss_mb()
    plan = BenchPlan([model], [backend], [batch], _ints(sizes, "size"), threads=threads,
                     device=None if device == "cpu" else device, precision=precision)
    ev = _open(model, backend, plan)
    size = max((s for s in plan.sizes if ev.supports_size(s)), default=None)
    if size is not None:
        inputs = ev.features.encode(bench_states(size, batch))
        for _ in range(3):
            ev.backend.forward(*inputs)
    _, peak = _rss_mb()
    print(json.dumps({"peak_rss_mb": round(peak, 1), "model_rss_mb": round(peak - base, 1)}))


if __name__ == "__main__":  # the memory probe's entry point
    if len(sys.argv) == 9 and sys.argv[1] == "--probe":
        a = sys.argv[2:]
        _probe(a[0], a[1], int(a[2]), a[3], int(a[4]), a[5], a[6])
    else:
        sys.exit("usage: python -m kosumi.runtime.bench --probe MODEL BACKEND BATCH SIZES "
                 "THREADS DEVICE PRECISION")
