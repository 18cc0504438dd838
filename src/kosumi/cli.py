"""The ``kosumi`` command line: one Typer app. Each command parses options, calls one library
function and prints; errors a user can cause are one line on stderr and exit code 2."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import typer

from kosumi.cli_models import (
    bench_command,
    export_command,
    inspect_command,
    quantize_command,
    viz_command,
)
from kosumi.cli_options import (
    backend_name,
    backend_option,
    device_option,
    fail,
    komi_option,
    precision_option,
    ray_option,
    symmetries_option,
    threads_option,
    workers_option,
)
from kosumi.errors import KosumiError, Terminated
from kosumi.extras import missing_extra

app = typer.Typer(
    name="kosumi",
    help="Distill large Go networks into tiny, fast, quantized ones and play with them anywhere.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# ----------------------------------------------------------------------------- init (nets)
@app.command("init")
def init_command(
    out: Path = typer.Option(..., "--out", help="Checkpoint file to write (safetensors)."),
    arch: str = typer.Option("b6c64", "--arch", help="Blocks x channels, e.g. b6c64."),
    features: str = typer.Option("basic", "--features",
                                 help="Feature set: basic, basic_ladder, lz18."),
    head: str = typer.Option("conv", "--head", help="Head style: conv (any size) or lz."),
    board_sizes: str | None = typer.Option(
        None, "--board-sizes", help="Comma-separated sizes (default 9,13,19; lz: 19)."
    ),
    value: str | None = typer.Option(None, "--value", help="wdl or tanh (default: wdl; lz: tanh)."),
    score_lead: bool | None = typer.Option(
        None, "--score-lead/--no-score-lead", help="Score-lead output (default: on; lz: off)."
    ),
    ownership: bool | None = typer.Option(
        None, "--ownership/--no-ownership", help="Ownership output (default: on; lz: off)."
    ),
    seed: int = typer.Option(0, "--seed", help="Random seed (the same seed gives the same net)."),
) -> None:
    """Write a randomly initialised network (a starting point for distillation, or a test net)."""
    from kosumi.nets.checkpoint import save_checkpoint
    from kosumi.nets.config import NetConfig, parse_board_sizes
    from kosumi.nets.resnet import KosumiNet

    lz = head == "lz"
    try:
        config = NetConfig(
            arch=arch,
            features=features,
            head=head,
            board_sizes=parse_board_sizes(board_sizes or ("19" if lz else "9,13,19")),
            value=value or ("tanh" if lz else "wdl"),
            score_lead=(not lz) if score_lead is None else score_lead,
            ownership=(not lz) if ownership is None else ownership,
            provenance={"created_by": "kosumi init", "seed": seed, "argv": sys.argv[1:]},
        )
        net = KosumiNet.random(config, seed)
        nbytes = save_checkpoint(out, net)
    except KosumiError as e:
        fail(str(e))
    except OSError as e:
        fail(f"{out}: cannot write ({e.strerror or e})")
    typer.echo(f"wrote {out}: {config.describe()}; {net.num_parameters():,} parameters, "
               f"{nbytes:,} bytes")


# ----------------------------------------------------------------------------- analyze (runtime)
@app.command("analyze")
def analyze_command(
    model: Path = typer.Option(
        ..., "--model", help="Model file (any format) or 'default' / 'tiny'."),
    moves: str | None = typer.Option(
        None, "--moves", help='Moves from the empty board, e.g. "B D4 W Q16 B pass".'
    ),
    size: int = typer.Option(19, "--size", help="Board size for --moves."),
    komi: float | None = komi_option("Komi for --moves (default: 7.0 on 9x9, 7.5 above)."),
    sgf: Path | None = typer.Option(None, "--sgf", help="SGF game to analyse."),
    move: int | None = typer.Option(
        None, "--move", min=0, help="With --sgf: the position after this many moves (default: end)."
    ),
    positions: Path | None = typer.Option(
        None, "--positions", help="JSON Lines positions (id, board_size, komi, moves)."
    ),
    rules: str = typer.Option("chinese", "--rules", help="chinese, tromp-taylor or positional."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per position."),
    backend: str = backend_option(),
    device: str = device_option(),
    threads: int = threads_option(),
    symmetries: int = symmetries_option(),
    precision: str = precision_option(),
) -> None:
    """Print a network's raw output (policy, winrate, score lead, ownership) without search."""
    import json

    from kosumi.runtime.analyze import (
        analysis_line,
        analyze,
        position_from_moves,
        position_from_sgf,
        read_queries,
    )
    from kosumi.runtime.loader import load_evaluator

    if sum(x is not None for x in (moves, sgf, positions)) != 1:
        fail("give exactly one of --moves, --sgf, --positions")
    try:
        if moves is not None:
            todo = [position_from_moves(moves, size, komi, rules)]
        elif sgf is not None:
            todo = [position_from_sgf(sgf, move, rules)]
        else:
            assert positions is not None  # exactly one of the three, checked above
            todo = read_queries(positions, rules)
        evaluator = load_evaluator(model, backend=backend, threads=threads, cache=False,
                                   symmetries=symmetries, device=device, precision=precision)
        if not as_json:
            for n in sorted({q.state.size for q in todo}):
                evaluator.supports_size(n)  # a model set opens the net of each size here
            typer.echo(f"# {evaluator.name} on {backend_name(evaluator)}")
        for rec in analyze(evaluator, todo):
            if as_json:
                typer.echo(json.dumps(rec, separators=(",", ":")))
            else:
                typer.echo(analysis_line(rec))
    except KosumiError as e:
        fail(str(e))


