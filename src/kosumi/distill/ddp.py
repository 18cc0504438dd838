"""Data-parallel training across processes, GPUs and machines (``torch.distributed``).

The trainer (``kosumi.distill.train``) is one program for every setting: launched plainly it is
one process; launched by ``torchrun`` (which sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``) every process joins one process group -- ``nccl`` on GPUs,
``gloo`` on CPUs -- wraps the student in ``DistributedDataParallel`` and trains on its slice of
each global batch.

Equivalence with one process. The content of global batch ``step`` is a pure function of
(seed, step) (``dataset.BatchPlan``); rank r of W takes the r-th of W contiguous slices of it.
Each rank's loss is (sum of its per-sample losses) * W / global batch, so DDP's gradient average
is exactly the gradient of the global batch's mean loss. BatchNorm would normally see only the
rank's slice; instead every BatchNorm is replaced by ``GlobalBatchNorm2d``, which all-reduces the
per-channel sums (two passes: mean, then centred squares) so that it normalises with the
statistics of the whole global batch, in the forward and the backward pass (the all-reduce is
differentiable). torch's ``SyncBatchNorm`` does the same but only on GPUs; this one also runs on
gloo/CPU. So W processes compute what one process computes on the global batch, up to float
summation order: the gradients agree to ~1e-6; after some AdamW steps the weights agree to 1e-4
(``tests/test_ddp.py``: 2 gloo processes against 1), except along directions the loss cannot
see (e.g. the centre tap of a constant input plane, cancelled by the next BatchNorm), where
Adam turns the rounding noise of a zero gradient into steps of size lr. Those do not change
what the net computes with batch statistics, and barely with running statistics.
Batches of all sizes are whole: every rank of a step works on the same board size, so the
collectives always match. Validation runs on rank 0 alone (BatchNorm in eval mode needs no
communication); rank 0 writes every file.

Commands (``--batch`` is the GLOBAL batch; each process takes ``batch / nproc``)::

    # one process (CPU, or the GPU with --device cuda)
    kosumi distill --data LABELS --student b6c64 --out student.safetensors --steps 20000

    # one machine, 8 GPUs
    torchrun --standalone --nproc_per_node 8 -m kosumi distill --data LABELS --student b6c64 \\
        --out student.safetensors --steps 20000 --batch 2048 --device cuda

    # two machines with 8 GPUs each: the same command on both (MASTER = one of them)
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv_id distill1 --rdzv_backend c10d \\
        --rdzv_endpoint MASTER:29500 -m kosumi distill ... --device cuda

    # CPU processes (gloo), e.g. the CI test
    python -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 \\
        --master_port 29501 -m kosumi distill ... --device cpu --threads 1

The label cache (see ``dataset``) is built by local rank 0 of each machine while the others
wait, then read by all; point ``--cache-dir`` at a shared or a local disk. Rank 0 writes the
student, state and metrics files; ``--resume`` reads the state on every rank, so across
machines ``--out`` must be on a shared file system.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from kosumi.errors import KosumiError


@dataclass
class DistContext:
    """Where this process stands: rank, world size, local rank, device, initialised group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    initialized: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.initialized:
            dist.barrier()

    def shard(self, values: np.ndarray) -> np.ndarray:
        """This rank's contiguous slice of a global batch array (slice r of ``world_size``)."""
        if self.world_size == 1:
            return values
        return np.array_split(values, self.world_size)[self.rank]

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of ``tensor`` over all ranks (a new tensor; identity in one process)."""
        if not self.initialized:
            return tensor
        out = tensor.to(self.device).clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out.to(tensor.device)

    def close(self) -> None:
        if self.initialized:
            dist.destroy_process_group()
            self.initialized = False


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def resolve_device(name: str | None, local_rank: int = 0) -> torch.device:
    """``auto`` (cuda when available, else cpu), ``cpu``, ``cuda`` or ``cuda:K``."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise KosumiError(f"--device {name}: CUDA is not available on this machine")
        if name == "cuda":
            return torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
        return torch.device(name)
    if name == "cpu":
        return torch.device("cpu")
    raise KosumiError(f"--device {name!r}: use auto, cpu, cuda or cuda:K")


