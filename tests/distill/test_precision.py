"""Training arithmetic (kosumi.distill.precision): bf16 autocast + channels-last against fp32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import distill_options, make_label_folder
from typer.testing import CliRunner

from kosumi.distill.precision import (
    Precision,
    cpu_has_bf16,
    emulation_warning,
    resolve_precision,
)
from kosumi.distill.train import DistillOptions, distill
from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.resnet import KosumiNet
from kosumi.runtime.cpu import cpu_capabilities

torch.set_num_threads(1)
CPU = torch.device("cpu")


@pytest.mark.skipif(cpu_capabilities()["arch"] not in ("x86_64", "amd64")
                    or not cpu_capabilities()["model"],
                    reason="the oracle is the x86 CPU flags in /proc/cpuinfo")
def test_auto_takes_bf16_exactly_where_the_cpu_has_it():
    """torch's oneDNN check against the CPU's own flags (kosumi.runtime.cpu reads them)."""
    caps = cpu_capabilities()
    native = bool(caps["avx512_bf16"] or caps["amx_bf16"])
    assert cpu_has_bf16() == native
    assert resolve_precision("auto", CPU).name == ("bf16" if native else "fp32")


def test_explicit_choices_and_a_bad_one():
    assert resolve_precision("fp32", CPU) == Precision("fp32", "cpu")
    assert resolve_precision("bf16", CPU) == Precision("bf16", "cpu")
    with pytest.raises(KosumiError, match=r"--precision must be one of fp32, bf16, auto, not "
                                          r"'fp16'"):
        resolve_precision("fp16", CPU)


def test_bf16_forward_is_close_to_fp32_and_keeps_float32_weights():
    torch.manual_seed(0)
    net = KosumiNet.random(NetConfig(arch="b2c16", board_sizes=[9]), seed=3).eval()
    x = (torch.rand(4, net.num_planes, 9, 9) < 0.3).float()
    g = torch.rand(4, net.num_globals)
    with torch.no_grad():
        ref = net(x, g)
        p = Precision("bf16")
        p.prepare(net)
        with p.forward():
            raw = net(p.planes(x), g)
        out = p.outputs(raw)
    assert net.input_conv.weight.dtype == torch.float32
    assert net.input_conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert raw["policy"].dtype == torch.bfloat16  # autocast ran the layers in bf16
    for k in ref:
        assert out[k].dtype == torch.float32
        scale = float(ref[k].abs().max()) + 1e-6
        # bf16 keeps 8 bits of mantissa: a few parts in a hundred after two blocks
        assert float((out[k] - ref[k]).abs().max()) / scale < 0.05, k


@pytest.fixture(scope="module")
def labels(tmp_path_factory) -> tuple[Path, Path]:
    return make_label_folder(tmp_path_factory.mktemp("labels7"), size=7, games=40, length=24)


def _opts(labels, out: Path, **kw) -> DistillOptions:
    """test_train's run with a b2c16 student long enough to learn, in bf16."""
    return distill_options(labels, out, **{"student": "b2c16", "steps": 150, "batch": 32,
                                           "eval_every": 50, "precision": "bf16", **kw})


def test_a_bf16_student_learns_the_synthetic_teacher_and_resumes_exactly(labels, tmp_path):
    """The oracle of test_train (the teacher plays where the side to move played last): bf16
    learns it as fp32 does; a bf16 run stopped and resumed equals the straight one bitwise."""
    out = tmp_path / "a" / "s.safetensors"
    out.parent.mkdir()
    result = distill(_opts(labels, out))
    assert result.val["top1"] > 0.9, result.val
    prov = read_checkpoint(out).config.provenance
    assert prov["precision"] == "bf16"
    split = tmp_path / "b" / "s.safetensors"
    split.parent.mkdir()
    distill(_opts(labels, split, stop_after=70))
    distill(DistillOptions(data=labels[0], out=split, resume=True, threads=1, device="cpu",
                           precision="bf16", cache_dir=split.parent / "cache", progress=False,
                           eval_every=50))
    a, b = read_checkpoint(out).tensors, read_checkpoint(split).tensors
    for k in a:
        assert a[k].dtype == np.float32, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_an_fp32_student_names_no_precision(labels, tmp_path):
    out = tmp_path / "s.safetensors"
    distill(_opts(labels, out, precision="fp32", steps=4, eval_every=4))
    assert "precision" not in read_checkpoint(out).config.provenance


def test_cli_refuses_an_unknown_precision_in_one_line(labels, tmp_path):
    from kosumi.cli import app

    lab, _ = labels
    res = CliRunner().invoke(app, ["distill", "--data", str(lab), "--out",
                                   str(tmp_path / "x.safetensors"), "--precision", "fp16",
                                   "--quiet"])
    assert res.exit_code == 2
    assert res.output == ("kosumi: error: --precision must be one of fp32, bf16, auto, not "
                          "'fp16'\n")
    assert not (tmp_path / "x.safetensors").exists()


def test_bf16_without_native_bf16_warns_once_even_when_quiet(labels, tmp_path, monkeypatch,
                                                            capsys):
    """The oracle is the CPU's own flags (test above): where oneDNN has no bf16, an explicit
    bf16 run says, on stderr and despite progress=False, that it is emulated; fp32 and native
    bf16 say nothing."""
    import kosumi.distill.precision as prec

    assert emulation_warning(Precision("fp32"), CPU) is None
    monkeypatch.setattr(prec, "cpu_has_bf16", lambda: True)
    assert emulation_warning(Precision("bf16"), CPU) is None
    monkeypatch.setattr(prec, "cpu_has_bf16", lambda: False)
    line = emulation_warning(Precision("bf16"), CPU)
    assert line is not None and "AVX512-BF16" in line and "--precision auto" in line
    out = tmp_path / "s.safetensors"
    distill(_opts(labels, out, steps=2, eval_every=2))
    err = capsys.readouterr().err
    assert err.count("kosumi: warning: --precision bf16") == 1, err
    distill(_opts(labels, tmp_path / "f.safetensors", precision="auto", steps=2, eval_every=2))
    assert "warning" not in capsys.readouterr().err