# ----------------------------------------------------------------------------- gtp (engine)
@app.command("gtp")
def gtp_command(
    model: str = typer.Option(..., "--model", help="Model file (any format), 'default', 'tiny', or "
                              "'uniform' (no network)."),
    visits: int = typer.Option(
        200, "--visits", min=1,
        help="Visits per move, counted like KataGo's maxVisits (1: the raw policy's move)."),
    batch: int = typer.Option(8, "--batch", min=1, help="Leaves evaluated together."),
    backend: str = backend_option(),
    device: str = device_option(),
    threads: int = threads_option(),
    symmetries: int = symmetries_option(),
    precision: str = precision_option(),
    time_per_move: float | None = typer.Option(
        None, "--time-per-move", min=0.0, help="Seconds per move when no clock is set."
    ),
    resign_threshold: float = typer.Option(
        0.05, "--resign-threshold",
        help="Resign when the win rate stays below this for --resign-moves of its moves in a "
             "row, out of the opening (0: never).",
    ),
    resign_moves: int = typer.Option(
        3, "--resign-moves", min=1, help="Own moves in a row below the resign threshold."),
    seed: int | None = typer.Option(None, "--seed", help="Random seed."),
    temperature: float = typer.Option(
        0.0, "--temperature", min=0.0,
        help="Early-game move-choice temperature on the play-selection weights (0: best move).",
    ),
    temperature_moves: int = typer.Option(
        0, "--temperature-moves", min=0,
        help="Game moves the temperature applies to (without --temperature-halflife).",
    ),
    temperature_late: float = typer.Option(
        0.0, "--temperature-late", min=0.0, help="The temperature after the opening."),
    temperature_halflife: float = typer.Option(
        0.0, "--temperature-halflife", min=0.0,
        help="Decay the temperature to --temperature-late, halving every H moves (on 19x19, "
             "scaled by 19/N): KataGo's schedule is 0.5, 0.1, 19.",
    ),
    settings: list[str] = typer.Option(
        [], "--set", help="Any search setting, NAME=VALUE (repeatable; see docs/SEARCH.md)."),
) -> None:
    """Play and analyse over GTP on stdin/stdout (for GUIs, match runners and servers)."""
    from kosumi.engine.gtp_engine import GTPEngine, load_model
    from kosumi.engine.mcts import SearchConfig

    try:
        if not 0.0 <= resign_threshold < 1.0:
            raise KosumiError(f"--resign-threshold must be in [0, 1) (got {resign_threshold:g})")
        config = SearchConfig(
            visits=visits, batch=batch, resign_threshold=resign_threshold,
            resign_consecutive=resign_moves, seed=seed, temperature=temperature,
            temperature_moves=temperature_moves, temperature_late=temperature_late,
            temperature_halflife=temperature_halflife,
        ).with_settings(settings)
        evaluator = load_model(model, threads=threads, backend=backend, device=device,
                               symmetries=symmetries, precision=precision, announce=True)
    except KosumiError as e:
        fail(str(e))
    GTPEngine(evaluator, config, time_per_move=time_per_move).run()


