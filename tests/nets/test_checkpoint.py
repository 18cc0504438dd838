"""kosumi checkpoints (kosumi.nets.checkpoint): typed tensors, extra tensors the config
declares, old files, round trips, atomic writes, and damaged files refused in one line."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import lz_config, random_inputs, random_net_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.numpy import save as st_save

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import (
    atomic_write,
    build_net,
    load_net,
    read_checkpoint,
    save_checkpoint,
)
from kosumi.nets.config import NetConfig
from kosumi.nets.formats import read_model
from kosumi.nets.resnet import KosumiNet


def test_typed_tensors_round_trip_with_their_types(tmp_path):
    base = read_checkpoint(random_net_file(tmp_path / "a.safetensors", arch="b1c8"))
    extra = {"quant.scale": np.array([0.5, 0.25], np.float32),
             "quant.codes": np.array([[-128, 127], [0, 3]], np.int8),
             "quant.bias": np.array([-(2**31), 2**31 - 1], np.int32),
             "quant.zero": np.array([0, 255], np.uint8),
             "quant.half": np.array([1.5, -2.0], np.float16)}
    cfg = NetConfig.from_dict({**base.config.to_dict(), "extra_tensors": sorted(extra)})
    path = tmp_path / "typed.safetensors"
    save_checkpoint(path, {**base.tensors, **extra}, cfg)
    # the safetensors header names the stored types (an independent look at the bytes)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    assert {k: header[k]["dtype"] for k in extra} == {
        "quant.scale": "F32", "quant.codes": "I8", "quant.bias": "I32", "quant.zero": "U8",
        "quant.half": "F16"}
    back = read_checkpoint(path)
    for k, v in extra.items():
        assert back.tensors[k].dtype == v.dtype
        np.testing.assert_array_equal(back.tensors[k], v)
    assert back.config.extra_tensors == sorted(extra)
    build_net(back)  # declared extras are allowed beside the architecture's tensors


def test_undeclared_and_missing_extras_and_quantized_weights(tmp_path):
    base = read_checkpoint(random_net_file(tmp_path / "a.safetensors", arch="b1c8"))
    path = tmp_path / "x.safetensors"
    save_checkpoint(path, {**base.tensors, "stray": np.zeros(2, np.float32)}, base.config)
    with pytest.raises(KosumiError, match="unexpected tensor 'stray'"):
        build_net(read_checkpoint(path))
    cfg = NetConfig.from_dict({**base.config.to_dict(), "extra_tensors": ["scales"]})
    save_checkpoint(path, base.tensors, cfg)
    with pytest.raises(KosumiError, match="tensor 'scales' is missing"):
        build_net(read_checkpoint(path))
    int8 = dict(base.tensors)
    int8["input_conv.weight"] = np.zeros(int8["input_conv.weight"].shape, np.int8)
    save_checkpoint(path, int8, base.config)
    with pytest.raises(KosumiError, match=r"is int8 .a quantized net.; torch runs float"):
        build_net(read_checkpoint(path))
    with pytest.raises(KosumiError, match="not floating point"):
        from kosumi.runtime import load_evaluator

        load_evaluator(path, backend="numpy")
    with pytest.raises(KosumiError, match="dtype int64"):
        save_checkpoint(path, {"a": np.zeros(2, np.int64)}, base.config)
    with pytest.raises(KosumiError, match="NaN or inf"):
        save_checkpoint(path, {"a": np.array([np.nan], np.float16)}, base.config)


def test_old_configs_read_unchanged():
    """A config written before the optional fields existed reads, and writes back the same
    JSON (the optional fields are left out at their defaults)."""
    old = ('{"version":1,"arch":"b6c64","features":"basic","head":"conv","board_sizes":[9,19],'
           '"value":"wdl","score_lead":true,"ownership":true,"policy_channels":16,'
           '"value_channels":16,"value_hidden":32,"provenance":{}}')
    assert NetConfig.from_json(old).to_json() == old
    _, ckpt = read_model("default")  # the embedded net, written before this release
    assert ckpt.config.value_view == "side_to_move" and ckpt.config.extra_tensors == []


# ----------------------------------------------------------------------------- checkpoints
@pytest.fixture(scope="module")
def small_net() -> KosumiNet:
    return KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9]), 1)


@pytest.fixture(scope="module")
def small_bytes(small_net, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("ck") / "small.kosumi"
    save_checkpoint(path, small_net)
    return path.read_bytes()


@pytest.mark.parametrize("config", [NetConfig(arch="b2c16", board_sizes=[9, 19]), lz_config()])
def test_checkpoint_round_trip(tmp_path, config):
    net = KosumiNet.random(config, 3)
    path = tmp_path / "net.safetensors"
    size = save_checkpoint(path, net)
    assert size == path.stat().st_size
    loaded = load_net(path)
    assert loaded.config == config
    for n in config.board_sizes:
        x = random_inputs(config, n)
        with torch.no_grad():
            a, b = net(*x), loaded(*x)
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), k
    ck = read_checkpoint(path)
    assert ck.metadata["format"] == "kosumi-checkpoint"
    assert not any(k.endswith("num_batches_tracked") for k in ck.tensors)


SAVE_IN_A_PROCESS = """
import sys
import numpy as np
from kosumi.nets.checkpoint import checkpoint_bytes
from kosumi.nets.config import NetConfig
tensors = {"a": np.arange(6, dtype=np.float32), "b": np.array([-3, 4], np.int8)}
meta = {f"key{i}": "\u00e9" * i for i in range(6)}
sys.stdout.buffer.write(checkpoint_bytes(tensors, NetConfig(arch="b1c8"), meta))
"""


def test_the_same_net_saved_in_other_processes_gives_the_same_bytes(tmp_path):
    # safetensors orders the metadata by a Rust HashMap seeded anew in every process: 8 keys
    # in three processes came out in one order by chance once in 40,320^2
    runs = [subprocess.run([sys.executable, "-c", SAVE_IN_A_PROCESS], check=True,
                           capture_output=True).stdout for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    path = tmp_path / "n.safetensors"
    path.write_bytes(runs[0])
    with safe_open(path, "np") as f:  # safetensors' own reader takes it
        meta = f.metadata()
        assert f.get_tensor("b").tolist() == [-3, 4]
    assert meta["key3"] == "\u00e9" * 3 and len(meta) == 8
    n = int.from_bytes(runs[0][:8], "little")
    written = json.loads(runs[0][8:8 + n])["__metadata__"]
    assert list(written) == sorted(meta)
    assert read_checkpoint(path).config == NetConfig(arch="b1c8")


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch, small_net):
    path = tmp_path / "net.kosumi"
    path.write_bytes(b"old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        save_checkpoint(path, small_net)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["net.kosumi"]  # no temp file left behind
    monkeypatch.undo()
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["net.kosumi"]


def _one_line_error(path, fn=lambda p: build_net(read_checkpoint(p), p)) -> str:
    with pytest.raises(KosumiError) as e:
        fn(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg
    return msg


def test_bad_files_give_one_line_errors(tmp_path, small_bytes):
    p = tmp_path / "x.kosumi"
    p.write_bytes(b"1\n0.5 0.25\n")  # a Leela Zero-like text file
    assert "not a safetensors file" in _one_line_error(p)
    for cut in (4, 20, len(small_bytes) // 2, len(small_bytes) - 1):
        p.write_bytes(small_bytes[:cut])
        assert "truncated" in _one_line_error(p)
    assert "cannot read" in _one_line_error(tmp_path / "missing.kosumi")


def _rewrite(small_bytes: bytes, path, edit) -> None:
    """Re-save the checkpoint's tensors after ``edit(tensors)``, keeping its metadata."""
    n = struct.unpack("<Q", small_bytes[:8])[0]
    meta = json.loads(small_bytes[8 : 8 + n])["__metadata__"]
    ck_path = path.with_suffix(".orig")
    ck_path.write_bytes(small_bytes)
    tensors = dict(read_checkpoint(ck_path).tensors)
    edit(tensors)
    path.write_bytes(st_save(tensors, metadata=meta))


