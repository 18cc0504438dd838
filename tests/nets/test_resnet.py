"""KosumiNet (kosumi.nets.resnet), both heads: shapes, parameter counts by hand, Leela Zero's
order and frame, random init, and the lz head against the real leelaz."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from helpers import lz_config, random_inputs, randomise_bn

from kosumi.go.board import GameState
from kosumi.go.coords import vertex_to_point
from kosumi.nets.config import NetConfig
from kosumi.nets.features import get_feature_set
from kosumi.nets.leelaz import LeelaZeroWeights, write_leelaz
from kosumi.nets.resnet import KosumiNet, inference_tensors

torch.set_num_threads(1)


# ----------------------------------------------------------------------------- nets
@pytest.mark.parametrize("size", [5, 9, 13, 19])
def test_conv_head_shapes_every_size(size):
    cfg = NetConfig(arch="b1c8", board_sizes=[5, 9, 13, 19])
    net = KosumiNet.random(cfg, 0)
    out = net(*random_inputs(cfg, size, batch=3))
    assert out["policy"].shape == (3, size * size + 1)
    assert out["value"].shape == (3, 3)
    assert out["score_lead"].shape == (3,)
    assert out["ownership"].shape == (3, size * size)
    assert all(torch.isfinite(v).all() for v in out.values())


def test_conv_head_optional_outputs_and_tanh_value():
    cfg = NetConfig(arch="b1c8", features="lz18", value="tanh", score_lead=False,
                    ownership=False, board_sizes=[9])
    out = KosumiNet.random(cfg, 0)(*random_inputs(cfg, 9))
    assert set(out) == {"policy", "value"} and out["value"].shape == (2, 1)


def test_lz_head_shapes_and_rejects_other_sizes():
    cfg = lz_config()
    net = KosumiNet.random(cfg, 0)
    out = net(*random_inputs(cfg, 19))
    assert out["policy"].shape == (2, 362) and out["value"].shape == (2, 1)
    assert set(out) == {"policy", "value"}
    with pytest.raises(ValueError, match="19x19 only"):
        net(*random_inputs(cfg, 9))


def test_size_pool_value_head_by_hand():
    """value_pool "katago": value_fc1 reads [mean, mean * (N - 14) / 10, max] of the value map,
    3 x Cv inputs. Oracle: the value map forced to a constant k through the value BatchNorm
    (gamma 0, beta k), so the pool is [k, k (N - 14) / 10, k] whatever the stones, computed by
    hand; value_fc1 reading only the middle block then sees the board size."""
    cfg = NetConfig(arch="b1c8", board_sizes=[9, 19], value_pool="katago")
    net = KosumiNet.random(cfg, 0).eval()
    cv = cfg.value_channels
    assert net.value_fc1.in_features == 3 * cv
    k = 0.7
    with torch.no_grad():
        net.value_bn.weight.zero_()
        net.value_bn.bias.fill_(k)
        net.value_fc1.weight.zero_()
        net.value_fc1.bias.zero_()
        net.value_fc1.weight[0, cv:2 * cv] = 1.0  # hidden unit 0 = sum of the middle block
        net.value_fc2.weight.zero_()
        net.value_fc2.bias.zero_()
        net.value_fc2.weight[0, 0] = 1.0  # win logit = hidden unit 0 (after its ReLU)
        for size, want in ((9, 0.0), (19, cv * k * 0.5)):  # (9 - 14) / 10 < 0: the ReLU gives 0
            out = net(*random_inputs(cfg, size))
            np.testing.assert_allclose(out["value"][:, 0].numpy(), want, rtol=1e-5, atol=1e-6)


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
        out = net(*random_inputs(lz_config(), 19))["policy"]
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
