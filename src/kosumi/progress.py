"""A small progress bar for long jobs (labelling, self-play, imports, training): rate and ETA.

    from kosumi.progress import progress_bar

    with progress_bar(total, "labelling", unit="pos") as bar:
        for batch in batches:
            ...
            bar.advance(len(batch), info="shard 3/12")

The bar goes to stderr (stdout stays clean for results and JSON), shows done/total, the rate
in ``unit``/s, elapsed time and the time remaining. ``enabled=False`` (or a total of 0) gives a
silent bar with the same interface, so library code can always use one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    """Items per second (or seconds per item when slower than one a second)."""

    def __init__(self, unit: str = "it"):
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if not speed:
            return Text(f"? {self.unit}/s", style="progress.data.speed")
        if speed >= 1.0:
            return Text(f"{speed:,.1f} {self.unit}/s", style="progress.data.speed")
        return Text(f"{1.0 / speed:,.1f} s/{self.unit}", style="progress.data.speed")


_NO_TASK = TaskID(-1)  # the task of a bar without a Progress (never used)


class ProgressBar:
    """A handle on one bar: ``advance(n, info=...)``, ``update(completed=..., total=...)``."""

    def __init__(self, progress: Progress | None, task_id: TaskID = _NO_TASK):
        self._progress = progress
        self._task = task_id
        self.completed: float = 0

    def advance(self, n: float = 1, info: str | None = None) -> None:
        self.completed += n
        if self._progress is not None:
            kwargs: dict[str, Any] = {} if info is None else {"info": info}
            self._progress.update(self._task, advance=n, **kwargs)

    def update(self, completed: float | None = None, total: float | None = None,
               info: str | None = None) -> None:
        if completed is not None:
            self.completed = completed
        if self._progress is not None:
            kwargs: dict[str, Any] = {} if info is None else {"info": info}
            self._progress.update(self._task, completed=completed, total=total, **kwargs)

    def discard(self) -> None:
        """Clear the bar when its block ends (a job that stopped on purpose before its end
        leaves its one line, not a half-full bar)."""
        if self._progress is not None:
            self._progress.live.transient = True

    def log(self, message: str) -> None:
        """Print a line above the bar (or to stderr when the bar is disabled)."""
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False)
        else:
            import sys

            print(message, file=sys.stderr)


@contextmanager
def progress_bar(total: float | None, description: str, unit: str = "it",
                 enabled: bool = True, console: Console | None = None,
                 completed: float = 0) -> Iterator[ProgressBar]:
    """A progress bar for ``total`` items (None: unknown), shown while the block runs."""
    if not enabled:
        bar = ProgressBar(None)
        bar.completed = completed
        yield bar
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console or Console(stderr=True),
        transient=False,
    )
    with progress:
        # rich annotates add_task's completed as int; it stores it as the task's float completed
        task = progress.add_task(description, total=total,
                                 completed=completed, info="")  # type: ignore[arg-type]
        bar = ProgressBar(progress, task)
        bar.completed = completed
        try:
            yield bar
        except BaseException:
            # a failed job leaves its one-line error, not a half-full bar
            progress.live.transient = True
            raise
