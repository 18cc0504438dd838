"""``kosumi analyze`` (kosumi.runtime.analyze): JSON and human output, positions files, SGF,
bad input, and the analysis of KataGo's net against the real KataGo engine."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers import assert_one_line_error, cli, katago_policy

from kosumi.go.coords import vertex_to_point

torch.set_num_threads(1)


def records(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.fixture
def model(init_b1c8):
    return init_b1c8


# ----------------------------------------------------------------------------- analyze
def test_analyze_moves_json(model):
    (rec,) = records(cli("analyze", "--model", model, "--moves", "B D4 W Q16 B pass",
                         "--json"))
    assert rec["board_size"] == 19 and rec["to_move"] == "W" and rec["num_moves"] == 3
    assert len(rec["policy"]) == 361 and len(rec["ownership"]) == 361
    assert rec["policy"][vertex_to_point("D4", 19)] == 0.0
    assert rec["policy"][vertex_to_point("Q16", 19)] == 0.0
    assert sum(1 for p in rec["policy"] if p == 0.0) == 2
    assert abs(sum(rec["policy"]) + rec["policy_pass"] - 1) < 1e-5
    assert 0 <= rec["winrate"] <= 1 and isinstance(rec["score_lead"], float)


def test_analyze_human_output(model):
    r = cli("analyze", "--model", model, "--moves", "E5 C3", "--size", "9", "--komi", "7")
    assert r.exit_code == 0, r.output
    header, line = r.stdout.splitlines()[:2]
    assert header.startswith("# ") and " on onnxruntime" in header  # auto's choice, said
    assert line.startswith("B to move, winrate ")


def test_analyze_positions_file_echoes_ids_and_masks(reference_positions, model, tmp_path):
    picked = [r for r in reference_positions if r["ko_ban"] or r["id"].endswith("-0000")][:6]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in picked) + "\n\n")
    recs = records(cli("analyze", "--model", model, "--positions", path, "--json"))
    assert [r["id"] for r in recs] == [r["id"] for r in picked]
    for rec, ref in zip(recs, picked, strict=True):
        assert rec["board_size"] == ref["board_size"] and rec["to_move"] == ref["to_move"]
        zeros = [p == 0.0 for p in rec["policy"]]
        assert zeros == [v is None for v in ref["katago_raw_nn"]["policy"]], rec["id"]


def test_analyze_sgf(model, tmp_path):
    sgf = tmp_path / "g.sgf"
    sgf.write_text("(;GM[1]FF[4]SZ[9]KM[7]RU[Chinese];B[ee];W[cc];B[gg])")
    (rec,) = records(cli("analyze", "--model", model, "--sgf", sgf, "--move", "2", "--json"))
    assert rec["board_size"] == 9 and rec["to_move"] == "B" and rec["num_moves"] == 2
    assert rec["komi"] == 7.0
    assert rec["policy"][vertex_to_point("E5", 9)] == 0.0
    assert rec["policy"][vertex_to_point("C7", 9)] == 0.0
    assert rec["policy"][vertex_to_point("G3", 9)] > 0.0


def test_analyze_bad_input_exit_2_one_line(model, tmp_path):
    assert_one_line_error(cli("analyze", "--model", model, "--moves", "B D4 W Z99"),
                          "--moves", "move 2", "Z99")
    assert_one_line_error(cli("analyze", "--model", model, "--moves", "B D4 W D4"),
                          "move 2", "illegal")
    assert_one_line_error(cli("analyze", "--model", model, "--moves", "D4", "--size", "13"),
                          "13x13")
    assert_one_line_error(cli("analyze", "--model", model), "exactly one of")
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
        r = cli("analyze", "--model", model, "--positions", path, "--json")
        assert_one_line_error(r, str(path), *needles)
        assert r.stdout == ""  # nothing printed before the input was checked
    not_a_model = tmp_path / "weights.txt"
    not_a_model.write_text("1\n0.1 0.2\n")
    assert_one_line_error(cli("analyze", "--model", not_a_model, "--moves", "D4"),
                          str(not_a_model), "unsupported model format")
    assert_one_line_error(cli("analyze", "--model", model, "--sgf", tmp_path / "none.sgf"),
                          "none.sgf")


# ---------------------------------------------------------------------------- the real net
def test_analyze_cli_matches_katago(katago_model, reference_positions, tmp_path):
    """End to end through ``kosumi analyze --positions``: the format is detected from the file's
    content and the printed outputs (side to move's view) agree with KataGo's (White's view)."""
    import subprocess
    import sys

    subset = reference_positions[::30]  # both board sizes, early and late positions
    src = tmp_path / "positions.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in subset))
    proc = subprocess.run([sys.executable, "-m", "kosumi", "analyze", "--model", str(katago_model),
                           "--positions", str(src), "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    outs = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [o["id"] for o in outs] == [r["id"] for r in subset]
    for out, ref in zip(outs, subset, strict=True):
        kg = ref["katago_raw_nn"]
        white = ref["to_move"] == "W"
        ref_win = (kg["whiteWin"] if white else kg["whiteLoss"]) + kg["noResult"] / 2
        assert abs(out["winrate"] - ref_win) < 0.002, ref["id"]
        ref_lead = kg["whiteLead"] if white else -kg["whiteLead"]
        assert abs(out["score_lead"] - ref_lead) < 0.05, ref["id"]
        pol = katago_policy(ref)
        ours = np.array(out["policy"] + [out["policy_pass"]])
        assert int(np.argmax(ours)) == int(np.argmax(pol)), ref["id"]
        assert np.abs(ours - pol).max() < 0.002, ref["id"]
