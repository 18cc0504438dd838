"""``kosumi init`` through the CLI (kosumi.cli)."""

from __future__ import annotations

import numpy as np
import torch
from helpers import assert_one_line_error, cli

from kosumi.nets.checkpoint import read_checkpoint

torch.set_num_threads(1)


# ----------------------------------------------------------------------------- init
def test_init_summary_and_determinism(tmp_path):
    out = tmp_path / "a.kosumi"
    r = cli("init", "--arch", "b2c16", "--out", out, "--seed", "4")
    assert r.exit_code == 0, r.output
    line = r.stdout.strip()
    assert len(line.splitlines()) == 1
    assert "b2c16" in line and "parameters" in line and f"{out.stat().st_size:,} bytes" in line
    cfg = read_checkpoint(out).config
    assert cfg.board_sizes == [9, 13, 19] and cfg.provenance["seed"] == 4
    again = tmp_path / "b.kosumi"
    cli("init", "--arch", "b2c16", "--out", again, "--seed", "4")
    other = tmp_path / "c.kosumi"
    cli("init", "--arch", "b2c16", "--out", other, "--seed", "5")
    ta, tb, tc = (read_checkpoint(p).tensors for p in (out, again, other))
    assert all(np.array_equal(ta[k], tb[k]) for k in ta)
    assert not all(np.array_equal(ta[k], tc[k]) for k in ta)


def test_init_lz_and_bad_options(tmp_path):
    r = cli("init", "--arch", "b1c8", "--features", "lz18", "--head", "lz",
            "--out", tmp_path / "lz.kosumi")
    assert r.exit_code == 0 and "lz head" in r.stdout
    assert_one_line_error(cli("init", "--arch", "b1c8", "--head", "lz", "--board-sizes", "9",
                              "--out", tmp_path / "x"), "board_sizes")
    assert_one_line_error(cli("init", "--arch", "big", "--out", tmp_path / "x"), "'arch'")
    assert_one_line_error(cli("init", "--board-sizes", "9,x", "--out", tmp_path / "x"),
                          "board_sizes")


def test_a_modern_katago_net_goes_through_every_command(tmp_path):
    """A model-version-15 net (nested bottleneck, attention, feed-forward blocks) through inspect,
    analyze (checked against the real KataGo's kata-raw-nn), gtp, selfplay, label, distill and
    export (its pack analysed on numpy gives KataGo's policy too)."""
    import gzip
    import json
    import subprocess
    import sys

    from helpers import katago_raw_nn
    from katago_writer import MODERN, KataGoWriter

    net = tmp_path / "v15.bin.gz"
    net.write_bytes(gzip.compress(KataGoWriter(True, seed=5, scale=0.5).model(
        version=15, blocks=MODERN)))
    rec = {"board_size": 9, "komi": 7.0, "moves": [["B", "E5"], ["W", "C3"]]}
    k = katago_raw_nn(net, [rec], tmp_path)[0]
    ref = np.array([0.0 if p is None else p for p in k["policy"]] + [k["policyPass"]])
    r = cli("inspect", net)
    assert r.exit_code == 0 and "nbt transformer" in r.stdout and "version:         15" in r.stdout
    pack = tmp_path / "v15.kpk"
    assert cli("export", net, "--format", "pack", "--out", pack).exit_code == 0
    for model, backend in ((net, "onnxruntime"), (net, "torch"), (pack, "numpy")):
        r = cli("analyze", "--model", model, "--moves", "E5 C3", "--size", 9, "--json",
                "--backend", backend)
        assert r.exit_code == 0, r.output
        got = json.loads(r.stdout.splitlines()[-1])
        np.testing.assert_allclose(got["policy"] + [got["policy_pass"]], ref, atol=1e-5)
    gtp = subprocess.run([sys.executable, "-m", "kosumi", "gtp", "--model", str(net), "--visits",
                          "8"], input="boardsize 9\nclear_board\ngenmove b\nquit\n",
                         capture_output=True, text=True, timeout=300)
    assert gtp.returncode == 0 and "= " in gtp.stdout and "?" not in gtp.stdout
    pos, lab = tmp_path / "pos", tmp_path / "lab"
    assert cli("selfplay", "--model", net, "--games", 1, "--size", 7, "--policy-temperature", 1,
               "--max-moves", 12, "--out", pos).exit_code == 0
    assert cli("label", "--teacher", net, "--positions", pos, "--out", lab).exit_code == 0
    student = tmp_path / "student.safetensors"
    r = cli("distill", "--teacher", net, "--data", lab, "--student", "b1c8", "--steps", 2,
            "--batch", 4, "--quiet", "--out", student)
    assert r.exit_code == 0, r.output
    assert student.is_file()


