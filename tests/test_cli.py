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