def test_tensor_errors_name_the_tensor(tmp_path, small_bytes):
    p = tmp_path / "t.kosumi"
    name = "blocks.0.conv1.weight"

    def nan(t):
        t[name] = t[name].copy()
        t[name][0, 0, 0, 0] = np.nan

    for edit, expected in [
        (nan, f"tensor '{name}': holds NaN or inf"),
        (lambda t: t.pop(name), f"tensor '{name}' is missing"),
        (lambda t: t.__setitem__("extra.weight", np.zeros(3, np.float32)),
         "unexpected tensor 'extra.weight'"),
        (lambda t: t.__setitem__(name, np.zeros((8, 8, 1, 1), np.float32)),
         f"tensor '{name}' has shape [8, 8, 1, 1], expected [8, 8, 3, 3]"),
    ]:
        _rewrite(small_bytes, p, edit)
        assert expected in _one_line_error(p)
    p.write_bytes(st_save({"w": np.zeros(2, np.float32)}, metadata={"x": "y"}))
    assert "without a kosumi config" in _one_line_error(p)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_checkpoints_load_or_fail_cleanly(tmp_path, small_bytes, data):
    b = bytearray(small_bytes)
    kind = data.draw(st.sampled_from(["flip", "header", "truncate", "insert"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
    elif kind == "header":
        n = struct.unpack("<Q", small_bytes[:8])[0]
        b[data.draw(st.integers(0, 8 + n - 1))] = data.draw(st.integers(0, 255))
    elif kind == "truncate":
        del b[data.draw(st.integers(0, len(b) - 1)):]
    else:
        at = data.draw(st.integers(0, len(b)))
        b[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    path = tmp_path / "m.kosumi"
    path.write_bytes(bytes(b))
    try:
        net = build_net(read_checkpoint(path), path)
    except KosumiError as e:
        assert "\n" not in str(e) and str(path) in str(e)
    else:  # a mutation inside the float data that left finite values loads fine
        assert isinstance(net, KosumiNet)
