"""Learning curves (kosumi.viz.curves): the metrics file read back, and the figure drawn.

Oracles: a metrics file written by hand (with the blank and broken lines a killed run leaves),
and matplotlib's own PNG reader for the figure's size (11 x 7.5 inches at 90 dpi).
"""

from __future__ import annotations

import json

import pytest

from kosumi.errors import KosumiError
from kosumi.viz.curves import _series, plot_learning_curves, read_metrics

RECORDS = [
    {"step": 10, "lr": 0.001, "train": {"loss": 2.0, "policy_kl": 1.5, "top1": 0.2}},
    {"step": 20, "lr": 0.002, "train": {"loss": 1.5, "policy_kl": 1.0},
     "val": {"policy_kl": 1.2, "top1": 0.3, "value_mae": 0.2}},
    {"step": 30, "lr": 0.001, "train": {"loss": None}, "val": {"top1": 0.4, "top5": "x"}},
]


def test_read_metrics_skips_what_is_not_a_record(tmp_path):
    path = tmp_path / "run.metrics.jsonl"
    lines = [json.dumps(RECORDS[0]), "", "   ", "{not json", json.dumps([1, 2]),
             json.dumps({"no": "step"}), json.dumps(RECORDS[1]), json.dumps(RECORDS[2]),
             '{"step": 40, "lr": 0.0']  # the line a killed run was writing
    path.write_text("\n".join(lines))
    assert read_metrics(path) == RECORDS
    with pytest.raises(KosumiError, match="cannot read"):
        read_metrics(tmp_path / "missing.jsonl")


def test_series_take_the_numbers_of_one_group():
    assert _series(RECORDS, "train", "loss") == ([10, 20], [2.0, 1.5])  # None is no number
    assert _series(RECORDS, "val", "top1") == ([20, 30], [0.3, 0.4])
    assert _series(RECORDS, "val", "top5") == ([], [])  # a string is no number
    assert _series(RECORDS, None, "lr") == ([10, 20, 30], [0.001, 0.002, 0.001])


def test_the_figure_is_a_png_of_the_documented_size(tmp_path):
    from matplotlib import image

    out = plot_learning_curves(RECORDS, tmp_path / "curves.png", title="b1c8 on 7x7")
    assert out == tmp_path / "curves.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(out)
    assert pixels.shape[:2] == (675, 990)
    empty = plot_learning_curves([], tmp_path / "empty.png")  # "no data" in every panel
    assert image.imread(empty).shape[:2] == (675, 990)
    assert not list(tmp_path.glob(".*"))  # written atomically: no temporary left
