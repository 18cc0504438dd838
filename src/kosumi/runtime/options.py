"""``LoadOptions``: how to run a model, the same for every command and backend.

backend     ``auto`` (the fastest installed backend for the file and device, see
            ``runtime.backend.choose_backend``), ``torch``, ``onnxruntime``, ``tensorrt``,
            ``numpy``
device      ``None``/``cpu``, ``cuda`` or ``cuda:K``
threads     CPU threads of the backend (intra-op)
symmetries  average over this many board symmetries (1..8; 8 is exactly equivariant); 0: one
            random symmetry per position and evaluation (KataGo's ``nnRandomize``)
precision   ``auto`` (the file's own, fp32 for float nets), ``fp32``, ``fp16`` (``int8``:
            quantized nets, next issue)
"""

from __future__ import annotations

from dataclasses import dataclass

from kosumi.errors import KosumiError

PRECISIONS = ("auto", "fp32", "fp16", "int8")


@dataclass(frozen=True)
class LoadOptions:
    """How to run a model (see the module docstring)."""

    backend: str = "auto"
    threads: int = 1
    device: str | None = None
    symmetries: int = 1
    precision: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.symmetries, int) or not 0 <= self.symmetries <= 8:
            raise KosumiError(f"symmetries must be 0..8 (0: a random one), not "
                              f"{self.symmetries!r}")
        if not isinstance(self.threads, int) or self.threads < 0:
            raise KosumiError(f"threads must be a non-negative integer, not {self.threads!r}")
        if self.precision not in PRECISIONS:
            raise KosumiError(f"unknown precision {self.precision!r} (use "
                              f"{', '.join(PRECISIONS)})")
        if self.device is not None:
            d = str(self.device).strip().lower()
            if not (d == "cpu" or d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit())):
                raise KosumiError(f"unknown device {self.device!r} (use cpu, cuda or cuda:K)")
            object.__setattr__(self, "device", None if d == "cpu" else d)

    @property
    def cuda(self) -> bool:
        return self.device is not None and self.device.startswith("cuda")

    @property
    def device_index(self) -> int:
        """The CUDA device number (0 for plain ``cuda``)."""
        return int(self.device.split(":")[1]) if self.device and ":" in self.device else 0

    @property
    def device_name(self) -> str:
        return self.device or "cpu"
