"""NetConfig, KosumiNet (both heads) and kosumi checkpoints."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
import torch
from helpers import randomise_bn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save as st_save

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import vertex_to_point
from kosumi.nets.checkpoint import (
    atomic_write,
    build_net,
    load_net,
    read_checkpoint,
    save_checkpoint,
)
from kosumi.nets.config import NetConfig, parse_arch
from kosumi.nets.features import get_feature_set
from kosumi.nets.leelaz import LeelaZeroWeights, write_leelaz
from kosumi.nets.resnet import KosumiNet, inference_tensors

torch.set_num_threads(1)


def lz_config(arch: str = "b1c8") -> NetConfig:
    return NetConfig(arch=arch, features="lz18", head="lz", board_sizes=[19], value="tanh",
                     score_lead=False, ownership=False)


def inputs(config: NetConfig, size: int, batch: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    fs = get_feature_set(config.features)
    planes = (torch.rand(batch, fs.num_planes, size, size, generator=g) > 0.7).float()
    glob = torch.randn(batch, fs.num_globals, generator=g) if fs.num_globals else None
    return planes, glob


# ----------------------------------------------------------------------------- config
def test_parse_arch():
    assert parse_arch("b6c64") == (6, 64)
    assert parse_arch("B10C128") == (10, 128)
    for bad in ("b6", "6c64", "b6c0", "bxc64", "b6c64x", ""):
        with pytest.raises(KosumiError, match="config field 'arch'"):
            parse_arch(bad)


@pytest.mark.parametrize("kwargs,field", [
    ({"arch": "c64"}, "arch"),
    ({"features": "katago_v99"}, "features"),
    ({"features": ["basic"]}, "features"),  # JSON of the wrong type: an error, not a crash
    ({"head": {"conv": 1}}, "head"),
    ({"value": ["wdl"]}, "value"),
    ({"arch": 64}, "arch"),
    ({"head": "dense"}, "head"),
    ({"board_sizes": []}, "board_sizes"),
    ({"board_sizes": [9, 25]}, "board_sizes"),
    ({"board_sizes": ["9"]}, "board_sizes"),
    ({"value": "sigmoid"}, "value"),
    ({"score_lead": "yes"}, "score_lead"),
    ({"policy_channels": -1}, "policy_channels"),
    ({"provenance": [1]}, "provenance"),
    ({"head": "lz", "features": "lz18", "board_sizes": [9], "value": "tanh", "score_lead": False,
      "ownership": False}, "board_sizes"),
    ({"head": "lz", "features": "lz18", "board_sizes": [19], "value": "wdl", "score_lead": False,
      "ownership": False}, "value"),
    ({"head": "lz", "features": "lz18", "board_sizes": [19], "value": "tanh"}, "score_lead"),
])
def test_config_validation_names_the_field(kwargs, field):
    with pytest.raises(KosumiError, match=f"config field '{field}'") as e:
        NetConfig(**kwargs)
    assert "\n" not in str(e.value)


def test_config_json_round_trip_and_errors():
    c = NetConfig(arch="b2c16", board_sizes=[19, 9], provenance={"teacher": "g170"})
    assert c.board_sizes == [9, 19] and c.policy_channels == 8  # resolved, concrete
    d = json.loads(c.to_json())
    assert d["version"] == 1 and d["arch"] == "b2c16" and d["provenance"] == {"teacher": "g170"}
    assert NetConfig.from_json(c.to_json()) == c
    with pytest.raises(KosumiError, match=r"f.json: config field 'colour' is unknown"):
        NetConfig.from_dict({**d, "colour": 1}, source="f.json")
    with pytest.raises(KosumiError, match=r"f.json: the net config is not valid JSON"):
        NetConfig.from_json("{", source="f.json")
    with pytest.raises(KosumiError, match="'version'"):
        NetConfig.from_dict({**d, "version": 7})


# ----------------------------------------------------------------------------- nets
@pytest.mark.parametrize("size", [5, 9, 13, 19])
def test_conv_head_shapes_every_size(size):
    cfg = NetConfig(arch="b1c8", board_sizes=[5, 9, 13, 19])
    net = KosumiNet.random(cfg, 0)
    out = net(*inputs(cfg, size, batch=3))
    assert out["policy"].shape == (3, size * size + 1)
    assert out["value"].shape == (3, 3)
    assert out["score_lead"].shape == (3,)
    assert out["ownership"].shape == (3, size * size)
    assert all(torch.isfinite(v).all() for v in out.values())


def test_conv_head_optional_outputs_and_tanh_value():
    cfg = NetConfig(arch="b1c8", features="lz18", value="tanh", score_lead=False,
                    ownership=False, board_sizes=[9])
    out = KosumiNet.random(cfg, 0)(*inputs(cfg, 9))
    assert set(out) == {"policy", "value"} and out["value"].shape == (2, 1)


def test_lz_head_shapes_and_rejects_other_sizes():
    cfg = lz_config()
    net = KosumiNet.random(cfg, 0)
    out = net(*inputs(cfg, 19))
    assert out["policy"].shape == (2, 362) and out["value"].shape == (2, 1)
    assert set(out) == {"policy", "value"}
    with pytest.raises(ValueError, match="19x19 only"):
        net(*inputs(cfg, 9))


def _bn_params(c):
    return 2 * c  # gamma, beta (running stats are buffers)


def test_parameter_count_b6c64_conv_by_hand():
    cfg = NetConfig(arch="b6c64", features="basic", head="conv", board_sizes=[19])
    c, cp, cv, hid = 64, 16, 16, 32  # derived head widths: max(8, C/4), 2*Cv
    assert (cfg.policy_channels, cfg.value_channels, cfg.value_hidden) == (cp, cv, hid)
    trunk = 11 * c * 9 + 4 * c + _bn_params(c) + 6 * (2 * c * c * 9 + 2 * _bn_params(c))
    policy = c * cp + _bn_params(cp) + (cp + 1) + (2 * cp + 1)
    value = c * cv + _bn_params(cv) + (2 * cv * hid + hid) + (hid * 3 + 3) + (hid + 1) + (cv + 1)
    assert KosumiNet(cfg).num_parameters() == trunk + policy + value == 453_991


def test_parameter_count_b6c64_lz_by_hand():
    c = 64
    trunk = 18 * c * 9 + _bn_params(c) + 6 * (2 * c * c * 9 + 2 * _bn_params(c))
    policy = c * 2 + _bn_params(2) + (2 * 361 * 362 + 362)
    value = c * 1 + _bn_params(1) + (361 * 256 + 256) + (256 + 1)
    assert KosumiNet(lz_config("b6c64")).num_parameters() == trunk + policy + value == 809_253


def _zero_net(net: KosumiNet) -> None:
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.reset_running_stats()
                m.weight.fill_(1.0)


def test_lz_policy_fc_is_in_leela_zero_order():
    # Leela Zero's point index is y*19 + x with y = 0 the BOTTOM row: D4 = 3*19 + 3 = 60.
    net = KosumiNet(lz_config()).eval()
    _zero_net(net)
    with torch.no_grad():
        net.policy_fc.bias[60] = 5.0
        net.policy_fc.bias[361] = 2.0  # pass
    with torch.no_grad():
        out = net(*inputs(lz_config(), 19))["policy"]
    assert int(out[0].argmax()) == vertex_to_point("D4", 19) == 288
    assert float(out[0, 361]) == 2.0


def test_lz_trunk_runs_in_leela_zero_frame():
    # In Leela Zero's frame (y up), a 3x3 kernel with only w[ky=2][kx=1] reads the point ABOVE
    # (y + 1). A stone on A18 therefore lights up A17 (one row towards row 1), and the policy fc
    # (identity on channel 0) puts the largest logit there. Run in kosumi's top-down frame, the
    # same weights would light up A19 instead.
    cfg = lz_config("b0c1")
    net = KosumiNet(cfg).eval()
    _zero_net(net)
    with torch.no_grad():
        net.input_conv.weight[0, 0, 2, 1] = 1.0  # plane 0: the side to move's stones now
        net.policy_conv.weight[0, 0, 0, 0] = 1.0
        net.policy_fc.weight[:361, :361] = 10 * torch.eye(361)
    s = GameState(19)
    s.play(vertex_to_point("K10", 19))
    s.play(vertex_to_point("A18", 19))
    s.play(vertex_to_point("T1", 19))  # White to move: own stones = {A18}
    planes, _ = get_feature_set("lz18").encode([s])
    with torch.no_grad():
        logits = net(torch.from_numpy(planes))["policy"][0]
    assert int(logits.argmax()) == vertex_to_point("A17", 19)


def test_random_init_is_deterministic_and_sane():
    cfg = NetConfig(arch="b2c16", board_sizes=[9])
    a, b, c = KosumiNet.random(cfg, 7), KosumiNet.random(cfg, 7), KosumiNet.random(cfg, 8)
    ta, tb, tc = inference_tensors(a), inference_tensors(b), inference_tensors(c)
    assert all(torch.equal(ta[k], tb[k]) for k in ta)
    assert not all(torch.equal(ta[k], tc[k]) for k in ta)
    assert not a.training
    s = GameState(9)
    for v in ["E5", "C3", "G7", "C7", "G3", "E3", "E7"]:
        s.play(vertex_to_point(v, 9))
    planes, glob = get_feature_set("basic").encode([s])
    with torch.no_grad():
        out = a(torch.from_numpy(planes), torch.from_numpy(glob))
    p = torch.softmax(out["policy"][0], 0)
    entropy = float(-(p * p.log()).sum()) / np.log(82)
    assert 0.5 < entropy < 0.995 and float(p.max()) < 0.5  # neither uniform nor one-hot


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
        x = inputs(config, n)
        with torch.no_grad():
            a, b = net(*x), loaded(*x)
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), k
    ck = read_checkpoint(path)
    assert ck.metadata["format"] == "kosumi-checkpoint"
    assert not any(k.endswith("num_batches_tracked") for k in ck.tensors)


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


# ----------------------------------------------------------------------------- vs. Leela Zero
def test_lz_head_matches_leelaz(leelaz, tmp_path):
    """The real Leela Zero binary, fed the same tensors (written by ``kosumi.nets.leelaz``),
    prints the same policy and winrate: checks the lz head's frame (bottom-up rows), fc order
    and BN mapping all at once. ``tests/test_leelaz.py`` checks more positions and symmetries."""
    import subprocess

    net = KosumiNet.random(lz_config("b2c16"), 11)
    randomise_bn(net, torch.Generator().manual_seed(5))
    with torch.no_grad():
        net.policy_fc.weight.mul_(8)  # a peaked policy, so that the heatmap is informative
        net.value_fc2.weight.mul_(0.3)
    weights = tmp_path / "net.txt"
    write_leelaz(weights, LeelaZeroWeights.from_state_dict(inference_tensors(net), net.config))
    moves = [("B", "D4"), ("W", "Q16"), ("B", "C17"), ("W", "R3"), ("B", "K10")]
    s = GameState(19)
    for _, v in moves:
        s.play(vertex_to_point(v, 19))
    planes, _ = get_feature_set("lz18").encode([s])
    with torch.no_grad():
        out = net(torch.from_numpy(planes))
    p = torch.softmax(out["policy"][0].double(), 0).numpy()
    winrate = (1 + np.tanh(float(out["value"][0, 0]))) / 2

    home = tmp_path / "home"
    home.mkdir()
    cmds = "".join(f"play {c} {v}\n" for c, v in moves) + "heatmap\nquit\n"
    r = subprocess.run([leelaz, "--cpu-only", "-w", str(weights), "--gtp", "--noponder", "-t",
                        "1", "--timemanage", "off", "-r", "0"], input=cmds, capture_output=True,
                       text=True, env={**os.environ, "HOME": str(home)}, timeout=120,
                       check=False)
    err = r.stderr.splitlines()
    at = max(i for i, line in enumerate(err) if line.startswith("pass:"))
    heat = np.array([[int(x) for x in row.split()] for row in err[at - 19 : at]]).reshape(-1)
    lz_winrate = float(err[at + 1].split()[1])
    legal = np.frombuffer(bytes(s.board), np.uint8) == 0  # leelaz prints 0 at occupied points
    mine = np.floor(1000 * p[:361]).astype(int)
    assert heat.max() > 300  # informative: one clear favourite
    assert np.abs(heat - mine)[legal].max() <= 1  # floor() may straddle a boundary
    assert int(err[at].split()[1]) == int(1000 * p[361])
    assert abs(lz_winrate - winrate) < 2e-6
