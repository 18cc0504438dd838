"""The size-vs-strength figure (kosumi.viz.strength): a PNG in which the net the report is about,
and only it, is drawn in the highlight colour.

Oracles: matplotlib's own PNG reader, and the pixels of the documented colours counted in the
picture (#b2182b for the highlighted net, #2166ac for the others).
"""

from __future__ import annotations

import io

import numpy as np

from kosumi.viz.strength import strength_figure

TABLE = {"opponent": "gnugo --level 10", "board_size": 9, "rows": [
    {"name": "tiny", "bytes": 40_000, "elo": -120.0, "low": -200.0, "high": -60.0,
     "sha256": "aa" * 32, "model": "nets/tiny.kpk"},
    {"name": "default", "bytes": 2_000_000, "elo": 35.0, "low": -10.0, "high": 80.0,
     "sha256": "bb" * 32, "model": "nets/default.safetensors"},
    {"name": "b10", "bytes": 9_000_000, "elo": 150.0, "low": 90.0, "high": 220.0,
     "sha256": "cc" * 32, "model": "nets/b10.safetensors"},
]}


def pixels(png: bytes) -> np.ndarray:
    from matplotlib import image

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return (image.imread(io.BytesIO(png))[..., :3] * 255).round().astype(int)


def count(img: np.ndarray, hex_colour: str) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(img - rgb).max(axis=-1) <= 8).sum())


def test_only_the_highlighted_net_is_red():
    plain = pixels(strength_figure(TABLE))
    assert plain.shape[0] > 100 and plain.shape[1] > plain.shape[0]  # a wide figure
    assert count(plain, "#b2182b") == 0 and count(plain, "#2166ac") > 50
    by_sha = pixels(strength_figure(TABLE, highlight="bb" * 32))
    by_name = pixels(strength_figure(TABLE, highlight="default.safetensors"))
    assert count(by_sha, "#b2182b") > 50
    assert count(by_sha, "#2166ac") < count(plain, "#2166ac")  # one net changed colour
    np.testing.assert_array_equal(by_sha, by_name)  # the same net, by file name
    other = pixels(strength_figure(TABLE, highlight="dd" * 32))  # no such net: nothing red
    assert count(other, "#b2182b") == 0
