"""The onnxruntime backend (kosumi.runtime.onnxruntime_backend): IO binding changes nothing; an
int8 net's weights are held as this CPU's kernels need."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import export_onnx
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.errors import KosumiError
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
    or as an exported int8 .onnx file, runs with unsigned weights; on one with AMX tiles
    (simulated) every int8 net on one thread runs with zero point -1 where the probe convolution
    says that is faster (simulated too), and not where it is not (MLAS not taking the tiles) nor
    on more threads; a +-63 net on
    the first and every net on other CPUs keep int8. Either way the outputs are the integer
    reference's."""
    import kosumi.runtime.cpu as cpu
    import kosumi.runtime.onnxruntime_backend as B
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
    cases = ((False, False, None), (True, False, None), (False, True, 0.5), (False, True, 0.99))
    for saturates, tiles, offset_us in cases:  # offset_us: the offset probe's, int8's is 1.0
        monkeypatch.setattr(cpu, "int8_pairs_saturate", lambda s=saturates: s)
        monkeypatch.setattr(cpu, "int8_tiles", lambda t=tiles: t)
        monkeypatch.setattr(B, "weight_form_timings", lambda *_, o=offset_us: (o and {
            "int8": 1.0, "offset": o}) or pytest.fail("probed without AMX tiles"))
        expect = "uint8" if saturates else "offset" if offset_us == 0.5 else "int8"
        assert int8_weight_type(q127.config) == expect
        assert int8_weight_type(q_auto.config) == (
            ("uint8" if auto_max > 63 else "int8") if saturates else expect)
        for source in (q127.tensors, onnx_file):
            backend = open_onnxruntime(q127.config, source, LoadOptions())
            assert backend.int8_weights == expect
            if really_saturates and expect != "uint8":
                continue  # this CPU would saturate them: the case the uint8 weights avoid
            got = backend.forward(planes, glob)
            np.testing.assert_allclose(got["policy"], ref["policy"], atol=0.05)
    monkeypatch.setattr(B, "weight_form_timings", lambda *_: {"int8": 1.0, "offset": 0.5})
    assert int8_weight_type(q127.config) == "offset"
    assert int8_weight_type(q127.config, threads=2) == "int8"  # tiles, faster probe: 1 thread only
    assert open_onnxruntime(q127.config, onnx_file, LoadOptions(threads=2)).int8_weights == "int8"
    monkeypatch.setenv("KOSUMI_INT8_WEIGHTS", "int8")
    assert open_onnxruntime(q127.config, onnx_file, LoadOptions()).int8_weights == "int8"
    monkeypatch.setenv("KOSUMI_INT8_WEIGHTS", "int4")
    with pytest.raises(KosumiError, match="KOSUMI_INT8_WEIGHTS=int4: use int8, uint8, offset"):
        int8_weight_type(q127.config)


def test_the_weight_form_probe_times_both_forms(int8_net_127, monkeypatch):
    """The probe behind the offset choice: both forms' convolutions run and take a positive
    time, once a process (cached). A probe that cannot run says nothing (None), and the backend
    then keeps the weights symmetric."""
    import kosumi.runtime.cpu as cpu
    import kosumi.runtime.onnxruntime_backend as B

    timings = B.weight_form_timings()
    assert timings is not None and set(timings) == {"int8", "offset"}
    assert all(0 < t < 1e6 for t in timings.values()), timings
    assert B.weight_form_timings() is timings

    def broken(*_):
        raise RuntimeError("no kernel")

    monkeypatch.setattr(B, "_probe_session", broken)
    assert B.weight_form_timings.__wrapped__(16, 9) is None
    monkeypatch.setattr(cpu, "int8_pairs_saturate", lambda: False)
    monkeypatch.setattr(cpu, "int8_tiles", lambda: True)
    monkeypatch.setattr(B, "weight_form_timings", B.weight_form_timings.__wrapped__)
    assert B.int8_weight_type(read_checkpoint(int8_net_127).config) == "int8"
