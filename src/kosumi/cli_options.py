"""The options every ``kosumi`` command that runs a net shares (``--backend``, ``--device``,
``--threads``, ``--symmetries``, ``--precision``; ``--komi`` with its one default per board
size), made once so that the commands cannot drift apart; and ``fail``, the one way a command
reports a user's error.

The option makers return ``Any``, as ``typer.Option`` itself does: the value is a parameter's
default (``threads: int = threads_option()``), and Typer replaces it with the parsed option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from kosumi.runtime.evaluator import Evaluator


def backend_option() -> Any:
    return typer.Option("auto", "--backend", help="auto, torch, onnxruntime, tensorrt or numpy "
                        "(auto: the fastest installed for the model; it says which).")


def device_option() -> Any:
    return typer.Option("cpu", "--device", help="cpu, cuda or cuda:K.")


def threads_option(help: str = "CPU threads of the backend.") -> Any:
    return typer.Option(1, "--threads", min=1, help=help)


def symmetries_option(help: str = "Average over this many board symmetries (8 = all; 0: one "
                                  "random symmetry per evaluation, KataGo's nnRandomize)."
                      ) -> Any:
    return typer.Option(1, "--symmetries", min=0, max=8, help=help)


def precision_option() -> Any:
    return typer.Option("auto", "--precision", help="auto (the model's own), fp32 or fp16.")


def backend_name(evaluator: Evaluator) -> str:
    """The backend an evaluator runs on (after ``auto``), for summaries."""
    from kosumi.distill.teacher_jobs import backend_of

    return backend_of(evaluator) or "no backend"


def komi_option(help: str = "Komi (default: 7.0 on 9x9 and smaller boards, 7.5 above)."
                ) -> Any:
    return typer.Option(None, "--komi", help=help)


def workers_option() -> Any:
    return typer.Option(None, "--workers", min=1, help="Processes, one teacher each (default "
                        "1); with --ray: Ray actors (default: the cluster's CPUs // --threads).")


def ray_option() -> Any:
    return typer.Option(None, "--ray", help="Run on Ray: 'local' (a Ray instance for this "
                        "run), 'auto' (the cluster 'ray start' made) or a head's address; "
                        "needs kosumi[cluster].")


def fail(message: str, code: int = 2) -> NoReturn:
    """A user's error: one line on stderr, exit code 2 (no traceback)."""
    typer.echo(f"kosumi: error: {message}", err=True)
    raise typer.Exit(code)
