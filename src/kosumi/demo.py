"""``make demo``: the main job end to end on the embedded default teacher, with no other file.

1. the default teacher (a b6c64 student of KataGo shipped inside the package) plays itself on
   9x9 (raw policy sampled, random openings);
2. it labels those positions (full policy, win/loss/noResult, score, ownership);
3. a tiny b2c16 student is distilled from the labels for a minute or two;
4. a summary: agreement of the student with its teacher on held-out positions, sizes, speeds.

Everything is written under ``runs/demo/`` (a rerun starts afresh). Takes a few minutes on 2 cores.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from kosumi.models import DEFAULT_NAME, resolve_model_for_sizes


def _evals_per_s(model: Path | str, size: int = 9, batch: int = 16, rounds: int = 10) -> float:
    from kosumi.go.board import GameState
    from kosumi.runtime import load_evaluator

    evaluator = load_evaluator(model, cache=False)
    rng = np.random.default_rng(0)
    states = []
    for _ in range(batch):
        s = GameState(size, 7.0)
        for _ in range(20):
            s.play(int(rng.choice(np.flatnonzero(s.legal_mask()))))
        states.append(s)
    evaluator.evaluate(states)  # warm-up
    t0 = time.perf_counter()
    for _ in range(rounds):
        evaluator.evaluate(states)
    return batch * rounds / (time.perf_counter() - t0)


def main(out_dir: str = "runs/demo", games: int = 16, steps: int = 1200) -> int:
    import torch

    from kosumi.distill.labels import label_positions
    from kosumi.distill.selfplay import SelfPlayConfig, run_selfplay
    from kosumi.distill.train import DistillOptions, distill

    torch.set_num_threads(2)
    console = Console()
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    console.rule("kosumi demo: distill the embedded default teacher into a tiny student")
    t_start = time.perf_counter()

    t0 = time.perf_counter()
    config = SelfPlayConfig(size=9, komi=7.0, policy_temperature=1.0, random_opening=3, seed=1)
    stats = run_selfplay(DEFAULT_NAME, out / "positions", games, config, progress=True)
    console.print(f"1. self-play: {games} games of the default teacher on 9x9 -> "
                  f"{stats.positions_added} positions "
                  f"({time.perf_counter() - t0:.0f} s)")

    t0 = time.perf_counter()
    label_positions(DEFAULT_NAME, out / "positions", out / "labels", batch=64, progress=True)
    console.print(f"2. labels: policy, W/L/NR, score, ownership ({time.perf_counter() - t0:.0f} s)")

    t0 = time.perf_counter()
    student = out / "student-b2c16.safetensors"
    result = distill(DistillOptions(
        data=out / "labels", out=student, teacher=DEFAULT_NAME, student="b2c16",
        features="basic", head="conv", steps=steps, batch=64, seed=1, eval_every=steps // 4,
        threads=2, device="cpu", argv=["demo"],
    ))
    console.print(f"3. distilled b2c16 for {result.steps} steps, {result.samples_per_s:.0f} "
                  f"samples/s ({time.perf_counter() - t0:.0f} s); curves: "
                  f"{student.with_suffix('').name}.curves.png")

    val = result.val
    teacher_bytes = resolve_model_for_sizes(DEFAULT_NAME, [9]).stat().st_size  # its 9x9 net
    student_bytes = student.stat().st_size
    table = Table(title="student vs teacher (held-out positions)")
    for col in ("", "teacher (default)", "student b2c16"):
        table.add_column(col)
    table.add_row("top-1 agreement with the teacher", "1", f"{val.get('top1', float('nan')):.3f}")
    table.add_row("top-5 agreement", "1", f"{val.get('top5', float('nan')):.3f}")
    table.add_row("policy KL (nats)", "0", f"{val.get('policy_kl', float('nan')):.3f}")
    table.add_row("value MAE", "0", f"{val.get('value_mae', float('nan')):.3f}")
    table.add_row("file size", f"{teacher_bytes / 1e6:.2f} MB", f"{student_bytes / 1e3:.0f} kB")
    table.add_row("evals/s (9x9, batch 16, CPU)", f"{_evals_per_s(DEFAULT_NAME):.0f}",
                  f"{_evals_per_s(student):.0f}")
    console.print(table)
    console.print(f"done in {time.perf_counter() - t_start:.0f} s; everything is in {out}/ "
                  f"(play it: kosumi gtp --model {student})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
