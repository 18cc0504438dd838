"""kosumi's own engine (a bootstrapped net, exported to ONNX and run by ONNX Runtime) against
GNU Go level 1 through ``kosumi match``: the games finish, the SGFs are written, and their
results agree with GNU Go's own scoring."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import GNUGO, gnugo_final_score, require_program

from kosumi.engine.match_results import parse_score
from kosumi.go.sgf import load_game


@pytest.mark.slow
def test_two_game_match_against_gnugo(tmp_path: Path):
    gnugo = require_program(GNUGO)
    net = tmp_path / "b2c16.safetensors"
    init = [sys.executable, "-m", "kosumi", "init", "--arch", "b2c16", "--features", "basic",
            "--head", "conv", "--board-sizes", "9", "--out", str(net), "--seed", "3"]
    subprocess.run(init, check=True, capture_output=True, timeout=120)
    onnx = tmp_path / "b2c16.onnx"
    subprocess.run([sys.executable, "-m", "kosumi", "export", str(net), "--format", "onnx",
                    "--out", str(onnx)], check=True, capture_output=True, timeout=120)
    kosumi = (f"{sys.executable} -m kosumi gtp --model {onnx} --backend onnxruntime "
              "--visits 16 --batch 4")
    sgf_dir = tmp_path / "games"
    cmd = [sys.executable, "-m", "kosumi", "match", "--black", kosumi,
           "--white", f"{gnugo} --mode gtp --level 1", "--games", "2", "--size", "9",
           "--komi", "7", "--swap-colors", "--sgf-dir", str(sgf_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "95% interval" in proc.stdout
    files = sorted(sgf_dir.glob("*.sgf"))
    assert len(files) == 2
    for path in files:
        rec = load_game(path)
        assert rec.size == 9 and rec.komi == 7.0 and len(rec.moves) > 10
        assert "F" not in rec.result  # no forfeit: kosumi only played legal moves
        if rec.moves[-1][1] == rec.moves[-2][1] == -1:  # finished by two passes
            assert parse_score(rec.result) == gnugo_final_score(path), path
        else:
            assert rec.result.endswith("+R"), rec.result
