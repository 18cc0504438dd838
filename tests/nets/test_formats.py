"""Model file formats (kosumi.nets.formats): which format claims a file, reading it, and what
cannot be read.

Oracles: files whose format is known because the test made them (a kosumi checkpoint, Leela
Zero text weights written by hand, a TensorRT plan container, KataGo's own net from ../shared),
the checkpoint's own reader for the tensors, and damage made by hand.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.formats import (
    MODEL_FORMATS,
    detect_format,
    get_format,
    read_model,
    read_net,
)
from kosumi.nets.trt_plan import plan_bytes


def lz_text(channels: int = 2, blocks: int = 1) -> str:
    """Leela Zero version-1 weights of zeros, laid out by hand: input conv (18 planes) with its
    BN pair, two convs per block, then policy (2 filters) and value (1 filter) heads."""
    c = channels
    conv = lambda i, o, k: [[0.0] * (o * i * k * k), [0.0] * o]  # noqa: E731 weights, biases
    bn = lambda o: [[0.0] * o, [1.0] * o]  # noqa: E731 means, variances
    rows = conv(18, c, 3) + bn(c)
    for _ in range(blocks):
        rows += conv(c, c, 3) + bn(c) + conv(c, c, 3) + bn(c)
    rows += conv(c, 2, 1) + bn(2) + [[0.0] * (2 * 361 * 362), [0.0] * 362]
    rows += conv(c, 1, 1) + bn(1) + [[0.0] * (361 * 256), [0.0] * 256, [0.0] * 256, [0.0]]
    return "1\n" + "".join(" ".join(f"{x:g}" for x in r) + "\n" for r in rows)


def test_the_registry():
    names = [f.name for f in MODEL_FORMATS]
    assert names[:6] == ["kosumi", "katago", "leelaz", "pack", "onnx", "tensorrt"]
    assert get_format("leelaz").suffix == ".txt.gz"
    with pytest.raises(KosumiError, match=r"unknown model format 'caffe'.*known: kosumi"):
        get_format("caffe")
    assert {f.name for f in MODEL_FORMATS if f.native} == {"onnx", "tensorrt"}


def test_export_writes_registered_formats_and_katago_is_read_only(tmp_path):
    from kosumi.export import WRITERS, export_formats, export_model

    assert set(WRITERS) == {"kosumi", "leelaz", "pack", "onnx", "tensorrt"}
    assert export_formats()["pack"] == get_format("pack").description
    with pytest.raises(KosumiError, match=r"unknown export format 'katago' \(known: kosumi"):
        export_model("tiny", "katago", tmp_path / "x.bin.gz")
    assert not (tmp_path / "x.bin.gz").exists()


def test_each_file_is_claimed_by_the_format_that_made_it(tmp_path, random_net):
    assert detect_format(random_net).name == "kosumi"
    fmt, ckpt = read_model(random_net)
    own = read_checkpoint(random_net)
    assert fmt.name == "kosumi" and ckpt.config == own.config
    assert all(np.array_equal(ckpt.tensors[k], own.tensors[k]) for k in own.tensors)
    text = lz_text()
    (tmp_path / "w.txt").write_text(text)
    (tmp_path / "w.txt.gz").write_bytes(gzip.compress(text.encode()))
    for name in ("w.txt", "w.txt.gz"):
        fmt, ckpt = read_model(tmp_path / name)
        assert fmt.name == "leelaz" and ckpt.config.head == "lz"
        assert ckpt.config.blocks == 1 and ckpt.config.channels == 2
    plan = tmp_path / "n.plan"
    plan.write_bytes(plan_bytes({"config": {"arch": "b1c8", "board_sizes": [9]},
                                 "precision": "fp16", "tensorrt": "10.9.0", "gpu": "x",
                                 "compute_capability": "9.0", "profiles": []}, b"ENGINE"))
    assert detect_format(plan).name == "tensorrt"
    with pytest.raises(KosumiError, match="runtime file without the net's own tensors; "
                                          "plot the model"):
        read_net(plan, "plot")


def test_katago_is_claimed_as_katago(katago_model):
    fmt = detect_format(katago_model)
    assert fmt.name == "katago"
    assert fmt.describe(katago_model)["format"] == "KataGo binary (gzip)"


def test_what_no_format_claims(tmp_path):
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01 not a model")
    with pytest.raises(KosumiError, match=r"junk\.bin: unsupported model format") as e:
        detect_format(tmp_path / "junk.bin")
    assert "\n" not in str(e.value)
    with pytest.raises(KosumiError, match="is a folder, not a model file"):
        detect_format(tmp_path)
    with pytest.raises(KosumiError, match="cannot read model file"):
        detect_format(tmp_path / "missing.safetensors")
