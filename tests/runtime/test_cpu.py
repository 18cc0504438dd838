"""The CPU capability line (kosumi.runtime.cpu) against /proc/cpuinfo's flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from kosumi.runtime.cpu import cpu_capabilities, cpu_line


# ---------------------------------------------------------------------------- cpu, bench
def test_cpu_capabilities_read_the_flags():
    caps = cpu_capabilities()
    assert caps["cores"] >= 1 and caps["arch"]
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith(("flags", "Features"))).split(":")[1].split()
    except (OSError, StopIteration):
        pytest.skip("no /proc/cpuinfo flags on this machine")
    if "avx2" in flags or "avx2" in caps:
        assert caps["avx2"] == ("avx2" in flags)
        assert caps["vnni"] == bool({"avx512_vnni", "avx_vnni"} & set(flags))
        assert ("AVX2" in cpu_line()) == ("avx2" in flags)
