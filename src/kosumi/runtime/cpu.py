"""What this CPU can do for inference: the vector and int8 instructions kernels choose by.

``cpu_capabilities()`` reads ``/proc/cpuinfo`` (Linux; elsewhere only the architecture is known)
and reports the features that decide which kernels are fast: on x86-64 AVX2/FMA (fp32),
AVX-512, VNNI (``avx512_vnni`` or ``avx_vnni``: int8 dot products, without which ONNX Runtime's
uint8 x int8 path can saturate) and AMX (``amx_int8``/``amx_bf16`` tiles); on ARM, NEON
(``asimd``), the int8 dot product (``asimddp``), ``i8mm`` and SVE. ``cpu_line()`` is the one-line
form ``kosumi bench`` and ``kosumi inspect`` print; the quantize issue picks its int8 kernels
from the same dict (``int8_pairs_saturate``, ``int8_tiles``).
"""

from __future__ import annotations

import os
import platform
from functools import cache
from typing import Any

#: (report name, /proc/cpuinfo flag names that imply it)
X86_FEATURES = (
    ("avx2", ("avx2",)), ("fma", ("fma",)), ("avx512", ("avx512f",)),
    ("vnni", ("avx512_vnni", "avx_vnni")), ("avx512_bf16", ("avx512_bf16",)),
    ("amx_int8", ("amx_int8",)), ("amx_bf16", ("amx_bf16",)),
)
ARM_FEATURES = (
    ("neon", ("asimd", "neon")), ("dotprod", ("asimddp",)), ("i8mm", ("i8mm",)),
    ("sve", ("sve",)), ("sve2", ("sve2",)), ("fp16", ("fphp", "asimdhp")),
)


def _cpuinfo() -> tuple[str, set[str]]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return "", set()
    model, flags = "", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


@cache
def cpu_capabilities() -> dict[str, Any]:
    """{"arch", "model", "cores", feature name: bool, ...} for this machine."""
    arch = platform.machine().lower()
    model, flags = _cpuinfo()
    table = ARM_FEATURES if arch in ("aarch64", "arm64") or arch.startswith("arm") \
        else X86_FEATURES
    info: dict[str, Any] = {"arch": arch, "model": model or platform.processor() or "unknown",
                            "cores": os.cpu_count() or 1}
    for name, names in table:
        info[name] = any(f in flags for f in names)
    return info


def cpu_line() -> str:
    """E.g. ``AMD EPYC, x86_64, 2 cores: AVX2 FMA AVX512 VNNI (no AMX)``."""
    c = cpu_capabilities()
    table = ARM_FEATURES if c["arch"] in ("aarch64", "arm64") else X86_FEATURES
    have = [name.upper() for name, _ in table if c.get(name)]
    missing = [name.upper() for name, _ in table if not c.get(name)]
    text = (f"{c['model']}, {c['arch']}, {c['cores']} cores: "
            f"{' '.join(have) or 'no vector extensions'}")
    return text + (f" (no {', '.join(missing)})" if missing else "")


def int8_pairs_saturate() -> bool:
    """True on x86 without VNNI: ONNX Runtime's uint8 x int8 kernels there (``vpmaddubsw``) add
    each pair of products in int16, which 255 * 127 * 2 overflows and 255 * 63 * 2 does not."""
    c = cpu_capabilities()
    return c["arch"] in ("x86_64", "amd64", "i686", "i386") and not c.get("vnni")


def int8_tiles() -> bool:
    """True on x86 with AMX_INT8 tiles. ONNX Runtime's MLAS can run its int8 GEMMs on them (the
    im2col path of ``QLinearConv``, ``QGemm``, ``MatMulInteger``) but not its direct
    symmetric convolution (``ConvSym``, taken when the weights' zero point is 0), so int8 nets
    may run faster there with a non-zero weight zero point (``nets.onnx_weights.recode_weights``);
    whether MLAS really uses the tiles is measured, not assumed
    (``runtime.onnxruntime_backend.weight_form_timings``)."""
    c = cpu_capabilities()
    return c["arch"] in ("x86_64", "amd64") and bool(c.get("amx_int8"))
