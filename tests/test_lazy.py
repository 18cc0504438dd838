"""Lazy registries (kosumi.lazy): importing kosumi's runtime, engine and CLI never imports torch."""

from __future__ import annotations

import subprocess
import sys

import torch

torch.set_num_threads(1)


def test_importing_runtime_engine_cli_does_not_import_torch():
    code = ("import sys, kosumi.runtime, kosumi.engine, kosumi.cli, kosumi.runtime.analyze, "
            "kosumi.runtime.loader, kosumi.nets.config, kosumi.nets.features, "
            "kosumi.nets.checkpoint; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
