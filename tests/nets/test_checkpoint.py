"""kosumi checkpoints: typed tensors, extra tensors the config declares, old files, and
provenance a user can share."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import random_net_file

from kosumi.errors import KosumiError
from kosumi.fileio import shareable_path
from kosumi.nets.checkpoint import build_net, read_checkpoint, save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.formats import read_model


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


def _strings(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)
    elif isinstance(x, str):
        yield x


def test_provenance_holds_no_absolute_path_of_the_machine():
    _, ckpt = read_model("default")
    prov = ckpt.config.provenance
    assert prov["data"]["path"] == "runs/v2/labels" and prov["data"]["content_hash"]
    assert not [s for s in _strings(prov) if s.startswith("/")]


def test_shareable_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shareable_path(tmp_path / "runs" / "labels") == str(Path("runs") / "labels")
    assert shareable_path("runs/labels") == "runs/labels"
    assert shareable_path("../shared/x") == "../shared/x"
    assert shareable_path("/elsewhere/labels") == "/elsewhere/labels"  # as the user gave it
