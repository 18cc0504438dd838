"""The kosumi pack (kosumi.nets.pack): bit-exact round trips, damage refused in one line, a
pack played by every command, and a bare install (numpy + zstandard, no torch or onnx) that
plays from one."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import typer
from helpers import ROOT, quantized_net_files
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.pack import MAGIC, read_pack_model
from kosumi.runtime import load_evaluator
from kosumi.runtime.bench import bench_states


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    root = tmp_path_factory.mktemp("pack")
    net, _, q = quantized_net_files(root, seed=4)
    packs = {}
    for name, src in (("float", net), ("int8", q)):
        out = root / f"{name}.kpk"
        r = CliRunner().invoke(app, ["export", str(src), "--format", "pack", "--out", str(out)])
        assert r.exit_code == 0 and "kosumi pack" in r.output, r.output
        packs[name] = (src, out)
    return packs


def test_packs_read_back_bit_for_bit(nets):
    for src, pack in nets.values():
        a, b = read_checkpoint(src), read_pack_model(pack)
        assert set(a.tensors) == set(b.tensors)
        for k in a.tensors:
            assert a.tensors[k].dtype == b.tensors[k].dtype and np.array_equal(a.tensors[k],
                                                                              b.tensors[k]), k
        assert b.config.quantized == a.config.quantized
    # and they play the same: the pack on the numpy integer backend is the checkpoint's net
    src, pack = nets["int8"]
    states = bench_states(9, 16, seed=8)
    x = load_evaluator(src, backend="numpy", cache=False).evaluate(states)
    y = load_evaluator(pack, backend="numpy", cache=False).evaluate(states)
    for e1, e2 in zip(x, y, strict=True):
        assert np.array_equal(e1.policy, e2.policy) and e1.value == e2.value


def test_both_frame_plans_read_back_bit_for_bit(nets, tmp_path):
    """One zstd frame for everything, a frame per tensor, or a frame per dtype: the writer keeps
    the smallest, and the reader takes each."""
    from kosumi.nets.pack import _pack_bytes

    src, _ = nets["int8"]
    ck = read_checkpoint(src)
    entries = [{"name": k, "dtype": str(v.dtype), "shape": list(v.shape), "layout": []}
               for k, v in ck.tensors.items()]
    stored = [v.tobytes() for v in ck.tensors.values()]
    for plan in ("one", "own", "dtype"):
        path = tmp_path / f"{plan}.kpk"
        path.write_bytes(_pack_bytes(ck.config, entries, stored, [], 19, plan))
        back = read_pack_model(path)
        for k, arr in ck.tensors.items():
            assert back.tensors[k].dtype == arr.dtype and np.array_equal(back.tensors[k], arr)


def test_a_version_1_pack_still_reads(nets, tmp_path):
    """A pack in the first format (every tensor with an explicit offset and size), written here
    by hand from the format's description, reads back bit for bit."""
    import hashlib

    import zstandard

    src, _ = nets["int8"]
    ck = read_checkpoint(src)
    payload, entries = b"", []
    for name, arr in ck.tensors.items():
        entries.append({"name": name, "dtype": str(arr.dtype), "shape": list(arr.shape),
                        "layout": [], "offset": len(payload), "nbytes": arr.nbytes})
        payload += arr.tobytes()
    header = {"config": json.loads(ck.config.to_json()), "tensors": entries, "blobs": []}
    zc = zstandard.ZstdCompressor(level=3)
    head = zc.compress(json.dumps(header).encode())
    body = MAGIC + struct.pack("<HHI", 1, 0, len(head)) + head + zc.compress(payload)
    old = tmp_path / "v1.kpk"
    old.write_bytes(body + hashlib.sha256(body).digest())
    back = read_pack_model(old)
    assert set(back.tensors) == set(ck.tensors)
    for k, arr in ck.tensors.items():
        assert back.tensors[k].dtype == arr.dtype and np.array_equal(back.tensors[k], arr), k
    info = CliRunner().invoke(app, ["inspect", str(old)])
    assert info.exit_code == 0 and "version 1" in info.output, info.output


