"""The arithmetic a training step runs in: ``--precision fp32 | bf16 | auto``.

``fp32`` is plain float32 in torch's default (NCHW) layout: bitwise the same run on the same
machine, whatever else changes. ``bf16`` runs the forward pass under ``torch.autocast`` in
bfloat16 (convolutions and linear layers in bf16, BatchNorm, the softmaxes and every loss in
float32; the weights, gradients and AdamW moments stay float32) with the net and its inputs in
the channels-last layout, which oneDNN's bf16 convolutions read without reordering. On a CPU
with bf16 instructions (AVX512-BF16, AMX) or a CUDA GPU with bf16 it trains ~1.5-2x faster
(``benchmarks/train_speed.py``); elsewhere autocast would emulate bf16, slower than fp32, so
``auto`` takes bf16 only where the hardware has it.

A run may change precision between ``--resume`` segments (a different machine): the saved
weights and moments are float32 either way; only the bitwise-equal resume needs the same one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

import torch

from kosumi.errors import KosumiError

CHOICES = ("fp32", "bf16", "auto")
Net = TypeVar("Net", bound=torch.nn.Module)


def cpu_has_bf16() -> bool:
    """Whether this CPU runs bf16 convolutions natively (oneDNN: AVX512-BF16 or AMX)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch built without oneDNN
        return False


def device_has_bf16(device: torch.device) -> bool:
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return device.type == "cpu" and cpu_has_bf16()


@dataclass(frozen=True)
class Precision:
    """A resolved precision: ``name`` is ``fp32`` or ``bf16``, for ``device_type``."""

    name: str
    device_type: str = "cpu"

    @property
    def memory_format(self) -> torch.memory_format:
        return torch.channels_last if self.name == "bf16" else torch.contiguous_format

    def prepare(self, net: Net) -> Net:
        """The net in this precision's layout (in place; the weights stay float32)."""
        return net.to(memory_format=self.memory_format)  # type: ignore[call-overload]

    def planes(self, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous(memory_format=self.memory_format) if x.dim() == 4 else x

    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        """The context of a forward pass (autocast in bf16; nothing in fp32)."""
        if self.name == "bf16":
            with torch.autocast(self.device_type, dtype=torch.bfloat16):
                yield
        else:
            yield

    def outputs(self, out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The net's outputs as float32 (losses and metrics are computed in float32)."""
        return out if self.name == "fp32" else {k: v.float() for k, v in out.items()}


def resolve_precision(choice: str, device: torch.device) -> Precision:
    """``--precision`` for ``device``: ``auto`` is bf16 where the hardware has it, else fp32."""
    if choice not in CHOICES:
        raise KosumiError(f"--precision must be one of {', '.join(CHOICES)}, not {choice!r}")
    if choice == "auto":
        choice = "bf16" if device_has_bf16(device) else "fp32"
    if choice == "bf16" and device.type not in ("cpu", "cuda"):
        raise KosumiError(f"--precision bf16: not available on device {device}")
    return Precision(choice, device.type)


def emulation_warning(precision: Precision, device: torch.device) -> str | None:
    """One line for a bf16 run on hardware without bf16 (autocast then emulates it: 7.4x slower
    than fp32 on an AVX2 EPYC, ``benchmarks/RESULTS.md``); None when bf16 is native or unused."""
    if precision.name != "bf16" or device_has_bf16(device):
        return None
    what = "this CPU has no bf16 instructions (AVX512-BF16, AMX)" if device.type == "cpu" \
        else f"device {device} has no native bf16"
    return (f"kosumi: warning: --precision bf16: {what}, so autocast emulates it, several "
            "times slower than fp32; --precision auto takes fp32 here")