def init_distributed(device: str | None = "auto", timeout_min: float = 60.0) -> DistContext:
    """Join the process group if launched by torchrun, else a one-process context."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext(device=resolve_device(device))
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device, local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if not dist.is_initialized():
        kwargs: dict[str, Any] = {"device_id": dev} if dev.type == "cuda" else {}
        dist.init_process_group(backend=backend, timeout=timedelta(minutes=timeout_min), **kwargs)
    return DistContext(rank=rank, world_size=world, local_rank=local_rank, device=dev,
                       initialized=True)


# ---------------------------------------------------------------------------- BatchNorm
class _AllReduceSum(torch.autograd.Function):
    """Differentiable sum over ranks: the gradient of a sum is the sum of the gradients."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        out = grad.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out


class GlobalBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d whose training statistics are those of the global batch over all ranks.

    Same parameters and buffers (and so the same checkpoint tensors) as ``nn.BatchNorm2d``; in
    eval mode, or without an initialised process group, it is exactly ``nn.BatchNorm2d``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or not dist.is_available() or not dist.is_initialized():
            return super().forward(x)
        all_reduce = _AllReduceSum.apply
        c = x.shape[1]
        local_n = x.numel() // c
        stats = torch.cat((x.sum(dim=(0, 2, 3)), x.new_tensor([float(local_n)])))
        stats = all_reduce(stats)
        count = stats[c]
        mean = stats[:c] / count
        centred = x - mean[None, :, None, None]
        var = all_reduce(centred.square().sum(dim=(0, 2, 3))) / count  # biased
        with torch.no_grad():
            if self.track_running_stats:
                # torch types the buffers Optional: they exist with track_running_stats
                assert (self.num_batches_tracked is not None and self.running_mean is not None
                        and self.running_var is not None)
                self.num_batches_tracked.add_(1)
                momentum = (self.momentum if self.momentum is not None
                            else 1.0 / float(self.num_batches_tracked))
                n = count.detach()  # a tensor: no host sync on a GPU
                unbiased = var.detach() * (n / (n - 1.0).clamp_min(1.0))
                self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
                self.running_var.mul_(1 - momentum).add_(unbiased, alpha=momentum)
        y = centred * torch.rsqrt(var + self.eps)[None, :, None, None]
        if self.affine:
            y = y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        return y


def convert_batchnorm(module: nn.Module) -> nn.Module:
    """Replace every ``nn.BatchNorm2d`` of ``module`` (in place) by a ``GlobalBatchNorm2d``
    holding THE SAME parameter and buffer objects (an optimiser made before keeps working)."""
    for name, child in list(module.named_children()):
        if type(child) is nn.BatchNorm2d:
            new = GlobalBatchNorm2d(child.num_features, eps=child.eps, momentum=child.momentum,
                                    affine=child.affine,
                                    track_running_stats=child.track_running_stats)
            for pname, param in child.named_parameters(recurse=False):
                setattr(new, pname, param)
            for bname, buf in child.named_buffers(recurse=False):
                new.register_buffer(bname, buf)
            new.train(child.training)
            setattr(module, name, new)
        else:
            convert_batchnorm(child)
    return module


def wrap_model(net: nn.Module, ctx: DistContext) -> nn.Module:
    """The module to train: ``net`` itself in one process, else DDP around a global-BN copy."""
    if not ctx.distributed:
        return net
    from torch.nn.parallel import DistributedDataParallel as DDP

    convert_batchnorm(net)
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    # buffers (BN running stats) are identical on every rank with global BN: no broadcast needed
    if "forward_sync_buffers" in inspect.signature(DDP.__init__).parameters:
        return DDP(net, device_ids=ids, forward_sync_buffers=False)
    return DDP(net, device_ids=ids, broadcast_buffers=False)


def unwrap_ddp(model: nn.Module) -> nn.Module:
    inner: nn.Module = getattr(model, "module", model)  # (model.module types as Tensor | Module)
    return inner


__all__ = ["DistContext", "GlobalBatchNorm2d", "convert_batchnorm", "init_distributed",
           "launched_by_torchrun", "resolve_device", "unwrap_ddp", "wrap_model"]
