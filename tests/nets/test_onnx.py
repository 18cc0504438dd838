"""ONNX export (nets.onnx, ``kosumi export --format onnx``) and the onnxruntime backend.

Oracles: the torch modules (the nets as trained, unfolded) on the 300 KataGo reference
positions, ``onnx.checker``, and ONNX Runtime itself running the exported files directly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import export_onnx, random_net_file, replay_reference
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.models import DEFAULT_MODEL
from kosumi.nets.features import get_feature_set
from kosumi.nets.onnx import OPSET, read_onnx_model
from kosumi.runtime import load_evaluator
from kosumi.runtime.bench import bench_states


@pytest.fixture(scope="module")
def nets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("onnx-nets")
    return {
        "default": DEFAULT_MODEL,  # the set's base: `default` alone opens the set's router
        "default-9": Path("default-9"),
        "default-19": Path("default-19"),
        "b2c16": random_net_file(root / "b2c16.safetensors", arch="b2c16", seed=4),
        "lz": random_net_file(root / "lz.safetensors", arch="b2c16", features="lz18",
                              head="lz", seed=5),
        "size-pool": random_net_file(root / "sp.safetensors", arch="b2c16", seed=6,
                                     value_pool="katago"),
    }


def test_exported_file_is_the_documented_contract(nets, tmp_path):
    out = tmp_path / "default.onnx"
    summary = export_onnx("default", out)
    assert "opset 17" in summary and "dynamic board size" in summary
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [OPSET]
    assert [i.name for i in model.graph.input] == ["planes", "globals"]
    assert [o.name for o in model.graph.output] == ["policy", "value", "score_lead", "ownership"]
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 11, "size", "size"]
    assert not any(n.op_type == "BatchNormalization" for n in model.graph.node)
    meta = {p.key: p.value for p in model.metadata_props}
    cfg = json.loads(meta["kosumi_config"])
    assert meta["kosumi_format"] == "kosumi-onnx" and meta["kosumi_precision"] == "fp32"
    assert cfg["arch"] == "b6c64" and cfg["board_sizes"] == [9, 19] and cfg["provenance"]
    # one file, every batch and board size, run by ONNX Runtime directly
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for size, batch in ((9, 1), (19, 5)):
        planes, glob = get_feature_set("basic").encode(bench_states(size, batch))
        policy, value, lead, own = sess.run(None, {"planes": planes, "globals": glob})
        assert policy.shape == (batch, size * size + 1) and value.shape == (batch, 3)
        assert lead.shape == (batch,) and own.shape == (batch, size * size)


def test_lz_head_is_19x19_and_has_no_globals(nets, tmp_path):
    out = tmp_path / "lz.onnx"
    assert "19x19" in export_onnx(nets["lz"], out)
    model = onnx.load(str(out))
    assert [i.name for i in model.graph.input] == ["planes"]
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 18, 19, 19]
    with pytest.raises(KosumiError, match="does not play 9x9"):
        load_evaluator(out).evaluate([GameState(9)])


@pytest.mark.parametrize("name", ["default", "default-9", "default-19", "b2c16", "lz",
                                  "size-pool"])
def test_onnxruntime_matches_torch_on_the_reference_positions(nets, name, tmp_path,
                                                              reference_positions):
    """fp32 through ONNX Runtime vs torch: top-1 100%, policy within 1e-4; fp16: policy within
    0.02, and a top move changes (at most one position in a hundred) only where the float net's
    two moves lie within that of each other. On an exported .onnx file and on the checkpoint
    itself (exported in memory)."""
    states = [replay_reference(r) for r in reference_positions]
    ref_ev = load_evaluator(nets[name], backend="torch", cache=False)
    states = [s for s in states if ref_ev.supports_size(s.size)]
    ref = ref_ev.evaluate(states)
    out = tmp_path / f"{name}.onnx"
    export_onnx(nets[name], out)
    half = tmp_path / f"{name}-fp16.onnx"
    export_onnx(nets[name], half, "--precision", "fp16")
    for model, backend, fp16 in ((out, "auto", False), (nets[name], "onnxruntime", False),
                                 (half, "onnxruntime", True)):
        ev = load_evaluator(model, backend=backend, cache=False)
        assert ev.backend.name == "onnxruntime"
        got = ev.evaluate(states)
        top1 = np.mean([int(np.argmax(a.policy)) == int(np.argmax(b.policy))
                        for a, b in zip(ref, got, strict=True)])
        diff = max(float(np.abs(a.policy - b.policy).max()) for a, b in zip(ref, got, strict=True))
        value = max(abs(a.value - b.value) for a, b in zip(ref, got, strict=True))
        if fp16:
            flips = [a.policy.max() - a.policy[int(np.argmax(b.policy))]
                     for a, b in zip(ref, got, strict=True)
                     if int(np.argmax(a.policy)) != int(np.argmax(b.policy))]
            assert top1 >= 0.99 and diff < 0.02 and max(flips, default=0) < 0.02, (
                name, top1, diff, flips)
        else:
            assert top1 == 1.0 and diff <= 1e-4 and value <= 1e-4, (name, top1, diff, value)


def test_inspect_and_load_an_onnx_file(tmp_path):
    out = tmp_path / "net.onnx"
    export_onnx("default", out, "--precision", "fp16")
    r = CliRunner().invoke(app, ["inspect", str(out), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["format"].startswith("ONNX (fp16") and info["arch"] == "b6c64"
    assert info["inputs"] == ["planes", "globals"] and info["opset"] == OPSET
    assert {"arch", "vnni"} <= set(info["cpu"])
    assert read_onnx_model(out).config.features == "basic"


def test_bad_onnx_files_are_one_line_errors(tmp_path):
    runner = CliRunner()
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage" * 50)
    bare = tmp_path / "bare.onnx"  # a valid ONNX model without kosumi metadata
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    g = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(onnx.helper.make_model(g), str(bare))
    for path, needle in ((corrupt, "corrupt ONNX file"), (bare, "without kosumi metadata")):
        for cmd in (["inspect", str(path)], ["analyze", "--model", str(path), "--moves", "D4"]):
            r = runner.invoke(app, cmd)
            lines = r.output.strip().splitlines()
            assert r.exit_code == 2 and len(lines) == 1, (cmd, r.output)
            assert needle in lines[0] and str(path) in lines[0], lines[0]
    # a runtime file has no tensors to export again, and torch cannot run it
    good = tmp_path / "good.onnx"
    export_onnx("default", good)
    r = runner.invoke(app, ["export", str(good), "--format", "onnx", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "runtime file" in r.output
    with pytest.raises(KosumiError, match="cannot run onnx files"):
        load_evaluator(good, backend="torch")
    with pytest.raises(KosumiError, match="an fp32 ONNX file"):
        load_evaluator(good, precision="fp16")


def test_the_onnx_cache_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("KOSUMI_ONNX_CACHE_DIR", str(tmp_path / "cache"))
    net = random_net_file(tmp_path / "n.safetensors", arch="b1c8")
    load_evaluator(net, backend="onnxruntime")
    files = list((tmp_path / "cache").glob("*.onnx"))
    assert len(files) == 1
    stamp = files[0].stat().st_mtime_ns
    load_evaluator(net, backend="onnxruntime")
    assert [f.stat().st_mtime_ns for f in (tmp_path / "cache").glob("*.onnx")] == [stamp]
    random_net_file(net, arch="b1c8", seed=9)  # other weights: another cache entry
    load_evaluator(net, backend="onnxruntime")
    assert len(list((tmp_path / "cache").glob("*.onnx"))) == 2


def test_gtp_on_an_onnx_file_answers_genmove(tmp_path):
    out = tmp_path / "net.onnx"
    export_onnx("default", out)
    cmd = [sys.executable, "-m", "kosumi", "gtp", "--model", str(out), "--backend",
           "onnxruntime", "--visits", "16"]
    proc = subprocess.run(cmd, input="boardsize 9\nclear_board\ngenmove b\nquit\n",
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    replies = [line for line in proc.stdout.splitlines() if line.startswith("=")]
    assert len(replies) == 4 and replies[2][2:].strip()[0] in "ABCDEFGHJ", proc.stdout





def cpu_and_tensorrt_exports(ck, seed: int, folder: Path) -> tuple[list, list]:
    """The int8 net ``ck`` exported without (TensorRT's form) and with the CPU's layout help
    (``pad_channels``), each run by ONNX Runtime on the same 16 9x9 positions: ([outputs,
    outputs], [ONNX Runtime's optimized graph, its optimized graph])."""
    from kosumi.nets.onnx import onnx_bytes

    encoded = get_feature_set(ck.config.features).encode(bench_states(9, 16, seed=seed))
    feeds = {k: v for k, v in zip(("planes", "globals"), encoded, strict=True) if v is not None}
    runs, graphs = [], []
    for cpu in (False, True):
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.optimized_model_filepath = str(folder / f"cpu-{cpu}-{seed}.opt.onnx")
        session = ort.InferenceSession(onnx_bytes(ck.config, ck.tensors, pad_channels=cpu), so,
                                       providers=["CPUExecutionProvider"])
        runs.append(session.run(None, feeds))
        graphs.append(onnx.load(so.optimized_model_filepath).graph)
    return runs, graphs


@pytest.fixture(scope="module")
def int8_stem_net(int8_net_127, float_net_b2c16, calib_positions, tmp_path_factory) -> Path:
    """Every layer int8 (the stem too), in the weight range this CPU's int8 kernels add
    without overflow: +-127 where they can, +-63 on x86 without VNNI, whose uint8 x int8 pairs
    saturate at +-127 (there ONNX Runtime's padded and unpadded stems take different kernels,
    each off the integer reference by its own saturation: no oracle for either)."""
    from kosumi.runtime.cpu import int8_pairs_saturate

    if not int8_pairs_saturate():
        return int8_net_127
    out = tmp_path_factory.mktemp("q63") / "b2c16-63.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(float_net_b2c16), "--calib",
                                 str(calib_positions), "--calib-size", "96", "--weight-range",
                                 "63", "--keep-float", "none", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_int8_stem_is_padded_to_whole_channel_groups(int8_stem_net):
    """The int8 stem reads 11 feature planes; ONNX Runtime's fast int8 convolution takes input
    channels in groups of 4, so the export pads them to 12 with zero weights. In ONNX Runtime's
    own optimized graph every QLinearConv then reads a multiple of 4 channels, and its outputs
    equal, bit for bit, those of the unpadded export (the oracle: the same net without the
    padding, what TensorRT's export takes)."""
    from kosumi.nets.checkpoint import read_checkpoint

    ck = read_checkpoint(int8_stem_net)
    planes = get_feature_set(ck.config.features).num_planes
    assert planes % 4, "the test needs a feature set whose planes are not a multiple of 4"
    runs, graphs = cpu_and_tensorrt_exports(ck, 5, int8_stem_net.parent)
    widths = []
    for graph in graphs:
        inits = {t.name: t for t in graph.initializer}
        widths.append(sorted(int(inits[n.input[3]].dims[1]) for n in graph.node
                             if n.op_type == "QLinearConv"))
    assert planes in widths[0] and planes not in widths[1], widths
    assert all(w % 4 == 0 for w in widths[1]) and len(widths[1]) == len(widths[0])
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_int8_weights_options_are_one_line_errors(int8_net_127, tmp_path):
    cases = [
        ([str(int8_net_127), "--format", "onnx", "--int8-weights", "int4"],
         "use int8, uint8 or offset"),
        ([str(int8_net_127), "--format", "pack", "--int8-weights", "uint8"], "--format onnx"),
        (["default", "--format", "onnx", "--int8-weights", "uint8"], "for int8 nets"),
    ]
    for args, message in cases:
        out = tmp_path / "x.out"
        r = CliRunner().invoke(app, ["export", *args, "--out", str(out)])
        assert r.exit_code == 2 and message in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1 and not out.exists()


def test_a_float_stem_starts_the_int8_stream_with_an_exact_identity(int8_net_b2c16, tmp_path):
    """``auto`` keeps the stem in float. On the CPU the export then starts the int8 residual
    stream with an identity 1x1 int8 convolution, so that ONNX Runtime's NHWC rewrite keeps the
    whole trunk in NHWC: its optimized graph has far fewer Transposes than the export without
    it (``pad_channels`` False, what TensorRT takes), and the outputs are bit for bit the same
    (the oracle: that other export, whose integers the tests above hold to the reference)."""
    from kosumi.nets.checkpoint import read_checkpoint
    from kosumi.nets.quant import scheme_of

    ck = read_checkpoint(int8_net_b2c16)
    assert scheme_of(ck.config).layers["input_conv"] == "float"
    runs, graphs = cpu_and_tensorrt_exports(ck, 6, tmp_path)
    transposes = [sum(n.op_type == "Transpose" for n in g.node) for g in graphs]
    assert transposes[1] < transposes[0], transposes  # b2c16: 3 against 4; b6c64: 3 against 14
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_transformer_net_is_plain_opset_17_with_dynamic_batch_and_size(tmp_path, precision):
    """Attention, rotary embeddings, RMS norms and SwiGLU in standard ONNX operators (no custom
    domain, opset 17), batch and board size dynamic: one file runs 9x9 and 13x13 batches and
    gives the torch module's outputs."""
    import gzip

    import torch
    from katago_writer import MODERN, KataGoWriter

    from kosumi.nets.checkpoint import build_net
    from kosumi.nets.katago import read_katago_model

    net = tmp_path / "v15.bin.gz"
    net.write_bytes(gzip.compress(KataGoWriter(True, seed=6).model(version=15, blocks=MODERN)))
    out = tmp_path / f"v15-{precision}.onnx"
    r = CliRunner().invoke(app, ["export", str(net), "--format", "onnx", "--precision",
                                 precision, "--out", str(out)])
    assert r.exit_code == 0, r.output
    model = onnx.load(str(out))
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [OPSET]
    assert all(n.domain in ("", "ai.onnx") for n in model.graph.node)
    ops = {n.op_type for n in model.graph.node}
    assert {"Softmax", "Cos", "Sin", "MatMul", "ReduceMean", "Sigmoid"} <= ops
    dims = [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == "batch" and dims[2] == dims[3] == "size"
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    torch_net = build_net(read_katago_model(net))
    fs = get_feature_set("katago_v7")
    for size, batch in ((9, 3), (13, 2)):
        planes, glob = fs.encode(bench_states(size, batch, seed=size))
        got = dict(zip([o.name for o in sess.get_outputs()],
                       sess.run(None, {"planes": planes, "globals": glob}), strict=True))
        with torch.no_grad():
            want = torch_net(torch.from_numpy(planes), torch.from_numpy(glob))
        tol = 1e-4 if precision == "fp32" else 3e-2
        for key, value in want.items():
            np.testing.assert_allclose(got[key], value.numpy(), atol=tol, rtol=tol)
