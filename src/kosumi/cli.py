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
# ----------------------------------------------------------------------------- analyze (runtime)
# ----------------------------------------------------------------------------- gtp (engine)
# ----------------------------------------------------------------------------- match (arena)


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
