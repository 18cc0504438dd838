"""Leela Zero weights: reader, writer, ``kosumi export``, the evaluator -- and the real leelaz.

The peer tests run ``/usr/games/leelaz`` once per weights file on several positions (both
colours to move, a capture, a pass in the history, a long history) and several symmetries, and
compare its ``heatmap`` (floor(1000 p) per point, pass, winrate) with kosumi's evaluation.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import randomise_bn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import PASS, symmetry_permutation, transform_point, vertex_to_point
from kosumi.nets.checkpoint import load_net, save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.features import get_feature_set
from kosumi.nets.leelaz import (
    LEELAZ_TO_KOSUMI_SYMMETRY,
    LeelaZeroWeights,
    layer_specs,
    leelaz_bytes,
    read_leelaz,
    sniff_leelaz,
    write_leelaz,
)
from kosumi.nets.resnet import KosumiNet, inference_tensors
from kosumi.runtime.loader import load_evaluator
from kosumi.runtime.teacher import load_teacher

torch.set_num_threads(1)


N = 19


# ----------------------------------------------------------------------------- helpers
def lz_config(arch: str = "b1c4") -> NetConfig:
    return NetConfig(arch=arch, features="lz18", head="lz", board_sizes=[19], value="tanh",
                     score_lead=False, ownership=False)


def randomise_lz(net: KosumiNet, seed: int = 5) -> KosumiNet:
    """Non-trivial BN statistics and affine parameters, a peaked policy, a non-even value."""
    g = torch.Generator().manual_seed(seed)
    randomise_bn(net, g)
    with torch.no_grad():
        net.policy_fc.weight.mul_(8)
        net.policy_fc.bias.copy_(torch.randn(362, generator=g) * 0.5)
        net.value_fc1.bias.copy_(torch.randn(256, generator=g) * 0.5)
        net.value_fc2.weight.mul_(6)
        net.value_fc2.bias.fill_(0.2)
    return net


def random_lz_net(arch: str = "b1c4", seed: int = 3) -> KosumiNet:
    return randomise_lz(KosumiNet.random(lz_config(arch), seed), seed + 1)


def weights_of(net: KosumiNet, version: int = 1) -> LeelaZeroWeights:
    return LeelaZeroWeights.from_state_dict(inference_tensors(net), net.config, version=version)


def independent_lz_text(net: KosumiNet, version: int) -> str:
    """Leela Zero text written WITHOUT kosumi's writer (its own float format, spacing and gamma
    folding), so that reading it proves the reader, not a writer/reader pair."""
    def fmt(t: torch.Tensor) -> str:
        return "  ".join(f"{x:.7e}" for x in t.detach().double().reshape(-1).tolist())

    lines = [f"{version} "]

    def group(conv, bn):
        gamma = bn.weight.double()
        lines.append(fmt(conv.weight.double() * gamma[:, None, None, None]))
        lines.append(fmt(bn.bias.double() * torch.sqrt(bn.running_var.double() + 1e-5)))
        lines.append(fmt(bn.running_mean.double() * gamma))
        lines.append(" " + fmt(bn.running_var))

    group(net.input_conv, net.input_bn)
    for b in net.blocks:
        group(b.conv1, b.bn1)
        group(b.conv2, b.bn2)
    group(net.policy_conv, net.policy_bn)
    lines += [fmt(net.policy_fc.weight), fmt(net.policy_fc.bias)]
    group(net.value_conv, net.value_bn)
    lines += [fmt(net.value_fc1.weight), fmt(net.value_fc1.bias), fmt(net.value_fc2.weight),
              fmt(net.value_fc2.bias)]
    return "\n".join(lines)  # no final newline: leelaz accepts that too


def one_line_error(fn, path) -> str:
    with pytest.raises(KosumiError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg
    return msg


def masked(policy: np.ndarray, state: GameState) -> np.ndarray:
    """A raw policy [362] restricted to the legal moves and renormalised (kosumi's Evaluation)."""
    legal = np.append(state.legal_mask(), True)
    out = np.where(legal, policy, 0.0)
    return out / out.sum()


def raw_eval(net: KosumiNet, state: GameState) -> tuple[np.ndarray, float]:
    """The net's unmasked softmax policy (kosumi order) and side-to-move winrate."""
    planes, _ = get_feature_set("lz18").encode([state])
    with torch.no_grad():
        out = net(torch.from_numpy(planes))
    p = torch.softmax(out["policy"][0].double(), 0).numpy()
    return p, (1 + math.tanh(float(out["value"][0, 0]))) / 2


# ----------------------------------------------------------------------------- round trips
def test_layout_matches_leelaz_counts():
    for blocks, channels in [(0, 1), (1, 4), (6, 64), (40, 256)]:
        specs = layer_specs(blocks, channels)
        assert len(specs) + 1 == 19 + 8 * blocks  # + the version line
        assert specs[1].shape == (channels,)  # file line 3 gives the channels
        assert specs[4 + 8 * blocks + 4].shape == (362, 722)


def test_read_write_round_trip_is_byte_identical(tmp_path):
    net = random_lz_net("b2c4")
    w = weights_of(net)
    for name in ("net.txt", "net.txt.gz"):
        path = tmp_path / name
        write_leelaz(path, w)
        assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
        back = read_leelaz(path)
        assert (back.version, back.blocks, back.channels) == (1, 2, 4)
        assert back.gzipped == name.endswith(".gz")
        again = tmp_path / ("again-" + name)
        write_leelaz(again, back)
        assert again.read_bytes() == path.read_bytes()
    text = (tmp_path / "net.txt").read_bytes()
    assert text.endswith(b"\n") and not text.endswith(b"\n\n") and text.startswith(b"1\n")
    assert len(text.split(b"\n")) - 1 == 19 + 8 * 2


def test_foreign_file_round_trip_is_numerically_identical(tmp_path):
    net = random_lz_net("b1c4")
    foreign = independent_lz_text(net, version=2).replace("\n", "\r\n")
    path = tmp_path / "foreign.txt.gz"
    path.write_bytes(gzip.compress(foreign.encode()))
    w = read_leelaz(path)
    assert (w.version, w.blocks, w.channels, w.gzipped) == (2, 1, 4, True)
    out = tmp_path / "out.txt"
    write_leelaz(out, w)
    back = read_leelaz(out)
    assert back.version == 2
    for a, b in zip(w.layers, back.layers, strict=True):
        assert np.array_equal(a, b)


def test_state_dict_mapping_preserves_the_net():
    """net -> Leela Zero tensors (gamma folded) -> kosumi tensors -> same outputs."""
    net = random_lz_net("b2c8", seed=7)
    w = weights_of(net)
    rebuilt = KosumiNet(net.config).eval()
    rebuilt.load_state_dict({k: torch.from_numpy(v) for k, v in w.state_dict().items()},
                            strict=False)
    planes = (torch.rand(3, 18, 19, 19, generator=torch.Generator().manual_seed(1)) > 0.7)
    with torch.no_grad():
        a, b = net(planes.float()), rebuilt(planes.float())
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-4), k
    ck = w.to_checkpoint()
    assert ck.config.head == "lz" and set(ck.tensors) == set(inference_tensors(net))


