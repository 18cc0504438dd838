"""The size-vs-strength table: games summed from match results as counted by hand, the net's
size its file's own, the benchmark's table what ``kosumi viz --strength`` reads, and bad input
one line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, random_net_file

from kosumi.engine.strength import read_strength_table, strength_row, write_strength_table
from kosumi.errors import KosumiError


def game(index: int, first_color: str, winner: str | None, forfeit: bool = False) -> dict:
    return {"index": index, "first_color": first_color, "winner": winner,
            "forfeit": {"color": "W", "kind": "timeout", "detail": ""} if forfeit else None}


def write_match(path: Path, games: list[dict], second: str = "gnugo --level 10",
                size: int = 9) -> Path:
    path.write_text(json.dumps({"first": "kosumi", "second": second, "size": size,
                                "games": games}))
    return path


@pytest.fixture
def net(tmp_path):
    return random_net_file(tmp_path / "b1c8.safetensors", arch="b1c8", board_sizes=(9,))


def test_games_are_summed_as_counted_by_hand(net, tmp_path):
    import torch  # noqa: F401  (the parameter count below is torch's own)

    from kosumi.nets.checkpoint import load_net

    a = write_match(tmp_path / "a.json", [game(1, "B", "B"), game(2, "W", "B"),
                                          game(3, "B", None), game(4, "W", "W", forfeit=True)])
    b = write_match(tmp_path / "b.json", [game(1, "B", "W"), game(2, "W", "W")],
                    second="gnugo --level 10 --seed 7")  # one opponent, another seed
    row = strength_row("b1c8", net, [a, b])
    # by hand: wins = a1 (B), a4 (W), b2 (W); losses = a2 (as W), b1 (as B); one draw
    assert (row["wins"], row["draws"], row["losses"], row["games"]) == (3, 1, 2, 6)
    assert row["black"] == [1, 1] and row["white"] == [2, 1] and row["forfeits"] == 1
    assert row["score"] == pytest.approx(3.5 / 6, abs=1e-4)
    assert row["low"] < row["elo"] < row["high"] and row["elo"] > 0  # scored above half
    assert row["bytes"] == net.stat().st_size
    assert row["params"] == sum(p.numel() for p in load_net(net).parameters())
    assert row["opponent"] == "gnugo --level 10" and row["board_size"] == 9


def test_a_model_set_is_the_net_that_played_the_size(tmp_path):
    """The embedded ``default`` is a set (9x9: default-9, 19x19: default-19): each row names
    the file of the net that played its board."""
    from kosumi.models import DEFAULT_9_MODEL, DEFAULT_19_MODEL

    games = [game(1, "B", "B"), game(2, "W", "B")]
    big = strength_row("default", "default", [write_match(tmp_path / "19.json", games, size=19)])
    small = strength_row("default", "default", [write_match(tmp_path / "9.json", games)])
    assert big["bytes"] == DEFAULT_19_MODEL.stat().st_size and big["board_size"] == 19
    assert big["sha256"] == hashlib.sha256(DEFAULT_19_MODEL.read_bytes()).hexdigest()
    assert small["sha256"] == hashlib.sha256(DEFAULT_9_MODEL.read_bytes()).hexdigest()


def test_an_even_match_is_level(net, tmp_path):
    m = write_match(tmp_path / "m.json", [game(i, "BW"[i % 2], "BW"[(i // 2) % 2])
                                          for i in range(8)])
    row = strength_row("even", net, [m])
    assert (row["wins"], row["losses"]) == (4, 4) and row["elo"] == 0
    assert row["low"] == pytest.approx(-row["high"], abs=0.2)


def test_the_benchmark_writes_what_viz_reads(net, tmp_path):
    small = random_net_file(tmp_path / "b2c16.safetensors", arch="b2c16", board_sizes=(9,))
    write_match(tmp_path / "b1-s1.json", [game(1, "B", "W"), game(2, "W", "B")])
    write_match(tmp_path / "b1-s2.json", [game(1, "B", "B")])
    write_match(tmp_path / "b2-s1.json", [game(1, "B", "B"), game(2, "W", "W")])
    out = tmp_path / "table.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "size_vs_strength.py"),
                        "--net", "b2c16", str(small), str(tmp_path / "b2-s*.json"),
                        "--net", "b1c8", str(net), str(tmp_path / "b1-s*.json"),
                        "--out", str(out)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    table = read_strength_table(out)
    assert printed["rows"] == table["rows"]
    assert [row["name"] for row in table["rows"]] == ["b1c8", "b2c16"]  # smallest file first
    b1 = table["rows"][0]
    assert (b1["wins"], b1["losses"], len(b1["matches"])) == (1, 2, 2)


def test_bad_input_is_one_line(net, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(KosumiError, match=r"bad.json: not a match result"):
        strength_row("x", net, [bad])
    with pytest.raises(KosumiError, match="no match results"):
        strength_row("x", net, [])
    with pytest.raises(KosumiError, match=r"bad.json: not a strength table"):
        read_strength_table(bad)
    t = tmp_path / "t.json"
    good = write_match(tmp_path / "g.json", [game(1, "B", "B")])
    write_strength_table([strength_row("x", net, [good])], t)
    data = json.loads(t.read_text())
    del data["rows"][0]["elo"]
    t.write_text(json.dumps(data))
    with pytest.raises(KosumiError, match=r"rows\[0\]: missing elo"):
        read_strength_table(t)
    data["version"] = 9
    t.write_text(json.dumps(data))
    with pytest.raises(KosumiError, match="version 9 is newer"):
        read_strength_table(t)
