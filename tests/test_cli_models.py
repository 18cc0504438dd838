"""The model commands (kosumi.cli_models): ``kosumi export`` writes a file of the asked format
holding the same net, ``kosumi inspect --json`` describes it, bad requests are one line.

Oracles: the format sniffers (kosumi.nets.formats) claim each written file as the format asked,
the tensors read back from a kosumi checkpoint and a pack equal the source's bit for bit, and the
Leela Zero text's first line and line count follow the format (version 1: 1 + 4 lines per
convolution and BN, 14 lines of heads).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import random_net_file
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.formats import detect_format, read_net


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("fmt,name", [("kosumi", "n.safetensors"), ("pack", "n.kpk"),
                                      ("onnx", "n.onnx")])
def test_export_writes_the_asked_format(random_net, tmp_path, fmt, name):
    out = tmp_path / name
    r = run("export", random_net, "--format", fmt, "--out", out)
    assert r.exit_code == 0, r.output
    assert detect_format(out).name == fmt
    if fmt != "onnx":
        src, back = read_checkpoint(random_net), read_net(out)
        assert set(back.tensors) == set(src.tensors)
        for k, t in src.tensors.items():
            np.testing.assert_array_equal(back.tensors[k], t, err_msg=k)
    info = json.loads(run("inspect", out, "--json").output)
    assert info["file_bytes"] == out.stat().st_size and info["arch"] == "b1c8"


def test_export_leela_zero_text(tmp_path):
    lz = random_net_file(tmp_path / "lz.safetensors", arch="b1c8", features="lz18", head="lz")
    out = tmp_path / "lz.txt"
    r = run("export", lz, "--format", "leelaz", "--out", out)
    assert r.exit_code == 0, r.output
    lines = out.read_text().splitlines()
    # version line; input conv + BN (4 lines), 1 block of 2 x (conv + BN) (8 lines); policy
    # conv + BN (4) + fc (2); value conv + BN (4) + fc1 (2) + fc2 (2)
    assert lines[0] == "1" and len(lines) == 1 + 4 + 8 + 6 + 8
    assert detect_format(out).name == "leelaz"


def test_bad_requests_are_one_line(random_net, tmp_path):
    for args, needle in [
        (("export", random_net, "--format", "caffe", "--out", tmp_path / "x"), "caffe"),
        (("export", tmp_path / "missing.safetensors", "--format", "pack", "--out",
          tmp_path / "x.kpk"), "missing.safetensors"),
        (("inspect", tmp_path / "missing.safetensors"), "missing.safetensors"),
    ]:
        r = run(*args)
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and needle in lines[0], r.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.kpk").exists()