def test_sniff():
    net_text = leelaz_bytes(weights_of(random_lz_net()))
    assert sniff_leelaz(net_text[:4096])
    assert sniff_leelaz(gzip.compress(net_text)[:4096])
    assert not sniff_leelaz(b"g170-b6c96 8 22 19\ntrunk 6 96")
    assert not sniff_leelaz(b"1\n0.1 0.2\n")  # too few values for an input convolution
    assert not sniff_leelaz(b"1\n" + b"0.5 " * 200 + b"x\n")
    assert sniff_leelaz(b"7\n" + b"0.5 " * 2000)  # claimed: the reader names the bad version
    assert not sniff_leelaz(b"\x00" * 16)


# ----------------------------------------------------------------------------- errors
@pytest.fixture(scope="module")
def small_lines() -> list[str]:
    """A valid b1c4 file as text lines (without the final newline)."""
    return leelaz_bytes(weights_of(random_lz_net("b1c4"))).decode().split("\n")[:-1]


def _mutate(lines: list[str], lineno: int, text: str) -> list[str]:
    out = list(lines)
    out[lineno - 1] = text
    return out


@pytest.mark.parametrize("edit,expected", [
    (lambda ls: _mutate(ls, 1, "3"), "line 1: version '3' is not"),
    (lambda ls: _mutate(ls, 1, "v1"), "line 1: version 'v1'"),
    (lambda ls: _mutate(ls, 1, ""), "line 1: version ''"),
    (lambda ls: _mutate(ls, 2, ls[1] + " 0.5"),
     "line 2 (input conv weights): 649 values, expected 648"),
    (lambda ls: _mutate(ls, 6, ls[5].rsplit(" ", 1)[0]),
     "line 6 (residual block 1 conv 1 weights): 143 values, expected 144"),
    (lambda ls: _mutate(ls, 11, ls[10] + " 0"),
     "line 11 (residual block 1 conv 2 biases): 5 values, expected 4"),
    (lambda ls: _mutate(ls, 14, ls[13].rsplit(" ", 1)[0]),
     "line 14 (policy conv weights): 7 values, expected 8"),
    (lambda ls: _mutate(ls, 18, ls[17] + " 1"), "line 18 (policy fc weights): 261365 values"),
    (lambda ls: _mutate(ls, 27, "0.1 0.2"), "line 27 (value fc2 bias): 2 values, expected 1"),
    (lambda ls: _mutate(ls, 4, "0.1 nan 0.2 0.3"), "line 4 (input conv bn means): 'nan' is not"),
    (lambda ls: _mutate(ls, 4, "0.1 inf 0.2 0.3"), "line 4 (input conv bn means): 'inf' is not"),
    (lambda ls: _mutate(ls, 4, "0.1 1e999 0.2 0.3"), "line 4 (input conv bn means): value 2 is"),
    (lambda ls: _mutate(ls, 4, "0.1 1_0 0.2 0.3"), "line 4 (input conv bn means): '1_0' is not"),
    (lambda ls: _mutate(ls, 4, "0.1 0.2.3 0.2 0.3"), "line 4 (input conv bn means): '0.2.3'"),
    (lambda ls: _mutate(ls, 5, "1 1 0 1"), "line 5 (input conv bn variances): variance 3 is 0"),
    (lambda ls: _mutate(ls, 9, "1 -1 1 1"),
     "line 9 (residual block 1 conv 1 bn variances): variance 2 is -1"),
    (lambda ls: [*ls, ""], "line 28 is empty (a trailing empty line"),
    (lambda ls: [*ls[:5], "", *ls[5:]], "line 6 is empty"),
    (lambda ls: ls[:-1], "26 lines (line 26 is the last) do not make a Leela Zero net"),
    (lambda ls: ls[:1], "1 lines"),
    (lambda ls: _mutate(ls, 3, ""), "line 3 is empty"),
])
def test_bad_files_give_one_line_errors(tmp_path, small_lines, edit, expected):
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(edit(small_lines)) + "\n")
    msg = one_line_error(lambda: read_leelaz(path), path)
    assert expected in msg, msg


