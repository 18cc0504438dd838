"""Self-play: the teacher plays itself, and every position of its games becomes a position.

Each game is played either by MCTS (``visits`` playouts per move, Dirichlet noise on the root
priors, visit-count sampling at temperature 1 for the first moves after the opening) or by
sampling the teacher's raw policy raised to ``1 / policy_temperature`` (0 = always the most
likely move). The first ``random_opening`` moves are uniformly random legal points, for
diversity. Game ``i`` of seed ``s`` draws all its randomness from ``numpy.random.default_rng([s,
i])``, so a game depends only on (seed, number, teacher, settings), not on the worker that
plays it or on the order in which games finish.

Output folder ``DIR``:

- ``DIR/sgf/seed<s>-game<i:06d>.sgf``: every finished game, written atomically the moment it
  ends (by the worker that played it), with the area score as RE when the game ended by passes
  (a game also ends, without a result, at ``--max-moves`` or when a position comes back a third
  time: a cycle under simple ko);
- the positions of every game (``kosumi.distill.positions``: shards + manifest, deduplicated up
  to symmetry), written by the main process in shards; the manifest's ``games`` field records
  the stored game numbers per seed, and ``selfplay`` the settings of each seed.

Resuming: a rerun with the same seed plays only the games that have no SGF yet, and first
stores the positions of games that have an SGF but are not yet in a shard (a run killed between
the two). A rerun with the same seed but other settings is refused (one line naming the field).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.distill.positions import PositionWriter
from kosumi.distill.teacher_jobs import TeacherJobs
from kosumi.errors import KosumiError
from kosumi.go.board import GameState, Rules, default_komi
from kosumi.go.coords import PASS, RESIGN, check_size
from kosumi.runtime.evaluator import Evaluator

SGF_FOLDER = "sgf"
DEFAULT_VISITS = 64


@dataclass(frozen=True)
class SelfPlayConfig:
    """How the teacher plays itself (see the module docstring)."""

    size: int = 9
    komi: float | None = None  # None: go.board.default_komi(size)
    rules: str = "chinese"
    visits: int | None = None  # MCTS playouts per move; None: policy sampling
    policy_temperature: float = 1.0  # with visits=None: sample policy ** (1 / T); 0 = argmax
    random_opening: int = 0  # the first K moves are uniformly random legal points
    seed: int = 0
    max_moves: int | None = None  # stop a game after this many moves (default 2 * N * N)
    batch: int = 8  # MCTS leaves per evaluation
    dirichlet_alpha: float | None = None  # MCTS root noise (default 0.03 * 361 / N^2)
    noise_fraction: float = 0.25
    temperature_moves: int | None = None  # MCTS moves sampled by visits after the opening
    #                                       (default N * N / 12)

    def __post_init__(self) -> None:
        if self.komi is None:
            object.__setattr__(self, "komi", default_komi(self.size))

    def validate(self) -> None:
        try:
            check_size(self.size)
            Rules.named(self.rules)
        except ValueError as e:
            raise KosumiError(str(e)) from None
        if self.visits is not None and self.visits < 1:
            raise KosumiError(f"--visits must be at least 1, not {self.visits}")
        if self.policy_temperature < 0:
            raise KosumiError(f"--policy-temperature must be >= 0, not {self.policy_temperature}")
        if self.random_opening < 0:
            raise KosumiError(f"--random-opening must be >= 0, not {self.random_opening}")
        if self.max_moves is not None and self.max_moves < 1:
            raise KosumiError(f"--max-moves must be at least 1, not {self.max_moves}")

    @property
    def move_limit(self) -> int:
        return self.max_moves or 2 * self.size * self.size

    @property
    def id_prefix(self) -> str:
        return f"seed{self.seed}"

    def game_name(self, index: int) -> str:
        return f"seed{self.seed}-game{index:06d}"

    def settings(self) -> dict[str, Any]:
        """What must match for a rerun of the same seed to continue it."""
        d = asdict(self)
        d.pop("seed")
        return d

    def describe(self) -> str:
        how = (f"MCTS {self.visits} visits" if self.visits
               else f"policy sampling T={self.policy_temperature:g}")
        return f"{how}, random opening {self.random_opening} moves"


# ---------------------------------------------------------------------------- one game
def _sample_policy(policy: np.ndarray, temperature: float, rng: np.random.Generator,
                   size: int) -> int:
    p = policy.astype(np.float64)
    if temperature <= 0 or not np.isfinite(p).all() or p.sum() <= 0:
        i = int(np.argmax(p))
    else:
        w = np.where(p > 0, p, 0.0) ** (1.0 / temperature)
        if not np.isfinite(w).all() or w.sum() <= 0:
            i = int(np.argmax(p))
        else:
            i = int(rng.choice(len(w), p=w / w.sum()))
    return PASS if i == size * size else i


def play_game(evaluator: Evaluator, config: SelfPlayConfig, index: int) -> GameState:
    """Play game ``index`` of ``config.seed``: the teacher against itself (see the module
    docstring). Returns the final state (its ``moves`` are the game)."""
    from kosumi.engine.mcts import MCTS, SearchConfig

    n = config.size
    rng = np.random.default_rng([int(config.seed) & (2**63 - 1), int(index)])
    assert config.komi is not None  # SelfPlayConfig fills in the default
    state = GameState(n, config.komi, config.rules)
    mcts = None
    if config.visits:
        alpha = config.dirichlet_alpha
        if alpha is None:
            alpha = 0.03 * 361 / (n * n)
        temp_moves = config.temperature_moves
        if temp_moves is None:
            temp_moves = max(1, n * n // 12)
        mcts = MCTS(evaluator, SearchConfig(
            visits=config.visits, batch=config.batch, dirichlet_alpha=alpha,
            noise_fraction=config.noise_fraction, temperature=1.0,
            temperature_moves=config.random_opening + temp_moves,
            seed=int(rng.integers(2**62)),
        ))
    while not state.is_game_over() and len(state.moves) < config.move_limit:
        if len(state.moves) < config.random_opening:
            legal = np.flatnonzero(state.legal_mask())
            move = int(rng.choice(legal)) if len(legal) else PASS
        elif mcts is not None:
            move, _ = mcts.genmove(state)
            if move == RESIGN:  # resigning is disabled (threshold 0); never play it
                move = PASS
        else:
            ev = evaluator.evaluate([state])[0]
            move = _sample_policy(ev.policy, config.policy_temperature, rng, n)
        state.play(move)
        if state.repetitions() >= 2:  # a cycle under simple ko: it would repeat forever
            break
    return state


def save_selfplay_sgf(path: Path, state: GameState, config: SelfPlayConfig, index: int,
                      teacher_name: str) -> None:
    from kosumi.go.sgf import format_result, save_game

    result = format_result(state.area_score()) if state.is_game_over() else None
    comment = (f"kosumi selfplay: seed {config.seed}, game {index}, teacher {teacher_name}, "
               f"{config.describe()}")
    save_game(path, state, result=result, black=teacher_name, white=teacher_name,
              comments={0: comment})


# ---------------------------------------------------------------------------- workers
def _unit_play(evaluator: Evaluator, job: tuple[SelfPlayConfig, int]) -> GameState:
    """A game on a worker (``TeacherJobs``): the driver writes its SGF and positions."""
    config, index = job
    return play_game(evaluator, config, index)


# ---------------------------------------------------------------------------- a run
@dataclass
class SelfPlayStats:
    games_played: int = 0  # by this run
    games_recovered: int = 0  # had an SGF but no positions yet
    games_before: int = 0  # already complete before this run
    positions_added: int = 0
    duplicates: int = 0
    backend: str = ""  # the backend the teacher ran on


def run_selfplay(
    teacher: str | os.PathLike[str] | Evaluator,
    out: str | os.PathLike[str],
    games: int,
    config: SelfPlayConfig,
    *,
    workers: int | None = 1,
    threads: int = 1,
    symmetries: int = 1,
    backend: str = "auto",
    device: str | None = None,
    shard_size: int | None = None,
    progress: bool = False,
    ray: str | None = None,
) -> SelfPlayStats:
    """Play games 0..``games``-1 of ``config.seed`` into ``out`` (resumable; see the module
    docstring). ``teacher`` is a model file, or an Evaluator (then ``workers`` must be 1).
    ``ray``: play on Ray actors (``distill.cluster``: "local", "auto" or a head's address;
    ``workers`` actors, None = the cluster's CPUs // threads): the same games, written here."""
    from kosumi.distill.positions import DEFAULT_SHARD_SIZE

    config.validate()
    if games < 0:
        raise KosumiError(f"--games must be >= 0, not {games}")
    with TeacherJobs.open(teacher, sizes=[config.size], where=f"--size {config.size}",
                          caller="run_selfplay", symmetries=symmetries, threads=threads,
                          backend=backend, device=device, workers=workers, ray=ray) as jobs:
        stats = SelfPlayStats(backend=jobs.backend_label)
        out = Path(out)
        with PositionWriter(out, shard_size=shard_size or DEFAULT_SHARD_SIZE) as writer:
            _record_settings(writer, config, {**config.settings(), "teacher": jobs.identity})
            games_out = _SelfPlayGames(writer, out / SGF_FOLDER, config, jobs.identity["name"],
                                       stats)
            todo = games_out.recover(games)
            _play_games(jobs, games_out, todo, games, progress)
    return stats


def _record_settings(writer: PositionWriter, config: SelfPlayConfig,
                     settings: dict[str, Any]) -> None:
    """Record the run's settings under its seed, or check them against those recorded."""
    recorded = writer.dir.manifest.setdefault("selfplay", {})
    old = recorded.get(config.id_prefix)
    if old is None:
        recorded[config.id_prefix] = settings
        writer.dir.save_manifest()
        return
    for field_name, value in settings.items():
        if old.get(field_name) != value:
            raise KosumiError(
                f"{writer.dir.manifest_path}: field 'selfplay.{config.id_prefix}."
                f"{field_name}' is {old.get(field_name)!r}, not {value!r} (continue "
                "with the same settings, or use another --seed or --out)")


class _SelfPlayGames:
    """The games of one seed in a positions folder: each as an SGF, then its positions."""

    def __init__(self, writer: PositionWriter, sgf_dir: Path, config: SelfPlayConfig,
                 teacher_name: str, stats: SelfPlayStats) -> None:
        self.writer, self.sgf_dir, self.config = writer, sgf_dir, config
        self.teacher_name, self.stats = teacher_name, stats
        assert config.komi is not None  # SelfPlayConfig fills in the default
        self.start = GameState(config.size, config.komi, config.rules)
        try:
            sgf_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KosumiError(f"{sgf_dir}: cannot create ({e.strerror or e})") from None

    def sgf_path(self, index: int) -> Path:
        return self.sgf_dir / f"{self.config.game_name(index)}.sgf"

    def store(self, index: int, moves: Sequence[tuple[int, int]]) -> None:
        w = self.writer
        before = w.stats.added, w.stats.duplicates
        w.add_game(self.start, moves, f"selfplay:{self.config.game_name(index)}",
                   game_id=(self.config.id_prefix, index))
        self.stats.positions_added += w.stats.added - before[0]
        self.stats.duplicates += w.stats.duplicates - before[1]

    def finish(self, index: int, state: GameState) -> None:
        """A game just played: its SGF, then its positions."""
        save_selfplay_sgf(self.sgf_path(index), state, self.config, index, self.teacher_name)
        self.store(index, state.moves)
        self.stats.games_played += 1

    def recover(self, games: int) -> list[int]:
        """Store the positions of games that have an SGF but none yet (a run killed between
        the two); the indices still to play."""
        from kosumi.go.sgf import load_game

        done = self.writer.done_games(self.config.id_prefix)
        self.stats.games_before = len([i for i in done if i < games])
        todo = []
        for index in range(games):
            if index in done:
                continue
            path = self.sgf_path(index)
            if path.exists():  # finished, but killed before its positions were stored
                self.store(index, load_game(path, self.config.rules).moves)
                self.stats.games_recovered += 1
            else:
                todo.append(index)
        return todo


def _play_games(jobs: TeacherJobs, games_out: _SelfPlayGames, todo: list[int], games: int,
                progress: bool) -> None:
    from kosumi.progress import progress_bar

    stats = games_out.stats
    with progress_bar(games, "self-play", unit="games", enabled=progress,
                      completed=games - len(todo)) as bar:
        def played(index: int, state: GameState) -> None:
            games_out.finish(index, state)
            bar.advance(1, info=f"{stats.positions_added:,} positions")

        def on_workers(n: int, total: int) -> None:
            bar.advance(0, info=f"{stats.positions_added:,} positions, {n}/{total} workers")

        jobs.run(todo, lambda i: (games_out.config, i), _unit_play, played,
                 on_workers=on_workers)
