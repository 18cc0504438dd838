"""Progress bars (kosumi.progress): the rate column, a bar's counts, and the silent bar.

Oracles: rates worked out by hand (items per second, or seconds per item below one a second),
the counts a sequence of advances must reach, and the text rich renders into a recording
console.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from kosumi.progress import RateColumn, progress_bar


class FakeTask:
    def __init__(self, speed, finished_speed=None):
        self.speed, self.finished_speed = speed, finished_speed


def test_rate_column_by_hand():
    col = RateColumn("pos")
    assert col.render(FakeTask(None)).plain == "? pos/s"
    assert col.render(FakeTask(1234.56)).plain == "1,234.6 pos/s"
    assert col.render(FakeTask(1.0)).plain == "1.0 pos/s"
    assert col.render(FakeTask(0.25)).plain == "4.0 s/pos"  # slower than one a second
    assert col.render(FakeTask(3.0, finished_speed=8.0)).plain == "8.0 pos/s"  # when finished


def test_a_silent_bar_counts_and_logs_to_stderr(capsys):
    with progress_bar(10, "labelling", enabled=False, completed=2) as bar:
        bar.advance(3)
        bar.advance(info="shard 1/2")
        assert bar.completed == 6
        bar.update(completed=9, total=12)
        assert bar.completed == 9
        bar.log("a note")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "a note\n"


def test_a_shown_bar_renders_counts_rate_and_info():
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    with progress_bar(20, "labelling", unit="pos", console=console, completed=5) as bar:
        bar.advance(5, info="shard 3/12")
        bar.log("halfway")
        progress: Progress = bar._progress
        task = progress.tasks[0]
        assert (task.completed, task.total, task.fields["info"]) == (10, 20, "shard 3/12")
        assert bar.completed == 10
        bar.update(completed=20)
    text = out.getvalue()
    assert "halfway" in text and "labelling" in text
    assert "20/20" in text and "shard 3/12" in text


def test_a_discarded_bar_leaves_only_its_log_lines():
    """A job stopped on purpose (QAT's --stop-after) prints its own line, not a half-full bar."""
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    with progress_bar(20, "QAT", unit="step", console=console) as bar:
        bar.advance(12, info="loss 1.0")
        bar.log("stopping")
        bar.discard()
    assert out.getvalue().split() == ["stopping"]
    kept = io.StringIO()
    with progress_bar(20, "QAT", console=Console(file=kept, width=120, color_system=None)) as bar:
        bar.advance(12)
    assert "12/20" in kept.getvalue()  # the oracle: without discard the bar stays