def test_bad_gzip_and_unreadable(tmp_path, small_lines):
    data = gzip.compress(("\n".join(small_lines) + "\n").encode())
    path = tmp_path / "bad.txt.gz"
    for bad, expected in [(data[: len(data) // 2], "truncated gzip"), (data[:2], "truncated gzip"),
                          (data[:-8] + b"\0" * 8, "corrupted gzip"),
                          (data + b"junk", "garbage after the gzip data")]:
        path.write_bytes(bad)
        assert expected in one_line_error(lambda: read_leelaz(path), path)
    path.write_bytes(b"")
    assert "empty file" in one_line_error(lambda: read_leelaz(path), path)
    missing = tmp_path / "missing.txt"
    assert "cannot read" in one_line_error(lambda: read_leelaz(missing), missing)
    # a channel count leelaz would take from line 3, but the next lines disagree
    path.write_text("\n".join(_mutate(small_lines, 3, small_lines[2] + " 0.1")) + "\n")
    assert "line 2 (input conv weights): 648 values, expected 810" in one_line_error(
        lambda: read_leelaz(path), path)


def test_writer_validates_what_leelaz_does_not(tmp_path):
    net = random_lz_net()
    good = weights_of(net)
    path = tmp_path / "out.txt"
    path.write_text("old")
    cases = []
    w = weights_of(net)
    w.layers[3] = np.abs(w.layers[3]) * 0  # variances of the input BN
    cases.append((w, "line 5 (input conv bn variances): variance 1 is 0"))
    w = weights_of(net)
    w.layers[0] = w.layers[0].copy()
    w.layers[0][0, 0, 0, 0] = np.nan
    cases.append((w, "line 2 (input conv weights): value 1 is nan"))
    w = weights_of(net)
    w.layers[5] = w.layers[5][:3]
    cases.append((w, "line 7 (residual block 1 conv 1 biases): shape [3], expected [4]"))
    w = weights_of(net)
    w.layers.pop()
    cases.append((w, "25 tensors, a b1c4 net has 26"))
    w = weights_of(net)
    w.version = 3
    cases.append((w, "version 3 is not"))
    for bad, expected in cases:
        assert expected in one_line_error(lambda bad=bad: write_leelaz(path, bad), path)
        assert path.read_text() == "old"  # nothing written
    assert os.listdir(tmp_path) == ["out.txt"]  # and no temp file left
    write_leelaz(path, good)
    assert read_leelaz(path).layers[0].shape == (4, 18, 3, 3)


def test_unconvertible_nets_are_refused():
    conv = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[19]), 0)
    with pytest.raises(KosumiError, match="net: cannot be written as Leela Zero weights: it has "
                                          "a 'conv' head"):
        weights_of(conv)
    basic = NetConfig(arch="b1c4", features="basic", head="lz", board_sizes=[19], value="tanh",
                      score_lead=False, ownership=False)
    with pytest.raises(KosumiError, match="input features are 'basic'"):
        weights_of(KosumiNet.random(basic, 0))
    tensors = inference_tensors(random_lz_net())
    negative = {**tensors, "input_bn.running_var": -tensors["input_bn.running_var"]}
    with pytest.raises(KosumiError, match=r"'input_bn.running_var' has a non-positive"):
        LeelaZeroWeights.from_state_dict(negative, lz_config())
    del tensors["policy_fc.bias"]
    with pytest.raises(KosumiError, match=r"tensor 'policy_fc.bias' is missing"):
        LeelaZeroWeights.from_state_dict(tensors, lz_config())
    # a version-2 net (Black's value) is a checkpoint whose config says so, and writes back
    # as version 2
    v2 = weights_of(random_lz_net(), version=2).to_checkpoint()
    assert v2.config.value_view == "black"
    assert LeelaZeroWeights.from_state_dict(v2.tensors, v2.config, version=2).version == 2


