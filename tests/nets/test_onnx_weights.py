"""How int8 ONNX files store their weights (nets.onnx_weights, ``kosumi export --int8-weights``).

Oracles: ONNX Runtime's own optimized graph of the exported files (which kernels it fuses, with
which zero points) and the metadata ``kosumi inspect`` reads; that the recoded files compute the
integer reference's values is tests/runtime/test_int8_check.py's.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.nets.onnx import describe_onnx, read_onnx_model
from kosumi.nets.onnx_weights import recode_weights, recoded


@pytest.mark.parametrize("form,dtype,zero,words", [
    ("uint8", onnx.TensorProto.UINT8, 128, "uint8 weights"),
    ("offset", onnx.TensorProto.INT8, -1, "int8 weights with zero point -1")])
def test_export_with_recoded_weights_keeps_the_integer_kernels(int8_net_127, tmp_path, form,
                                                               dtype, zero, words):
    """``--int8-weights uint8`` (zero point 128: every int8 weight) and ``offset`` (zero point
    -1: the convolutions as wide as the trunk, not the narrower stem and heads) stored in that
    form, and ONNX Runtime still fuses as many convolutions into QLinearConv as from the int8
    file (not a float fallback), now with that zero point. That it computes the same integers:
    tests/runtime/test_int8_check.py."""
    out = tmp_path / f"{form}.onnx"
    r = CliRunner().invoke(app, ["export", str(int8_net_127), "--format", "onnx",
                                 "--int8-weights", form, "--out", str(out)])
    assert r.exit_code == 0 and f"{form} weights" in r.output, r.output
    signed = tmp_path / "s8.onnx"
    assert CliRunner().invoke(app, ["export", str(int8_net_127), "--format", "onnx", "--out",
                                    str(signed)]).exit_code == 0
    optimized = {}
    for path in (signed, out):
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(path.with_suffix(".opt.onnx"))
        so.log_severity_level = 3
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        optimized[path] = onnx.load(so.optimized_model_filepath)
    fused = [[n.op_type for n in optimized[p].graph.node].count("QLinearConv")
             for p in (signed, out)]
    assert fused[0] >= 4 and fused[1] == fused[0], fused
    inits = {t.name: t for t in optimized[out].graph.initializer}
    convs = [n for n in optimized[out].graph.node if n.op_type == "QLinearConv"]
    width = read_onnx_model(out).config.channels
    recoded = 0
    for n in convs:  # QLinearConv's inputs: x, x scale, x zero point, w, w scale, w zero point
        w = inits[n.input[3]]
        # offset recodes only the convolutions as wide as the trunk (in and out)
        wide = form == "uint8" or min(w.dims[:2]) >= width
        assert w.data_type == (dtype if wide else onnx.TensorProto.INT8)
        zeros = set(onnx.numpy_helper.to_array(inits[n.input[5]]).ravel().tolist())
        assert zeros == ({zero} if wide else {0}), (n.name, list(w.dims), zeros)
        recoded += wide
    assert recoded >= 4 and (recoded < len(convs)) == (form == "offset")
    assert read_onnx_model(out).metadata["kosumi_int8_weights"] == form
    assert describe_onnx(out)["format"] == f"ONNX (int8, {words}, kosumi exporter 4)"
    assert describe_onnx(signed)["format"] == "ONNX (int8, kosumi exporter 4)"


def test_recoded_integers_keep_their_differences():
    """Every int8 value and zero point, recoded, keeps q - z (the arithmetic's only input), and
    a weight of -128 (outside symmetric int8) has no offset form."""
    q = np.arange(-127, 128, dtype=np.int8)
    for form in ("uint8", "offset"):
        a, z = recoded(q, form).astype(np.int32), int(recoded(np.zeros(1, np.int8), form)[0])
        np.testing.assert_array_equal(a - z, q.astype(np.int32))
    with pytest.raises(ValueError, match="no weight form"):
        recoded(q, "int4")
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.full((2, 2, 1, 1), -128, np.int8), "w")
    zp = numpy_helper.from_array(np.zeros(2, np.int8), "wz")
    ws = numpy_helper.from_array(np.ones(2, np.float32), "ws")
    node = helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["y"], axis=0)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info(
        "y", onnx.TensorProto.FLOAT, None)], initializer=[w, ws, zp])
    from kosumi.errors import KosumiError

    with pytest.raises(KosumiError, match="-128 has no offset form"):
        recode_weights(helper.make_model(graph), "offset")
