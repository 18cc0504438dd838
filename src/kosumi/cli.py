"""The ``kosumi`` command line: one Typer app. Each command parses options, calls one library
function and prints; errors a user can cause are one line on stderr and exit code 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from kosumi.errors import KosumiError

app = typer.Typer(
    name="kosumi",
    help="Distill large Go networks into tiny, fast, quantized ones and play with them anywhere.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"kosumi: error: {message}", err=True)
    raise typer.Exit(code)


# ----------------------------------------------------------------------------- init (nets)
@app.command("init")
def init_command(
    out: Path = typer.Option(..., "--out", help="Checkpoint file to write (safetensors)."),
    arch: str = typer.Option("b6c64", "--arch", help="Blocks x channels, e.g. b6c64."),
    features: str = typer.Option("basic", "--features", help="Feature set: basic, lz18."),
    head: str = typer.Option("conv", "--head", help="Head style: conv (any size) or lz."),
    board_sizes: Optional[str] = typer.Option(
        None, "--board-sizes", help="Comma-separated sizes (default 9,13,19; lz: 19)."
    ),
    value: Optional[str] = typer.Option(None, "--value", help="wdl or tanh (default: wdl; lz: tanh)."),
    score_lead: Optional[bool] = typer.Option(
        None, "--score-lead/--no-score-lead", help="Score-lead output (default: on; lz: off)."
    ),
    ownership: Optional[bool] = typer.Option(
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
    model: Path = typer.Option(..., "--model", help="Model file (kosumi checkpoint)."),
    moves: Optional[str] = typer.Option(
        None, "--moves", help='Moves from the empty board, e.g. "B D4 W Q16 B pass".'
    ),
    size: int = typer.Option(19, "--size", help="Board size for --moves."),
    komi: float = typer.Option(7.5, "--komi", help="Komi for --moves."),
    sgf: Optional[Path] = typer.Option(None, "--sgf", help="SGF game to analyse."),
    move: Optional[int] = typer.Option(
        None, "--move", min=0, help="With --sgf: the position after this many moves (default: end)."
    ),
    positions: Optional[Path] = typer.Option(
        None, "--positions", help="JSON Lines positions (id, board_size, komi, moves)."
    ),
    rules: str = typer.Option("chinese", "--rules", help="chinese, tromp-taylor or positional."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per position."),
    backend: str = typer.Option("torch", "--backend", help="Backend that runs the net."),
    threads: int = typer.Option(1, "--threads", min=1, help="CPU threads for the backend."),
    symmetries: int = typer.Option(
        1, "--symmetries", min=1, max=8, help="Average over this many board symmetries (8 = all)."
    ),
) -> None:
    """Print a network's raw output (policy, winrate, score lead, ownership) without search."""
    import json

    from kosumi.runtime.analyze import (
        analyze,
        position_from_moves,
        position_from_sgf,
        read_positions,
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
            todo = read_positions(positions, rules)  # type: ignore[arg-type]
        evaluator = load_evaluator(model, backend=backend, threads=threads, cache=False,
                                   symmetries=symmetries)
        for rec in analyze(evaluator, todo):
            if as_json:
                typer.echo(json.dumps(rec, separators=(",", ":")))
            else:
                typer.echo(_analysis_line(rec))
    except KosumiError as e:
        fail(str(e))


def _analysis_line(rec: dict) -> str:
    """A short human summary of one analysis record."""
    from kosumi.go.coords import point_to_vertex

    n = rec["board_size"]
    pol = rec["policy"] + [rec["policy_pass"]]
    top = sorted(range(len(pol)), key=lambda i: -pol[i])[:5]
    moves = ", ".join(f"{point_to_vertex(i, n)} {pol[i]:.3f}" for i in top)
    parts = [f"{rec['id']}: " if "id" in rec else "", f"{rec['to_move']} to move, ",
             f"winrate {rec['winrate']:.3f}"]
    if "score_lead" in rec:
        parts.append(f", lead {rec['score_lead']:+.1f}")
    parts.append(f"; policy {moves}")
    return "".join(parts)


# ----------------------------------------------------------------------------- gtp (engine)
@app.command("gtp")
def gtp_command(
    model: str = typer.Option(..., "--model", help="Model file, or 'uniform' (no network)."),
    visits: int = typer.Option(200, "--visits", min=1, help="Playouts per move."),
    batch: int = typer.Option(8, "--batch", min=1, help="Leaves evaluated together."),
    threads: int = typer.Option(1, "--threads", min=1, help="Evaluator threads."),
    time_per_move: Optional[float] = typer.Option(
        None, "--time-per-move", min=0.0, help="Seconds per move when no clock is set."
    ),
    resign_threshold: float = typer.Option(
        0.0, "--resign-threshold", min=0.0, max=1.0, help="Resign below this winrate (0: never)."
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="Random seed."),
) -> None:
    """Play and analyse over GTP on stdin/stdout (for GUIs, match runners and servers)."""
    from kosumi.engine.gtp_engine import GTPEngine, load_model
    from kosumi.engine.mcts import SearchConfig

    try:
        evaluator = load_model(model, threads=threads)
    except KosumiError as e:
        fail(str(e))
    config = SearchConfig(visits=visits, batch=batch, resign_threshold=resign_threshold, seed=seed)
    GTPEngine(evaluator, config, time_per_move=time_per_move).run()


# ----------------------------------------------------------------------------- match (arena)
@app.command("match")
def match_command(
    black: str = typer.Option(..., "--black", help="First engine's GTP command (Black in game 1)."),
    white: str = typer.Option(..., "--white", help="Second engine's GTP command."),
    games: int = typer.Option(2, "--games", min=1, help="Number of games."),
    size: int = typer.Option(9, "--size", help="Board size."),
    komi: float = typer.Option(7.0, "--komi", help="Komi."),
    swap_colors: bool = typer.Option(False, "--swap-colors", help="Alternate colours per game."),
    sgf_dir: Optional[Path] = typer.Option(None, "--sgf-dir", help="Write each game as SGF here."),
    move_timeout: float = typer.Option(60.0, "--move-timeout", help="Seconds per GTP answer."),
    sprt_text: Optional[str] = typer.Option(
        None, "--sprt", help="'elo0,elo1': stop when the SPRT (alpha=beta=0.05) decides."
    ),
    max_moves: Optional[int] = typer.Option(
        None, "--max-moves", help="Stop and score a game after this many moves (default 3*N*N)."
    ),
    referee: str = typer.Option(
        "/usr/games/gnugo --mode gtp --chinese-rules", "--referee",
        help="GTP command that names dead stones for scoring ('none': plain Tromp-Taylor).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
) -> None:
    """Play a match between two GTP engines, refereed and area-scored by kosumi."""
    import json

    from rich.console import Console

    from kosumi.engine.elo import parse_sprt
    from kosumi.engine.match import play_match

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
        progress=True, console=Console(stderr=json_out),
    )
    if json_out:
        typer.echo(json.dumps(result.to_dict(), indent=2))



# ----------------------------------------------------------------------------- export / inspect
@app.command("export")
def export_command(
    model: Path = typer.Argument(..., help="Model to export (a kosumi checkpoint)."),
    fmt: str = typer.Option(..., "--format", help="Output format: leelaz."),
    out: Path = typer.Option(..., "--out", help="File to write (leelaz: NET.txt or NET.txt.gz)."),
) -> None:
    """Export a model to another format (Leela Zero weights; more formats to come)."""
    from kosumi.export import export_model

    try:
        typer.echo(export_model(model, fmt, out))
    except KosumiError as e:
        fail(str(e))


@app.command("inspect")
def inspect_command(
    model: Path = typer.Argument(..., help="Model file: kosumi checkpoint, Leela Zero, KataGo."),
    as_json: bool = typer.Option(False, "--json", help="Print the description as JSON."),
) -> None:
    """Describe a model file: format, version, size, parameters, inputs, heads, board sizes."""
    import json

    from kosumi.nets.inspect import describe_model, format_description

    try:
        info = describe_model(model)
    except KosumiError as e:
        fail(str(e))
    typer.echo(json.dumps(info, indent=2) if as_json else format_description(info))


def main() -> None:
    try:
        app()
    except KosumiError as e:
        typer.echo(f"kosumi: error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("kosumi: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