# ------------------------------------------------------------------ the documented commands
SHELL_OPERATORS = {">", ">>", "2>&1", "|", "&&", "||", ";", "&"}

def documented_commands() -> list[tuple[str, int, list[str]]]:
    """Every ``kosumi ...`` line in a fenced code block of README.md and docs/**/*.md (with its
    backslash continuations joined), as (file, line, argv after ``kosumi``)."""
    import re
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for md in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        lines = md.read_text().splitlines()
        fenced, i = False, 0
        while i < len(lines):
            line, start = lines[i], i + 1
            i += 1
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                continue
            while line.rstrip().endswith("\\") and i < len(lines):
                line = line.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
            code = re.sub(r"\s#.*$", "", line).strip()
            if code.startswith("kosumi "):
                argv = shlex.split(code)[1:]
                cut = [k for k, tok in enumerate(argv) if tok in SHELL_OPERATORS]
                found.append((str(md.relative_to(root)), start, argv[: cut[0]] if cut else argv))
    return found


def test_every_documented_command_parses():
    """The README's and the guides' commands name real subcommands and options: each line is
    parsed by the CLI's own parser (click), without running it. The oracle is the text a user
    copies; a renamed or removed option fails here, naming the file and line."""
    import typer

    from kosumi.cli import app

    group = typer.main.get_command(app)
    commands = documented_commands()
    assert len(commands) >= 20, commands  # the guides do show commands
    bad = []
    for where, line, argv in commands:
        if argv and argv[0] in ("--help", "--version"):
            continue
        ctx = group.context_class(group, info_name="kosumi")
        cmd = group.get_command(ctx, argv[0]) if argv else None
        if cmd is None:
            bad.append(f"{where}:{line}: kosumi {' '.join(argv)}: no such command")
            continue
        try:
            cmd.make_context(argv[0], list(argv[1:]), parent=ctx)
        except Exception as e:  # typer's click raises its own UsageError subclasses
            if not hasattr(e, "format_message"):
                raise
            bad.append(f"{where}:{line}: kosumi {' '.join(argv)}: {e.format_message()}")
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------- signals
def test_sigterm_stops_a_worker_pool_cleanly_and_the_job_resumes(tmp_path):
    """`kill` of a self-play run with two worker processes: exit 143 with one line and no
    traceback from the parent or its workers; every stored game is kept and a rerun goes on
    from them (the oracle: the store's own manifest and the SGF files on disk)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from kosumi.distill.positions import PositionStore

    out = tmp_path / "sp"

    def argv(games: int, workers: int) -> list[str]:
        return [sys.executable, "-m", "kosumi.cli", "selfplay", "--model", "default", "--games",
                str(games), "--size", "9", "--policy-temperature", "1", "--workers", str(workers),
                "--seed", "3", "--out", str(out)]

    def stored() -> int:  # the manifest's game ranges are inclusive
        runs = PositionStore(out).dir.manifest["games"].values()
        return sum(b - a + 1 for r in runs for a, b in r)

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv(400, 2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((out / "sgf").glob("*.sgf"))
                                               if (out / "sgf").is_dir() else []) < 3:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "kosumi: terminated"
    time.sleep(1.0)  # a worker that outlived the pool would write here
    games = stored()
    assert 2 <= games < 400  # the third game's positions may be the ones a kill cut off
    r = subprocess.run(argv(games + 1, 1), capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert stored() == games + 1 == len(list((out / "sgf").glob("*.sgf")))
