"""``kosumi inspect`` / ``kosumi.nets.inspect.describe_model``: every supported format."""

from __future__ import annotations

import gzip
import json

import pytest
import torch
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.errors import KosumiError
from kosumi.nets import formats
from kosumi.nets.checkpoint import save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.formats import ModelFormat, register_model_format
from kosumi.nets.inspect import describe_model, format_description
from kosumi.nets.leelaz import LeelaZeroWeights, write_leelaz
from kosumi.nets.resnet import KosumiNet, inference_tensors

torch.set_num_threads(1)

KEYS = {"file", "file_bytes", "format", "version", "arch", "blocks", "channels", "parameters",
        "input_features", "heads", "board_sizes"}


def lz_net(arch: str = "b1c4") -> KosumiNet:
    cfg = NetConfig(arch=arch, features="lz18", head="lz", board_sizes=[19], value="tanh",
                    score_lead=False, ownership=False)
    return KosumiNet.random(cfg, 0)


def bn_gammas(net: KosumiNet) -> int:
    return sum(m.num_features for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d))


def test_kosumi_checkpoint(tmp_path):
    net = KosumiNet.random(NetConfig(arch="b2c16", board_sizes=[9, 13]), 0)
    path = tmp_path / "net.kosumi"
    save_checkpoint(path, net)
    info = describe_model(path)
    assert set(info) >= KEYS
    assert info["format"] == "kosumi checkpoint" and info["file_bytes"] == path.stat().st_size
    assert (info["arch"], info["blocks"], info["channels"]) == ("b2c16", 2, 16)
    assert info["parameters"] == net.num_parameters()
    assert info["input_features"] == {"name": "basic", "spatial": 11, "global": 4}
    assert set(info["heads"]) == {"policy", "value", "score_lead", "ownership"}
    assert info["board_sizes"] == [9, 13] and info["head"] == "conv"


@pytest.mark.parametrize("name,version", [("lz.txt", 1), ("lz.txt.gz", 2)])
def test_leela_zero(tmp_path, name, version):
    net = lz_net("b2c8")
    path = tmp_path / name
    write_leelaz(path, LeelaZeroWeights.from_state_dict(inference_tensors(net), net.config,
                                                        version=version))
    info = describe_model(path)
    assert set(info) >= KEYS
    assert info["format"].startswith("Leela Zero text weights")
    assert ("gzip" in info["format"]) == name.endswith(".gz")
    assert (info["version"], info["arch"], info["blocks"], info["channels"]) == (
        version, "b2c8", 2, 8)
    # Leela Zero has no BN gamma: the same net minus kosumi's gammas
    assert info["parameters"] == net.num_parameters() - bn_gammas(net)
    assert info["input_features"] == {"name": "lz18", "spatial": 18, "global": 0}
    assert set(info["heads"]) == {"policy", "value"}
    assert ("Black" in info["heads"]["value"]) == (version == 2)
    assert info["board_sizes"] == [19]


def test_katago(katago_model):
    pytest.importorskip("kosumi.nets.katago")
    path = katago_model
    info = describe_model(path)
    assert set(info) >= KEYS
    assert info["format"].startswith("KataGo") and info["blocks"] == 6 and info["version"] == 8


def test_cli_text_and_json(tmp_path):
    net = lz_net()
    path = tmp_path / "lz.txt"
    write_leelaz(path, LeelaZeroWeights.from_state_dict(inference_tensors(net), net.config))
    runner = CliRunner()
    r = runner.invoke(app, ["inspect", str(path)])
    assert r.exit_code == 0, r.output
    for text in ("format:          Leela Zero text weights", "version:         1",
                 "blocks:          1", "channels:        4", "input features:  lz18 (18 planes",
                 "heads:", "  policy:", "board sizes:     19"):
        assert text in r.output, r.output
    r = runner.invoke(app, ["inspect", str(path), "--json"])
    assert r.exit_code == 0
    info = json.loads(r.output)
    assert info["channels"] == 4 and info["file"] == str(path)


def test_bad_input_is_one_line_exit_2(tmp_path):
    net = lz_net()
    good = tmp_path / "good.txt"
    write_leelaz(good, LeelaZeroWeights.from_state_dict(inference_tensors(net), net.config))
    ck = tmp_path / "good.kosumi"
    save_checkpoint(ck, net)
    text = good.read_bytes()
    cases = {
        "missing.txt": None,
        "empty.bin": b"",
        "garbage.bin": b"\x00\x01hello",
        "truncated.txt": text[: len(text) // 2],
        "truncated.txt.gz": gzip.compress(text)[:1000],
        "version.txt": b"5\n" + text[2:],
        "truncated.kosumi": ck.read_bytes()[:-10],
    }
    runner = CliRunner()
    for name, data in cases.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        r = runner.invoke(app, ["inspect", str(path)])
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and str(path) in lines[0], (name, r.output)
        with pytest.raises(KosumiError):
            describe_model(path)


def unreadable(path):
    raise AssertionError("describing a model does not read its tensors")


def test_registry_and_formatting(tmp_path, monkeypatch):
    monkeypatch.setattr(formats, "MODEL_FORMATS", list(formats.MODEL_FORMATS))
    path = tmp_path / "model.fake"
    path.write_bytes(b"FAKE-ish")
    register_model_format(ModelFormat(
        "fake", "fake format", lambda p, head: head.startswith(b"FAKE"), unreadable,
        lambda p: {"format": "fake", "version": 3, "channels": {"trunk": 8, "mid": 4},
                   "heads": {"policy": "points"}, "board_sizes": [9, 19]}), first=True)
    info = describe_model(path)
    assert info["format"] == "fake" and info["file_bytes"] == 8
    text = format_description(info)
    assert "channels:        trunk 8, mid 4" in text and "board sizes:     9,19" in text
    assert "  policy:        points" in text