# ----------------------------------------------------------------------------- match (arena)
@app.command("match")
def match_command(
    black: str = typer.Option(..., "--black", help="First engine's GTP command (Black in game 1)."),
    white: str = typer.Option(..., "--white", help="Second engine's GTP command."),
    games: int = typer.Option(2, "--games", min=1, help="Number of games."),
    size: int = typer.Option(9, "--size", help="Board size."),
    komi: float | None = komi_option(),
    swap_colors: bool = typer.Option(False, "--swap-colors", help="Alternate colours per game."),
    sgf_dir: Path | None = typer.Option(None, "--sgf-dir", help="Write each game as SGF here."),
    move_timeout: float = typer.Option(60.0, "--move-timeout", help="Seconds per GTP answer."),
    sprt_text: str | None = typer.Option(
        None, "--sprt", help="'elo0,elo1': stop when the SPRT (alpha=beta=0.05) decides."
    ),
    max_moves: int | None = typer.Option(
        None, "--max-moves", help="Stop and score a game after this many moves (default 3*N*N)."
    ),
    referee: str = typer.Option(
        "/usr/games/gnugo --mode gtp --chinese-rules", "--referee",
        help="GTP command whose final_score is a finished game's result ('none': kosumi's "
             "plain Tromp-Taylor count).",
    ),
    concurrency: int = typer.Option(
        1, "--concurrency", min=1,
        help="Games played at a time, each with its own engines; '{lane}' in a command is "
             "the lane's number (e.g. --seed 1{lane}).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
    openings: Path | None = typer.Option(
        None, "--openings",
        help="A book of openings, one per line (GTP vertices, Black first): game pair i starts "
             "from opening i, once with each colour (with --swap-colors).",
    ),
) -> None:
    """Play a match between two GTP engines, refereed by kosumi, scored by the referee."""
    import json

    from rich.console import Console

    from kosumi.engine.elo import parse_sprt
    from kosumi.engine.match import play_match
    from kosumi.engine.openings import read_openings

    book = None if openings is None else read_openings(openings, size)
    sprt = None
    if sprt_text is not None:
        try:
            sprt = parse_sprt(sprt_text)
        except ValueError as e:
            raise KosumiError(str(e)) from None
    result = play_match(
        black, white, games, size=size, komi=komi, swap_colors=swap_colors, sgf_dir=sgf_dir,
        move_timeout=move_timeout, sprt=sprt, max_moves=max_moves,
        referee_cmd=None if referee.strip().lower() in ("", "none") else referee,
        progress=True, console=Console(stderr=json_out), concurrency=concurrency,
        openings=book, keep_on_stop=True,
    )
    if json_out:
        typer.echo(json.dumps(result.to_dict(), indent=2))
    if result.stopped_by is not None:  # the finished games are out; exit as main() would
        typer.echo(f"kosumi: {result.stopped_by}", err=True)
        raise typer.Exit(130 if result.stopped_by == "interrupted" else 143)



# ----------------------------------------------------------------------------- model files
app.command("export")(export_command)
app.command("inspect")(inspect_command)
app.command("bench")(bench_command)
app.command("quantize")(quantize_command)
app.command("viz")(viz_command)


# ----------------------------------------------------------------------------- distill data
@app.command("selfplay")
def selfplay_command(
    model: Path = typer.Option(..., "--model", help="Teacher model file (any format)."),
    games: int = typer.Option(..., "--games", min=0, help="Games to have for this --seed."),
    size: int = typer.Option(9, "--size", help="Board size."),
    komi: float | None = komi_option(),
    rules: str = typer.Option("chinese", "--rules", help="chinese, tromp-taylor or positional."),
    visits: int | None = typer.Option(
        None, "--visits", min=1, help="MCTS playouts per move (root noise; default 64)."),
    policy_temperature: float | None = typer.Option(
        None, "--policy-temperature", min=0.0,
        help="Instead of MCTS: sample the raw policy ^ 1/T (0 = the most likely move)."),
    random_opening: int = typer.Option(
        0, "--random-opening", min=0, help="The first K moves of each game are random."),
    max_moves: int | None = typer.Option(
        None, "--max-moves", min=1, help="Stop a game after this many moves (default 2*N*N)."),
    workers: int | None = workers_option(),
    ray: str | None = ray_option(),
    backend: str = backend_option(),
    device: str = device_option(),
    threads: int = threads_option("CPU threads per teacher."),
    symmetries: int = symmetries_option("Teacher averages this many symmetries."),
    seed: int = typer.Option(0, "--seed", help="Games are numbered per seed; a rerun continues."),
    out: Path = typer.Option(..., "--out", help="Output folder (positions shards + sgf/)."),
) -> None:
    """Let a teacher play itself; keep the games (SGF) and their positions (shards)."""
    from kosumi.distill.selfplay import DEFAULT_VISITS, SelfPlayConfig, run_selfplay

    if visits is not None and policy_temperature is not None:
        fail("give --visits or --policy-temperature, not both")
    config = SelfPlayConfig(
        size=size, komi=komi, rules=rules,
        visits=None if policy_temperature is not None else (visits or DEFAULT_VISITS),
        policy_temperature=1.0 if policy_temperature is None else policy_temperature,
        random_opening=random_opening, seed=seed, max_moves=max_moves)
    try:
        stats = run_selfplay(model, out, games, config, workers=workers, threads=threads,
                             symmetries=symmetries, backend=backend,
                             device=None if device == "cpu" else device, progress=True,
                             ray=ray)
    except KosumiError as e:
        fail(str(e))
    typer.echo(f"{out}: {stats.games_played} games played, {stats.games_recovered} recovered, "
               f"{stats.games_before} already there; {stats.positions_added} new positions "
               f"({stats.duplicates} duplicates skipped; teacher on {stats.backend})")


@app.command("positions")
def positions_command(
    from_sgf: list[Path] = typer.Option(
        ..., "--from-sgf", help="SGF file or folder (searched recursively); repeatable."),
    more_sgf: list[Path] | None = typer.Argument(
        None, help="More SGF files or folders (--from-sgf a.sgf b.sgf games/ ...).",
        show_default=False),
    out: Path = typer.Option(..., "--out", help="Positions folder (created or added to)."),
    rules: str = typer.Option("chinese", "--rules", help="chinese, tromp-taylor or positional."),
    sample: float = typer.Option(
        1.0, "--sample", help="Keep each position with this probability (0 < p <= 1)."),
    min_moves: int = typer.Option(0, "--min-moves", min=0, help="Skip the first K positions."),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Warn about bad SGF files, go on."),
) -> None:
    """Import every position of the main line of SGF games (any board size), deduplicated."""
    from kosumi.distill.sgf_import import import_sgf

    try:
        stats = import_sgf([*from_sgf, *(more_sgf or [])], out, rules=rules, sample=sample,
                           seed=seed, min_moves=min_moves, skip_bad=skip_bad, progress=True,
                           warn=lambda m: typer.echo(f"kosumi: warning: {m}", err=True))
    except KosumiError as e:
        fail(str(e))
    typer.echo(f"{out}: {stats.files} files, {stats.added} new positions, {stats.duplicates} "
               f"duplicates skipped" + (f", {stats.bad_files} bad files skipped"
                                        if stats.bad_files else ""))


@app.command("label")
def label_command(
    teacher: Path = typer.Option(..., "--teacher", help="Teacher model file (any format)."),
    positions: Path = typer.Option(..., "--positions", help="Positions folder."),
    out: Path = typer.Option(..., "--out", help="Label folder (created, or resumed)."),
    workers: int | None = workers_option(),
    ray: str | None = ray_option(),
    backend: str = backend_option(),
    device: str = device_option(),
    threads: int = threads_option("CPU threads per teacher."),
    symmetries: int = symmetries_option("Teacher averages this many symmetries (1 or 8)."),
    batch: int = typer.Option(256, "--batch", min=1, help="Positions per forward pass."),
    shard_size: int | None = typer.Option(
        None, "--shard-size", min=1, help="Positions per label shard (default 4096; fixed "
        "by the folder once started)."),
    allow_mixed_teachers: bool = typer.Option(
        False, "--allow-mixed-teachers", help="Allow adding labels from a different teacher."),
    visits: int = typer.Option(
        0, "--visits", min=0, help="Policy target from the teacher's own MCTS of this many "
        "visits (0: its raw policy)."),
) -> None:
    """Label positions with a teacher's policy, value (W/L/NR), score lead and ownership."""
    from kosumi.distill.labels import label_positions

    try:
        stats = label_positions(teacher, positions, out, symmetries=symmetries, batch=batch,
                                chunk_size=shard_size, workers=workers, threads=threads,
                                backend=backend, device=None if device == "cpu" else device,
                                allow_mixed_teachers=allow_mixed_teachers, progress=True,
                                ray=ray, visits=visits)
    except KosumiError as e:
        fail(str(e))
    typer.echo(f"{out}: labelled {stats.labelled} positions in {stats.shards} shards; "
               f"{stats.already} were already labelled; {stats.total} positions in all "
               f"(teacher on {stats.backend}; policy target: "
               f"{f'its search of {visits} visits' if visits else 'its raw policy'})")


# ----------------------------------------------------------------------------- distill (training)
@app.command("distill")
def distill_command(
    data: list[Path] = typer.Option(
        ..., "--data", help="Label folder (kosumi label); give it again to train on several."),
    out: Path = typer.Option(..., "--out", help="Student checkpoint to write (.safetensors)."),
    teacher: str | None = typer.Option(
        None, "--teacher", help="Teacher file (or sha256) to check against the labels' "
        "teacher; default: the labels' teacher."),
    student: str | None = typer.Option(None, "--student", help="Student arch (default b6c64)."),
    features: str | None = typer.Option(None, "--features",
                                        help="basic (default), basic_ladder or lz18."),
    head: str | None = typer.Option(None, "--head", help="conv (default) or lz (19x19)."),
    value: str | None = typer.Option(None, "--value", help="wdl or tanh (default: by head)."),
    value_pool: str | None = typer.Option(
        None, "--value-pool", help="mean_max (default) or katago: the conv value head also "
        "pools mean x (N-14)/10, so it knows the board size (widens an --init net)."),
    board_sizes: str | None = typer.Option(
        None, "--board-sizes", help="Sizes to train, e.g. 9,19 (default: all in the labels)."),
    steps: int | None = typer.Option(None, "--steps", help="Optimizer steps in all."),
    epochs: float | None = typer.Option(None, "--epochs", help="Or: passes over the data "
                                           "(default 1)."),
    batch: int | None = typer.Option(None, "--batch", help="Global batch (default 256)."),
    lr: float | None = typer.Option(None, "--lr", help="Peak learning rate (default 2e-3)."),
    weight_decay: float | None = typer.Option(None, "--weight-decay", help="AdamW (0.01)."),
    warmup: int | None = typer.Option(None, "--warmup", help="Warm-up steps (default 5%)."),
    clip: float | None = typer.Option(None, "--clip", help="Gradient-norm clip (1.0; 0=off)."),
    seed: int | None = typer.Option(None, "--seed", help="Seed: init, split, order (0)."),
    policy_temperature: float | None = typer.Option(
        None, "--policy-temperature", help="Distillation temperature T (default 1)."),
    ownership_weight: float | None = typer.Option(
        None, "--ownership-weight", help="Ownership loss weight (default 0.5; 0 = none)."),
    score_weight: float | None = typer.Option(
        None, "--score-weight", help="Score-lead loss weight (default 0.1; 0 = none)."),
    val_fraction: float | None = typer.Option(
        None, "--val-fraction", help="Games held out for evaluation (default 0.05)."),
    split_seed: int | None = typer.Option(
        None, "--split-seed", help="Which games are held out (default: --seed's choice); keep "
        "one value along a chain of fine-tunes so none trains on another's held-out games."),
    augment: bool | None = typer.Option(
        None, "--augment/--no-augment", help="8-fold symmetry augmentation (default on)."),
    size_weights: str | None = typer.Option(
        None, "--size-weights", help="Batches per epoch of a size, relative to its positions, "
        "e.g. 19:3 (each 19x19 position three times an epoch; default 1 for every size)."),
    eval_every: int = typer.Option(500, "--eval-every", help="Evaluate + save every K steps."),
    stop_after: int | None = typer.Option(
        None, "--stop-after", help="Stop this invocation after K steps (then --resume)."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads per process."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:K."),
    precision: str = typer.Option(
        "fp32", "--precision", help="fp32 (bitwise reproducible), bf16 (autocast, channels-"
        "last: ~1.5-2x on CPUs with bf16, emulated and ~7x slower on others) or auto (bf16 "
        "where the hardware has it)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run saved at --out."),
    init: str | None = typer.Option(
        None, "--init", help="Start from this checkpoint's weights (or 'default'): fine-tune."),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="Encoded-label cache (default ~/.cache/kosumi/distill)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train a student network on a teacher's labels (runs under torchrun for DDP)."""
    import os

    from kosumi.distill.train import DistillOptions, distill
    from kosumi.distill.train_state import parse_size_weights
    from kosumi.nets.config import parse_board_sizes

    try:
        options = DistillOptions(
            data=data, out=out, teacher=teacher, student=student, features=features, head=head,
            value=value, value_pool=value_pool,
            board_sizes=parse_board_sizes(board_sizes) if board_sizes else None,
            steps=steps, epochs=epochs, batch=batch, lr=lr, weight_decay=weight_decay,
            warmup=warmup, clip=clip, seed=seed, policy_temperature=policy_temperature,
            ownership_weight=ownership_weight, score_weight=score_weight,
            val_fraction=val_fraction, split_seed=split_seed, augment=augment,
            eval_every=eval_every,
            size_weights=parse_size_weights(size_weights) if size_weights is not None else None,
            stop_after=stop_after, threads=threads,
            device=device, precision=precision, resume=resume, init=init, cache_dir=cache_dir,
            progress=not quiet, argv=["distill", *sys.argv[sys.argv.index("distill") + 1:]]
            if "distill" in sys.argv else sys.argv[1:])
        result = distill(options)
    except KosumiError as e:
        fail(str(e))
    if result.val:
        v = result.val
        summary = (f"val top-1 {v['top1']:.3f}, top-5 {v['top5']:.3f}, policy KL "
                   f"{v['policy_kl']:.4f}, value MAE {v['value_mae']:.4f}")
    else:
        summary = "no held-out positions"
    if int(os.environ.get("RANK", "0")) == 0:
        typer.echo(f"wrote {result.checkpoint}: {result.steps} steps, {result.samples:,} "
                   f"samples, {result.samples_per_s:,.0f} samples/s; {summary}")


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)  # `kill` stops as cleanly as Ctrl-C
    try:
        app()
    except KosumiError as e:
        typer.echo(f"kosumi: error: {e}", err=True)
        sys.exit(2)
    except ModuleNotFoundError as e:  # an optional package a command needs
        line = missing_extra(e)
        if line is None:
            raise
        typer.echo(f"kosumi: error: {line}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("kosumi: interrupted", err=True)
        sys.exit(130)
    except Terminated:
        typer.echo("kosumi: terminated", err=True)
        sys.exit(143)


if __name__ == "__main__":
    main()
