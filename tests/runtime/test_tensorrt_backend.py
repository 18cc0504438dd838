"""The TensorRT backend (kosumi.runtime.tensorrt_backend): a plan is refused, before it is
deserialized, when it was built for another TensorRT or another GPU. (Running plans needs a GPU
with TensorRT: benchmarks/device_check.py does that on the device machine.)

Oracles: plan headers and machines written out by hand, one difference at a time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kosumi.errors import KosumiError
from kosumi.runtime.tensorrt_backend import check_plan_fits

HEADER = {"tensorrt": "10.9.0", "gpu": "NVIDIA H200", "compute_capability": "9.0"}
HERE = {"gpu": "NVIDIA H200", "compute_capability": "9.0"}


def test_a_plan_built_here_fits():
    check_plan_fits(Path("n.plan"), HEADER, "10.9.0", HERE)


@pytest.mark.parametrize("trt,gpu,needles", [
    ("10.10.0", HERE, ["built with TensorRT 10.9.0", "this is TensorRT 10.10.0", "rebuild"]),
    ("10.9.0", {"gpu": "NVIDIA H100", "compute_capability": "9.0"},
     ["built for NVIDIA H200 (sm 9.0), this GPU is NVIDIA H100 (sm 9.0)"]),
    ("10.9.0", {"gpu": "NVIDIA H200", "compute_capability": "9.1"},
     ["this GPU is NVIDIA H200 (sm 9.1); rebuild it here"]),
])
def test_a_plan_from_elsewhere_is_refused_in_one_line(trt, gpu, needles):
    with pytest.raises(KosumiError) as e:
        check_plan_fits(Path("nets/n.plan"), HEADER, trt, gpu)
    msg = str(e.value)
    assert msg.startswith("nets/n.plan: ") and "\n" not in msg
    for needle in needles:
        assert needle in msg, msg


def test_a_header_without_a_version_is_refused():
    with pytest.raises(KosumiError, match="built with TensorRT None"):
        check_plan_fits(Path("n.plan"), {"gpu": "NVIDIA H200"}, "10.9.0", HERE)


def test_only_plan_files_are_opened(random_net):
    from kosumi.nets.checkpoint import read_checkpoint
    from kosumi.runtime.options import LoadOptions
    from kosumi.runtime.tensorrt_backend import open_tensorrt

    ck = read_checkpoint(random_net)
    with pytest.raises(KosumiError, match="runs plan files: build one with kosumi export"):
        open_tensorrt(ck.config, ck.tensors, LoadOptions())
