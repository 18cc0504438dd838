"""The TensorRT plan container (kosumi.nets.trt_plan): read back, damage refused in one line,
and a plan that does not fit this TensorRT or GPU refused."""

from __future__ import annotations

import struct

from helpers import one_line
from typer.testing import CliRunner

from kosumi.cli import app
from kosumi.nets.trt_plan import MAGIC, plan_bytes, read_plan
from kosumi.runtime.tensorrt_backend import check_plan_fits


# ---------------------------------------------------------------------------- TensorRT plans
def test_plan_container_reads_back_and_refuses_damage(tmp_path):
    header = {"config": {"arch": "b1c8", "board_sizes": [9]}, "precision": "fp16",
              "tensorrt": "10.9.0", "gpu": "NVIDIA H200", "compute_capability": "9.0",
              "profiles": [{"size": 9, "batch": [1, 16, 64]}]}
    path = tmp_path / "net.plan"
    path.write_bytes(plan_bytes(header, b"ENGINE" * 10))
    got, engine = read_plan(path)
    assert engine == b"ENGINE" * 10 and got["gpu"] == "NVIDIA H200"
    r = CliRunner().invoke(app, ["inspect", str(path)])
    assert r.exit_code == 0 and "kosumi TensorRT plan (fp16)" in r.output, r.output
    data = path.read_bytes()
    cases = {
        "truncated.plan": data[:-5],
        "flipped.plan": data[:-3] + b"X" + data[-2:],
        "version.plan": MAGIC + struct.pack("<IQ", 9, 2) + b"{}",
        "bare.plan": b"\x00" * 100,
    }
    for name, content in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        r = CliRunner().invoke(app, ["analyze", "--model", str(p), "--moves", "D4"])
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and str(p) in lines[0], (name, r.output)
    gpu = {"gpu": "NVIDIA H200", "compute_capability": "9.0"}
    check_plan_fits(path, got, "10.9.0", gpu)
    one_line(lambda: check_plan_fits(path, got, "11.0.0", gpu), "built with TensorRT 10.9.0",
             "this is TensorRT 11.0.0", "rebuild")
    one_line(lambda: check_plan_fits(path, got, "10.9.0", {"gpu": "NVIDIA A100",
                                                           "compute_capability": "8.0"}),
             "built for NVIDIA H200 (sm 9.0), this GPU is NVIDIA A100")