def test_damaged_packs_are_one_line_errors(nets, tmp_path):
    _, pack = nets["int8"]
    data = pack.read_bytes()
    assert data.startswith(MAGIC)
    cases = {"truncated": data[:len(data) // 2], "short": data[:20], "magic": b"X" + data[1:],
             "newer": data[:8] + struct.pack("<H", 9) + data[10:]}
    for where in (9, 20, len(data) // 2, len(data) - 40, len(data) - 1):
        cases[f"flip{where}"] = data[:where] + bytes([data[where] ^ 0x10]) + data[where + 1:]
    runner = CliRunner()
    for name, content in cases.items():
        path = tmp_path / f"{name}.kpk"
        path.write_bytes(content)
        r = runner.invoke(app, ["analyze", "--model", str(path), "--moves", "E5", "--size", "9"])
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and str(path) in lines[0], (name, r.output)
    assert "newer than this kosumi reads" in runner.invoke(
        app, ["inspect", str(tmp_path / "newer.kpk")]).output
    assert "SHA-256" in runner.invoke(app, ["inspect", str(tmp_path / "flip20.kpk")]).output


def test_a_pack_in_every_command(nets):
    _, pack = nets["int8"]
    r = CliRunner().invoke(app, ["inspect", str(pack), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["format"].startswith("kosumi pack") and info["quantization"]["bits"] == 8
    assert "sensitivity" not in json.dumps(info)  # the report tables stay in the checkpoint
    assert load_evaluator(pack, cache=False).backend.name == "onnxruntime"  # auto: any backend
    proc = subprocess.run([sys.executable, "-m", "kosumi", "gtp", "--model", str(pack),
                           "--visits", "16"], input="boardsize 9\ngenmove b\nquit\n",
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.count("=") == 3, proc.stderr


@pytest.mark.slow
def test_a_bare_install_plays_from_a_pack(nets, tmp_path):
    """``pip install .`` with no extras in a fresh virtual environment: no torch, no onnx, no
    matplotlib; it plays GTP moves from a pack and analyses a position (numpy int8 backend)."""
    _, pack = nets["int8"]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", str(ROOT)], env=env,
                         capture_output=True, text=True, timeout=900, check=False)
    assert pip.returncode == 0, pip.stderr[-2000:]
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format", "json"], env=env,
                            capture_output=True, text=True, check=True).stdout
    names = {p["name"].lower() for p in json.loads(listed)}
    assert {"numpy", "zstandard", "kosumi"} <= names
    assert not names & {"torch", "onnx", "onnxruntime", "matplotlib", "safetensors"}, names
    kosumi = venv / "bin" / "kosumi"
    gtp = subprocess.run([str(kosumi), "gtp", "--model", str(pack), "--visits", "32"],
                         input="boardsize 9\ngenmove b\nplay w E5\ngenmove b\nquit\n", env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert gtp.returncode == 0, gtp.stderr
    replies = [x for x in gtp.stdout.splitlines() if x.startswith("=")]
    assert len(replies) == 5 and replies[1][2:].strip()[0] in "ABCDEFGHJ", gtp.stdout
    assert "backend auto -> numpy" in gtp.stderr
    # the embedded tiny pack ships with the core install and plays from it
    tiny = subprocess.run([str(kosumi), "gtp", "--model", "tiny", "--visits", "32"],
                          input="boardsize 9\nkomi 7\ngenmove b\nquit\n", env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert tiny.returncode == 0, tiny.stderr
    replies = [x for x in tiny.stdout.splitlines() if x.startswith("=")]
    assert len(replies) == 4 and replies[2][2:].strip()[0] in "ABCDEFGHJ", tiny.stdout
    assert "backend auto -> numpy" in tiny.stderr and "tiny" in tiny.stderr
    # every command's help works on the core, and a command that needs an extra names it in
    # one line (exit 2), never a traceback
    commands = [c.name for c in typer.main.get_command(app).commands.values()]
    assert len(commands) > 10
    for name in commands:
        helped = subprocess.run([str(kosumi), name, "--help"], env=env, capture_output=True,
                                text=True, timeout=120, check=False)
        assert helped.returncode == 0 and "Usage" in helped.stdout, (name, helped.stderr)
    for fmt, extra in (("onnx", "onnx"), ("kosumi", "train")):
        out = tmp_path / f"t.{fmt}"
        done = subprocess.run([str(kosumi), "export", "tiny", "--format", fmt, "--out",
                               str(out)], env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert f"pip install 'kosumi[{extra}]'" in lines[0] and not out.exists()
    # onnxruntime beside the core, without onnx: the backend says which package is missing
    ort = subprocess.run([str(py), "-m", "pip", "install", "-q", "onnxruntime"], env=env,
                         capture_output=True, text=True, timeout=900, check=False)
    assert ort.returncode == 0, ort.stderr[-2000:]
    asked = subprocess.run([str(kosumi), "analyze", "--model", "tiny", "--moves", "D4",
                            "--backend", "onnxruntime"], env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    lines = asked.stderr.strip().splitlines()
    assert asked.returncode == 2 and len(lines) == 1, asked.stderr
    assert "it needs onnx, which is missing (pip install 'kosumi[onnx]')" in lines[0]
    ana = subprocess.run([str(kosumi), "analyze", "--model", str(pack), "--moves", "B E5 W C3",
                          "--size", "9", "--json"], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert ana.returncode == 0, ana.stderr
    rec = json.loads(ana.stdout)
    assert rec["to_move"] == "B" and abs(sum(rec["policy"]) + rec["policy_pass"] - 1) < 1e-4
