"""The onnxruntime backend (kosumi.runtime.onnxruntime_backend): IO binding changes nothing; an
int8 net's weights are held as this CPU's kernels need."""

from __future__ import annotations

import numpy as np
from helpers import export_onnx
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.features import get_feature_set
from kosumi.runtime.bench import bench_states
from kosumi.runtime.numpy_int8 import Int8NumpyBackend


def test_io_binding_gives_the_same_outputs(tmp_path):
    from kosumi.runtime.onnxruntime_backend import OnnxRuntimeBackend
    from kosumi.runtime.options import LoadOptions

    out = tmp_path / "n.onnx"
    export_onnx("default", out)
    planes, glob = get_feature_set("basic").encode(bench_states(9, 3))
    plain = OnnxRuntimeBackend(out, LoadOptions()).forward(planes, glob)
    bound = OnnxRuntimeBackend(out, LoadOptions(), io_binding=True).forward(planes, glob)
    for k in plain:
        np.testing.assert_array_equal(plain[k], bound[k])


def test_the_backend_holds_weights_as_this_cpu_needs(int8_net_127, int8_net_b2c16, tmp_path,
                                                     monkeypatch):
    """On a CPU whose uint8 x int8 pairs saturate (simulated here), a +-127 net, as a checkpoint
    or as an exported int8 .onnx file, runs with unsigned weights; a +-63 net and every net on
    other CPUs keep int8. Either way the outputs are the integer reference's."""
    import kosumi.runtime.cpu as cpu
    from kosumi.runtime.onnxruntime_backend import int8_weight_type, open_onnxruntime
    from kosumi.runtime.options import LoadOptions

    q127, q_auto = read_checkpoint(int8_net_127), read_checkpoint(int8_net_b2c16)
    onnx_file = tmp_path / "q127.onnx"
    assert CliRunner().invoke(app, ["export", str(int8_net_127), "--format", "onnx", "--out",
                                    str(onnx_file)]).exit_code == 0
    planes, glob = get_feature_set("basic").encode(bench_states(9, 4, seed=12))
    ref = Int8NumpyBackend(q127.config, q127.tensors).forward(planes, glob)
    really_saturates = cpu.int8_pairs_saturate()
    auto_max = q_auto.config.quantization["weight_max"]
    for saturates in (False, True):
        monkeypatch.setattr(cpu, "int8_pairs_saturate", lambda s=saturates: s)
        expect = "uint8" if saturates else "int8"
        assert int8_weight_type(q127.config) == expect
        assert int8_weight_type(q_auto.config) == ("uint8" if saturates and auto_max > 63
                                                   else "int8")
        for source in (q127.tensors, onnx_file):
            backend = open_onnxruntime(q127.config, source, LoadOptions())
            assert backend.int8_weights == expect
            if really_saturates and expect == "int8":
                continue  # this CPU would saturate them: the case the uint8 weights avoid
            got = backend.forward(planes, glob)
            np.testing.assert_allclose(got["policy"], ref["policy"], atol=0.05)
