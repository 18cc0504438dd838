"""``make demo``: the main job, end to end, with nothing but what the package brings.

Until the distilled default net ships (the distillation issue), the demo bootstraps a tiny
b2c16 net, plays it through kosumi's MCTS engine against GNU Go on 9x9 in the match arena
(SGFs written, games scored by area with GNU Go agreeing on dead stones), and prints a summary.
Output goes to ``runs/demo/``.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from rich.console import Console

from kosumi.engine.match import play_match
from kosumi.nets.checkpoint import save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.resnet import KosumiNet

GNUGO = "/usr/games/gnugo"


def main(out_dir: str = "runs/demo", games: int = 2, visits: int = 32) -> int:
    console = Console()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gnugo = GNUGO if Path(GNUGO).exists() else shutil.which("gnugo")
    if gnugo is None:
        console.print("kosumi demo: GNU Go is missing (apt-get install gnugo)", style="red")
        return 2

    console.rule("kosumi demo")
    config = NetConfig(arch="b2c16", features="basic", head="conv", board_sizes=[9, 13, 19],
                       provenance={"created_by": "kosumi demo", "seed": 1})
    net_path = out / "b2c16.safetensors"
    nbytes = save_checkpoint(net_path, KosumiNet.random(config, seed=1))
    console.print(f"1. bootstrapped {config.describe()}: {nbytes:,} bytes -> {net_path}")

    engine = f"{sys.executable} -m kosumi gtp --model {net_path} --visits {visits} --batch 8"
    console.print(f"2. {games} games on 9x9: kosumi ({visits} visits/move) vs GNU Go level 1")
    t0 = time.perf_counter()
    result = play_match(engine, f"{gnugo} --mode gtp --level 1", games=games, size=9, komi=7.0,
                        swap_colors=True, sgf_dir=out / "games", console=console)
    elapsed = time.perf_counter() - t0
    counts = result.counts()
    console.print(
        f"3. summary: kosumi won {counts['first']['wins']} of {len(result.games)} games "
        f"in {elapsed:.0f} s; Elo {result.elo.elo:+.0f} [{result.elo.low:+.0f}, "
        f"{result.elo.high:+.0f}]; SGFs in {out / 'games'}"
    )
    console.print("   (an untrained net loses: distillation from a teacher is what makes it play)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