@pytest.fixture(scope="module")
def tiny_file_bytes() -> tuple[bytes, bytes]:
    text = leelaz_bytes(weights_of(random_lz_net("b1c2")))
    return text, gzip.compress(text, mtime=0)


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_files_load_or_fail_cleanly(tmp_path, tiny_file_bytes, data):
    text, gz = tiny_file_bytes
    use_gz = data.draw(st.booleans())
    b = bytearray(gz if use_gz else text)
    kind = data.draw(st.sampled_from(["byte", "delete", "insert", "truncate", "line"]))
    if kind == "byte":
        for _ in range(data.draw(st.integers(1, 4))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
    elif kind == "delete":
        at = data.draw(st.integers(0, len(b) - 1))
        del b[at : at + data.draw(st.integers(1, 64))]
    elif kind == "insert":
        at = data.draw(st.integers(0, len(b)))
        b[at:at] = data.draw(st.binary(min_size=1, max_size=8) | st.sampled_from(
            [b"\n", b" ", b"nan", b" 1e40", b"-", b"\n\n", b"0"]))
    elif kind == "truncate":
        del b[data.draw(st.integers(0, len(b) - 1)):]
    else:  # drop, duplicate or swap whole lines of the text
        lines = bytes(text).split(b"\n")
        i = data.draw(st.integers(0, len(lines) - 1))
        j = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["drop", "dup", "swap"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[j])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        b = bytearray(b"\n".join(lines))
        if use_gz:
            b = bytearray(gzip.compress(bytes(b), mtime=0))
    path = tmp_path / "m.txt"
    path.write_bytes(bytes(b))
    start = time.monotonic()
    try:
        w = read_leelaz(path)
    except KosumiError as e:
        assert "\n" not in str(e) and str(path) in str(e)
    else:  # e.g. a changed digit: still a valid net
        w.validate()
    assert time.monotonic() - start < 10


# ----------------------------------------------------------------------------- runtime
def test_load_evaluator_and_teacher(tmp_path):
    net = random_lz_net("b1c4")
    v1, v2 = tmp_path / "v1.txt.gz", tmp_path / "v2.txt"
    write_leelaz(v1, weights_of(net, 1))
    write_leelaz(v2, weights_of(net, 2))
    s = GameState(19)
    for v in ["D4", "Q16", "C3"]:
        s.play(vertex_to_point(v, 19))  # White to move
    p, w = raw_eval(net, s)
    assert abs(w - 0.5) > 0.01  # the value is informative
    for path in (v1, v2):
        ev = load_evaluator(path, cache=False)
        teacher = load_teacher(path, symmetries=8)
        assert ev.supports_size(19) and not ev.supports_size(9)
        e = ev.evaluate_one(s)
        assert np.abs(e.policy - masked(p, s)).max() < 1e-6
        assert abs(e.value - (w if path == v1 else 1 - w)) < 1e-5
        assert abs(teacher.evaluate_one(s).value - 0.5) < 0.5
    black = GameState(19)
    assert abs(load_evaluator(v2).evaluate_one(black).value - raw_eval(net, black)[1]) < 1e-5
    ck = tmp_path / "net.kosumi"
    save_checkpoint(ck, net)
    assert abs(load_teacher(ck).evaluate_one(s).value - w) < 1e-5
    with pytest.raises(KosumiError, match=r"symmetries must be 1..8"):
        load_teacher(ck, symmetries=9)
    bad = tmp_path / "bad.txt"
    bad.write_text("7\n" + "0.5 " * 300 + "\n")
    msg = one_line_error(lambda: load_teacher(bad), bad)
    assert "line 1: version '7'" in msg


# ----------------------------------------------------------------------------- CLI export
def test_cli_export(tmp_path):
    runner = CliRunner()
    ck = tmp_path / "lz.kosumi"
    r = runner.invoke(app, ["init", "--head", "lz", "--features", "lz18", "--arch", "b1c4",
                            "--out", str(ck)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "lz.txt.gz"
    r = runner.invoke(app, ["export", str(ck), "--format", "leelaz", "--out", str(out)])
    assert r.exit_code == 0 and "Leela Zero weights v1, gzip, b1c4" in r.output, r.output
    assert read_leelaz(out).gzipped
    again = tmp_path / "again.txt"  # Leela Zero -> Leela Zero (un-gzip)
    r = runner.invoke(app, ["export", str(out), "--format", "leelaz", "--out", str(again)])
    assert r.exit_code == 0, r.output
    assert again.read_bytes() == gzip.decompress(out.read_bytes())
    conv = tmp_path / "conv.kosumi"
    runner.invoke(app, ["init", "--arch", "b1c4", "--out", str(conv)])
    for args, expected in [
        ([str(conv), "--format", "leelaz", "--out", str(tmp_path / "c.txt")], "'conv' head"),
        ([str(ck), "--format", "nope", "--out", str(tmp_path / "c.txt")], "unknown export format"),
        ([str(tmp_path / "missing"), "--format", "leelaz", "--out", str(tmp_path / "c.txt")],
         "No such file"),
    ]:
        r = runner.invoke(app, ["export", *args])
        assert r.exit_code == 2 and expected in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "c.txt").exists()


# ----------------------------------------------------------------------------- vs. leelaz
#: positions as GTP moves from the empty board
POSITIONS: dict[str, list[tuple[str, str]]] = {
    "empty": [],
    "opening": [("B", "D4"), ("W", "Q16"), ("B", "C17"), ("W", "R3"), ("B", "K10")],
    "capture": [("B", "K9"), ("W", "K10"), ("B", "J10"), ("W", "K11"), ("B", "L10"),
                ("W", "C3"), ("B", "J11"), ("W", "C5"), ("B", "L11"), ("W", "C7"),
                ("B", "K12")],  # Black captures K10+K11; White to move
    "after_capture": [("B", "K9"), ("W", "K10"), ("B", "J10"), ("W", "K11"), ("B", "L10"),
                      ("W", "C3"), ("B", "J11"), ("W", "C5"), ("B", "L11"), ("W", "C7"),
                      ("B", "K12"), ("W", "Q16")],
    "pass": [("B", "D4"), ("W", "pass"), ("B", "Q16"), ("W", "D16"), ("B", "pass")],
    "long": [("B", "Q16"), ("W", "D4"), ("B", "Q4"), ("W", "D16"), ("B", "C3"), ("W", "D3"),
             ("B", "C4"), ("W", "D5"), ("B", "C6"), ("W", "R6"), ("B", "R5"), ("W", "Q6"),
             ("B", "O3"), ("W", "pass")],
}

#: (position, heatmap argument): "" = plain ``heatmap`` (symmetry 0), "avg" = all 8 averaged
QUERIES: list[tuple[str, str]] = (
    [("opening", "")] + [("opening", str(k)) for k in range(8)]
    + [("empty", ""), ("empty", "5"), ("capture", ""), ("capture", "3"), ("capture", "6"),
       ("after_capture", ""), ("after_capture", "1"), ("pass", ""), ("pass", "4"),
       ("pass", "7"), ("long", ""), ("long", "2"), ("opening", "avg"), ("capture", "avg")]
)


def leelaz_symmetry_to_kosumi(sym: int) -> int:
    """The kosumi symmetry that transforms a position as Leela Zero's symmetry ``sym`` does.

    Leela Zero (frame: x = column, y = 0 the bottom row) feeds its net the board read through
    ``S(x, y)``: transpose if bit 2, then x -> 18 - x if bit 1, then y -> 18 - y if bit 0; and
    maps the outputs back, so ``heatmap`` prints in the original frame. kosumi symmetry k moves
    the stone on p to ``perm[p]``; the net sees ``T[q] = original[S(q)]``, so we need
    ``perm[S(q)] = q``.
    """
    def source(q: int) -> int:
        x, y = q % N, N - 1 - q // N  # into Leela Zero's frame
        if sym & 4:
            x, y = y, x
        if sym & 2:
            x = N - 1 - x
        if sym & 1:
            y = N - 1 - y
        return (N - 1 - y) * N + x

    src = np.array([source(q) for q in range(N * N)])
    found = [k for k in range(8) if np.array_equal(symmetry_permutation(N, k)[src],
                                                   np.arange(N * N))]
    assert len(found) == 1
    assert found[0] == LEELAZ_TO_KOSUMI_SYMMETRY[sym]
    return found[0]


def play(moves: list[tuple[str, str]], sym: int = 0) -> GameState:
    s = GameState(19)
    for colour, vertex in moves:
        p = vertex_to_point(vertex, 19)
        s.play(transform_point(p, 19, sym) if p != PASS else PASS,
               1 if colour == "B" else 2)
    return s


def run_leelaz(leelaz: str, weights: Path, home: Path) -> list[tuple[np.ndarray, int, float]]:
    """One leelaz process: every query of QUERIES; returns (heatmap [361] in kosumi order,
    pass, winrate) per query, parsed from stderr."""
    home.mkdir(exist_ok=True)
    cmds = []
    for pos, arg in QUERIES:
        cmds.append("clear_board")
        cmds += [f"play {c} {v}" for c, v in POSITIONS[pos]]
        cmds.append(f"heatmap {'average' if arg == 'avg' else arg}".strip())
    r = subprocess.run([leelaz, "--cpu-only", "-w", str(weights), "--gtp", "--noponder", "-t",
                        "1", "--timemanage", "off", "-r", "0"],
                       input="\n".join(cmds) + "\nquit\n", capture_output=True, text=True,
                       env={**os.environ, "HOME": str(home)}, timeout=120, check=False)
    replies = [line for line in r.stdout.splitlines() if line[:1] in ("=", "?")]
    assert len(replies) == len(cmds) + 1 and all(x.startswith("=") for x in replies), (
        r.stdout[-2000:], r.stderr[-2000:])
    err = r.stderr.splitlines()
    out = []
    for at, line in enumerate(err):
        if line.startswith("pass: "):
            rows = [[int(x) for x in row.split()] for row in err[at - N : at]]
            assert all(len(row) == N for row in rows)
            m = re.fullmatch(r"winrate: ([0-9.]+)", err[at + 1])
            assert m
            out.append((np.array(rows).reshape(-1), int(line.split()[1]), float(m.group(1))))
    assert len(out) == len(QUERIES)
    return out


def kosumi_raw_policy(ev, state: GameState, sym: int) -> np.ndarray:
    """The unmasked softmax policy [362] (as leelaz's heatmap shows it) of kosumi's evaluator
    ``ev`` (a NetEvaluator: its own features and backend) for ``state`` seen under kosumi
    symmetry ``sym``, mapped back to the original frame."""
    planes, glob = ev.features.encode([state])
    perm = symmetry_permutation(N, sym)
    moved = np.empty_like(planes.reshape(1, 18, N * N))
    moved[..., perm] = planes.reshape(1, 18, N * N)
    logits = ev.backend.forward(moved.reshape(1, 18, N, N), glob)["policy"][0].astype(np.float64)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    return np.append(p[:-1][perm], p[-1])


def compare_with_leelaz(leelaz: str, weights: Path, model: Path, home: Path) -> tuple[int, float]:
    """leelaz's heatmaps of ``weights`` vs kosumi's evaluation of ``model`` (the same net).

    leelaz's heatmap is the net's raw softmax over all 362 outputs (occupied points included,
    printed as 0); a kosumi Evaluation is that policy restricted to legal moves. So per query:
    the raw policy of kosumi's evaluator (features + backend, the position transformed by the
    kosumi symmetry equal to leelaz's symmetry N, mapped back) must give the same floor(1000 p)
    (+-1) and pass; kosumi's Evaluation -- of the transformed position, or with 8 symmetries for
    ``heatmap average`` -- must be exactly that policy masked, and give the same winrate.
    Returns (max |diff| in heatmap units, max |winrate diff|)."""
    results = run_leelaz(leelaz, weights, home)
    plain = load_evaluator(model, cache=False)
    averaged = load_teacher(model, symmetries=8, cache=False)
    worst_heat, worst_win = 0, 0.0
    for (pos, arg), (heat, lz_pass, lz_win) in zip(QUERIES, results, strict=True):
        state = play(POSITIONS[pos])
        empty = np.frombuffer(bytes(state.board), np.uint8) == 0
        if arg == "avg":
            raws = [kosumi_raw_policy(plain, state, k) for k in range(8)]
            raw = np.mean(raws, axis=0)
            e = averaged.evaluate_one(state)
            expected = np.mean([masked(r, state) for r in raws], axis=0)
            assert np.abs(e.policy - expected / expected.sum()).max() < 1e-6
        else:
            k = leelaz_symmetry_to_kosumi(int(arg or 0))
            raw = kosumi_raw_policy(plain, state, k)
            e = plain.evaluate_one(play(POSITIONS[pos], k))
            policy = np.append(e.policy[:-1][symmetry_permutation(N, k)], e.policy[-1])
            assert np.abs(policy - masked(raw, state)).max() < 1e-6
        mine = np.where(empty, np.floor(1000 * raw[:361]).astype(int), 0)
        diff = int(np.abs(heat - mine).max())
        pass_diff = abs(lz_pass - int(1000 * raw[361]))
        assert diff <= 1 and pass_diff <= 1, (pos, arg, diff, pass_diff)  # floor() may straddle
        assert abs(lz_win - e.value) < 5e-6, (pos, arg, lz_win, e.value)
        worst_heat = max(worst_heat, diff, pass_diff)
        worst_win = max(worst_win, abs(lz_win - e.value))
    assert max(int(h.max()) for h, _, _ in results) > 300  # informative: peaked policies
    whites = [w for (pos, _), (_, _, w) in zip(QUERIES, results, strict=True)
              if len(POSITIONS[pos]) % 2]
    assert max(abs(w - 0.5) for w in whites) > 0.02  # the value perspective is exercised
    print(f"\n{weights.name}: {len(QUERIES)} heatmaps, max |heatmap diff| {worst_heat}, "
          f"max |winrate diff| {worst_win:.2e}")
    return worst_heat, worst_win


def test_exported_net_matches_leelaz(leelaz, tmp_path):
    """kosumi init --head lz -> non-trivial BN -> kosumi export -> leelaz agrees with kosumi."""
    runner = CliRunner()
    ck = tmp_path / "lz.kosumi"
    r = runner.invoke(app, ["init", "--head", "lz", "--features", "lz18", "--arch", "b2c16",
                            "--seed", "11", "--out", str(ck)])
    assert r.exit_code == 0, r.output
    save_checkpoint(ck, randomise_lz(load_net(ck), 5))
    weights = tmp_path / "lz.txt"
    r = runner.invoke(app, ["export", str(ck), "--format", "leelaz", "--out", str(weights)])
    assert r.exit_code == 0, r.output
    compare_with_leelaz(leelaz, weights, ck, tmp_path / "home")


def test_read_foreign_v2_file_matches_leelaz(leelaz, tmp_path):
    """A gzipped version-2 file written by another writer: leelaz and kosumi's reader agree
    (so reading is proven against the peer, including Black's-view values)."""
    net = randomise_lz(KosumiNet.random(lz_config("b1c8"), 21), 22)
    weights = tmp_path / "foreign-v2.txt.gz"
    weights.write_bytes(gzip.compress(independent_lz_text(net, version=2).encode()))
    assert read_leelaz(weights).version == 2
    compare_with_leelaz(leelaz, weights, weights, tmp_path / "home")
