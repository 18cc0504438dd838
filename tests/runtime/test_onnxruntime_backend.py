"""The onnxruntime backend (kosumi.runtime.onnxruntime_backend): IO binding changes nothing."""

from __future__ import annotations

import numpy as np
from helpers import export_onnx

from kosumi.nets.features import get_feature_set
from kosumi.runtime.bench import bench_states


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
