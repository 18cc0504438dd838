"""``kosumi init`` and ``kosumi analyze`` through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.go.coords import vertex_to_point
from kosumi.nets.checkpoint import read_checkpoint

torch.set_num_threads(1)
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "b1c8.kosumi"
    r = run("init", "--arch", "b1c8", "--features", "basic", "--head", "conv",
            "--board-sizes", "9,19", "--seed", "4", "--out", path)
    assert r.exit_code == 0, r.output
    return path


def records(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def assert_one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("kosumi: error:"), err
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in err, err


# ----------------------------------------------------------------------------- init
def test_init_summary_and_determinism(tmp_path, model):
    out = tmp_path / "a.kosumi"
    r = run("init", "--arch", "b2c16", "--out", out, "--seed", "4")
    assert r.exit_code == 0, r.output
    line = r.stdout.strip()
    assert len(line.splitlines()) == 1
    assert "b2c16" in line and "parameters" in line and f"{out.stat().st_size:,} bytes" in line
    cfg = read_checkpoint(out).config
    assert cfg.board_sizes == [9, 13, 19] and cfg.provenance["seed"] == 4
    again = tmp_path / "b.kosumi"
    run("init", "--arch", "b2c16", "--out", again, "--seed", "4")
    other = tmp_path / "c.kosumi"
    run("init", "--arch", "b2c16", "--out", other, "--seed", "5")
    ta, tb, tc = (read_checkpoint(p).tensors for p in (out, again, other))
    assert all(np.array_equal(ta[k], tb[k]) for k in ta)
    assert not all(np.array_equal(ta[k], tc[k]) for k in ta)


def test_init_lz_and_bad_options(tmp_path):
    r = run("init", "--arch", "b1c8", "--features", "lz18", "--head", "lz",
            "--out", tmp_path / "lz.kosumi")
    assert r.exit_code == 0 and "lz head" in r.stdout
    assert_one_line_error(run("init", "--arch", "b1c8", "--head", "lz", "--board-sizes", "9",
                              "--out", tmp_path / "x"), "board_sizes")
    assert_one_line_error(run("init", "--arch", "big", "--out", tmp_path / "x"), "'arch'")
    assert_one_line_error(run("init", "--board-sizes", "9,x", "--out", tmp_path / "x"),
                          "board_sizes")


# ----------------------------------------------------------------------------- analyze
def test_analyze_moves_json(model):
    (rec,) = records(run("analyze", "--model", model, "--moves", "B D4 W Q16 B pass",
                         "--json"))
    assert rec["board_size"] == 19 and rec["to_move"] == "W" and rec["num_moves"] == 3
    assert len(rec["policy"]) == 361 and len(rec["ownership"]) == 361
    assert rec["policy"][vertex_to_point("D4", 19)] == 0.0
    assert rec["policy"][vertex_to_point("Q16", 19)] == 0.0
    assert sum(1 for p in rec["policy"] if p == 0.0) == 2
    assert abs(sum(rec["policy"]) + rec["policy_pass"] - 1) < 1e-5
    assert 0 <= rec["winrate"] <= 1 and isinstance(rec["score_lead"], float)


def test_analyze_human_output(model):
    r = run("analyze", "--model", model, "--moves", "E5 C3", "--size", "9", "--komi", "7")
    assert r.exit_code == 0, r.output
    header, line = r.stdout.splitlines()[:2]
    assert header.startswith("# ") and " on onnxruntime" in header  # auto's choice, said
    assert line.startswith("B to move, winrate ")


def test_analyze_positions_file_echoes_ids_and_masks(reference_positions, model, tmp_path):
    picked = [r for r in reference_positions if r["ko_ban"] or r["id"].endswith("-0000")][:6]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in picked) + "\n\n")
    recs = records(run("analyze", "--model", model, "--positions", path, "--json"))
    assert [r["id"] for r in recs] == [r["id"] for r in picked]
    for rec, ref in zip(recs, picked, strict=True):
        assert rec["board_size"] == ref["board_size"] and rec["to_move"] == ref["to_move"]
        zeros = [p == 0.0 for p in rec["policy"]]
        assert zeros == [v is None for v in ref["katago_raw_nn"]["policy"]], rec["id"]


def test_analyze_sgf(model, tmp_path):
    sgf = tmp_path / "g.sgf"
    sgf.write_text("(;GM[1]FF[4]SZ[9]KM[7]RU[Chinese];B[ee];W[cc];B[gg])")
    (rec,) = records(run("analyze", "--model", model, "--sgf", sgf, "--move", "2", "--json"))
    assert rec["board_size"] == 9 and rec["to_move"] == "B" and rec["num_moves"] == 2
    assert rec["komi"] == 7.0
    assert rec["policy"][vertex_to_point("E5", 9)] == 0.0
    assert rec["policy"][vertex_to_point("C7", 9)] == 0.0
    assert rec["policy"][vertex_to_point("G3", 9)] > 0.0


def test_analyze_bad_input_exit_2_one_line(model, tmp_path):
    assert_one_line_error(run("analyze", "--model", model, "--moves", "B D4 W Z99"),
                          "--moves", "move 2", "Z99")
    assert_one_line_error(run("analyze", "--model", model, "--moves", "B D4 W D4"),
                          "move 2", "illegal")
    assert_one_line_error(run("analyze", "--model", model, "--moves", "D4", "--size", "13"),
                          "13x13")
    assert_one_line_error(run("analyze", "--model", model), "exactly one of")
    good = '{"id":"a","board_size":9,"komi":7,"moves":[["B","E5"]]}'
    cases = [
        ("{not json", ":2:", "not valid JSON"),
        ('{"id":"b","board_size":9,"komi":7,"moves":[["B","E5"],["W","E5"]]}', ":2:",
         "field 'moves'", "move 2", "illegal"),
        ('{"id":"c","board_size":9,"komi":7,"moves":[["B","K5"]]}', ":2:", "invalid vertex"),
        ('{"id":"d","board_size":9,"moves":[["X","E5"]]}', ":2:", "invalid colour"),
        ('{"id":"e","komi":7,"moves":[]}', ":2:", "field 'board_size' is missing"),
        ('{"id":"f","board_size":9,"moves":["E5"]}', ":2:", "field 'moves'[0]"),
        ('{"id":"g","board_size":42,"moves":[]}', ":2:", "field 'board_size'"),
    ]
    for bad, *needles in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text(good + "\n" + bad + "\n")
        r = run("analyze", "--model", model, "--positions", path, "--json")
        assert_one_line_error(r, str(path), *needles)
        assert r.stdout == ""  # nothing printed before the input was checked
    not_a_model = tmp_path / "weights.txt"
    not_a_model.write_text("1\n0.1 0.2\n")
    assert_one_line_error(run("analyze", "--model", not_a_model, "--moves", "D4"),
                          str(not_a_model), "unsupported model format")
    assert_one_line_error(run("analyze", "--model", model, "--sgf", tmp_path / "none.sgf"),
                          "none.sgf")
