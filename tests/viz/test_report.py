"""``kosumi viz`` reports (kosumi.viz.report): the sizes are the exports' own, the page is
self-contained and loads every image in headless Chromium, every format is read, and bad input
is one line with nothing written."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from helpers import KATAGO_MODEL, random_net_file, require_program, shared_path
from typer.testing import CliRunner

from kosumi.cli import app

CHROMIUM = "/usr/bin/chromium"


def run(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def nets(viz_nets):
    return viz_nets


def _page_images(page: str) -> list[str]:
    return re.findall(r"<img [^>]*src='([^']*)'", page)


def test_report_is_self_contained_and_loads_in_chromium(nets, tmp_path):
    chromium = require_program(CHROMIUM)
    out = tmp_path / "report"
    strength = _strength_table(tmp_path / "strength.json", nets["int8"])
    r = run("viz", str(nets["int8"]), "--out", str(out), "--ref", str(nets["float"]),
            "--calib", str(nets["calib"]), "--strength", str(strength))
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text()
    images = _page_images(page)
    pngs = sorted((out / "figures").glob("*.png"))
    assert len(images) == len(pngs) >= 30
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r"(src|href)=['\"](https?:)?//", page)  # nothing fetched
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 2_000_000, p.name
    for heading in ("Summary", "Bytes per format", "Agreement with", "Compressibility",
                    "Zeroing small int8 weights", "Size against agreement",
                    "Size against strength", "matches against gnugo --level 10",
                    "Layers", "Distributions", "Activations", "Difference with the reference"):
        assert heading in page, heading
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'c'}",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars"]
    url = (out / "report.html").resolve().as_uri()
    dom = subprocess.run([chromium, *flags, "--virtual-time-budget=10000", "--dump-dom", url],
                         check=False, capture_output=True, text=True, timeout=120).stdout
    n = len(images)
    assert f'data-loaded="{n}" data-total="{n}"' in dom, dom[:300]
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, *flags, "--window-size=1280,2400", f"--screenshot={shot}", url],
                   check=True, capture_output=True, timeout=120)
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1280)
    # the first figure (a colour-mapped filter image) is on screen: saturated reds and blues
    red = (pixels[..., 0] > 0.55) & (pixels[..., 2] < 0.35)
    blue = (pixels[..., 2] > 0.55) & (pixels[..., 0] < 0.35)
    assert red.sum() > 500 and blue.sum() > 500


def _strength_table(path, model):
    """A size-vs-strength table (``engine.strength``) with this net among two others."""
    from kosumi.engine.strength import strength_row, write_strength_table

    match = path.with_name("match.json")
    match.write_text(json.dumps({"second": "gnugo --level 10", "size": 9, "games": [
        {"index": i, "first_color": "BW"[i % 2], "winner": "B" if i < 3 else "W"}
        for i in range(6)]}))
    row = strength_row("q", model, [match])
    rows = [row, {**row, "name": "bigger", "model": "x.kpk", "bytes": 4 * row["bytes"],
                  "elo": 150.0, "low": 40.0, "high": 300.0},
            {**row, "name": "smaller", "model": "y.kpk", "bytes": row["bytes"] // 3,
             "elo": -200.0, "low": -400.0, "high": -60.0}]
    write_strength_table(rows, path)
    return path


def test_sizes_are_the_exports_own_and_agreement_is_measured(nets, tmp_path):
    from kosumi.viz.report import build_report

    report = build_report(nets["int8"], calib=nets["calib"], positions=48)
    pack, onnx = tmp_path / "q.kpk", tmp_path / "q.onnx"
    assert run("export", str(nets["int8"]), "--format", "pack", "--out", str(pack)).exit_code == 0
    assert run("export", str(nets["int8"]), "--format", "onnx", "--precision", "int8",
               "--out", str(onnx)).exit_code == 0
    assert report.sizes["kosumi pack"] == pack.stat().st_size
    assert report.sizes["onnx (int8)"] == onnx.stat().st_size
    assert report.sizes["safetensors"] == nets["int8"].stat().st_size
    # the integer net against its own weights in float: close, not identical
    a = report.agreement["9x9"]
    assert a["positions"] == 48 and 0.8 <= a["top1"] <= 1.0 and 0 < a["policy_kl"] < 0.05
    codecs = report.compress_summary["stored"]
    assert {"zstd-19", "zstd-dict", "gzip-9", "xz-9", "bz2-9"} <= set(codecs)
    assert report.compress_summary["entropy_bytes"] < min(codecs.values())


@pytest.mark.parametrize("kind", ["pack", "leelaz", "katago"])
def test_viz_reads_every_format_with_tensors(kind, nets, tmp_path):
    if kind == "pack":
        model = tmp_path / "q.kpk"
        assert run("export", str(nets["int8"]), "--format", "pack", "--out",
                   str(model)).exit_code == 0
    elif kind == "leelaz":
        lz = random_net_file(tmp_path / "lz.safetensors", arch="b1c8", features="lz18",
                             head="lz")
        model = tmp_path / "lz.txt"
        assert run("export", str(lz), "--format", "leelaz", "--out", str(model)).exit_code == 0
    else:
        model = shared_path(KATAGO_MODEL)
    r = run("viz", str(model), "--out", str(tmp_path / "out"))
    assert r.exit_code == 0, r.output
    page = (tmp_path / "out" / "report.html").read_text()
    assert "by input plane" in page and len(_page_images(page)) >= 5
    if kind == "katago":  # its pre-activation batch norms, drawn as per-channel affines
        assert (tmp_path / "out" / "figures" / "layer-blocks_0_pre.png").exists()


def test_bad_input_is_one_line_and_writes_nothing(nets, tmp_path):
    onnx = tmp_path / "q.onnx"
    assert run("export", str(nets["float"]), "--format", "onnx", "--out", str(onnx)).exit_code == 0
    out = tmp_path / "never"
    cases = [
        ((str(onnx), "--out", str(out)), "runtime file without the net's own tensors"),
        ((str(tmp_path / "missing.safetensors"), "--out", str(out)), "missing.safetensors"),
        ((str(nets["float"]), "--out", str(onnx)), "is a file, not a folder"),
        ((str(nets["float"]), "--out", str(onnx / "sub")), "is a file, not a folder"),
        ((str(nets["float"]), "--out", str(out), "--calib", str(tmp_path / "nope")), "nope"),
        ((str(nets["float"]), "--out", str(out), "--strength", str(onnx)),
         "not a strength table"),
    ]
    for args, needle in cases:
        r = run("viz", *args)
        assert r.exit_code == 2, (args, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kosumi: error:"), r.output
        assert needle in lines[0], (needle, lines[0])
        assert "Traceback" not in r.output
    assert not out.exists()
