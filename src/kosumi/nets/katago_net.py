"""KataGo's version-8 residual network as a torch module (inference only).

``build_katago_net(desc)`` turns a parsed model (``kosumi.nets.katago.read_katago``) into a
``KataGoNet``; ``load_katago(path)`` does both. torch is imported on first use only: the class
``KataGoNet`` is created then, so importing this module never imports torch.

``KataGoNet.forward(planes, globals)`` takes V7 features (``kosumi.nets.katago_features``) at the
board's exact size (channel 0 = on board) and returns RAW outputs from the side to move's view:
``policy`` [B, N*N+1] logits (row-major from the top-left point, then pass), ``value`` [B, 3]
win/loss/noResult logits, ``score`` [B, 4] raw (score mean/20, pre-softplus stdev/20, lead/20,
pre-softplus variance of time left/40) and ``ownership`` [B, N*N] pre-tanh. The postprocessing
KataGo applies lives in ``kosumi.runtime.katago_evaluator``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from kosumi.nets.katago import read_katago
from kosumi.nets.katago_desc import (
    BlockDesc,
    BNDesc,
    ConvDesc,
    KataGoModelDesc,
    MatBiasDesc,
    MatMulDesc,
)


def build_katago_net(desc: KataGoModelDesc) -> Any:
    """The torch module for a parsed model (float32, eval mode, no gradients)."""
    return _net_class()(desc)


def load_katago(path: str | os.PathLike) -> Any:
    """Read ``path`` and build its network."""
    return build_katago_net(read_katago(path))


def _make_net_class():
    import torch
    import torch.nn.functional as F
    from torch import nn

    def conv_module(c: ConvDesc) -> nn.Conv2d:
        m = nn.Conv2d(c.ic, c.oc, (c.ky, c.kx), padding=(c.dil_y * (c.ky // 2),
                      c.dil_x * (c.kx // 2)), dilation=(c.dil_y, c.dil_x), bias=False)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(c.weight))
        return m

    class Affine(nn.Module):
        """A folded batch norm: y = x * mult + off (per channel)."""

        def __init__(self, bn: BNDesc):
            super().__init__()
            mult, off = bn.merged()
            self.register_buffer("mult", torch.from_numpy(mult).view(1, -1, 1, 1))
            self.register_buffer("off", torch.from_numpy(off).view(1, -1, 1, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.addcmul(self.off, x, self.mult)

    def linear(mm: MatMulDesc, bias: MatBiasDesc | None = None) -> nn.Linear:
        m = nn.Linear(mm.ic, mm.oc, bias=bias is not None)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(np.ascontiguousarray(mm.weight.T)))
            if bias is not None:
                m.bias.copy_(torch.from_numpy(bias.bias))
        return m

    def gpool(x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
        """[mean, mean * (sqrt(area) - 14) / 10, max] over the board -> [B, 3C]."""
        mean = x.sum(dim=(2, 3)) / area
        mx = x.amax(dim=(2, 3))
        return torch.cat((mean, mean * ((area.sqrt() - 14.0) / 10.0), mx), dim=1)

    def value_pool(x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
        """[mean, mean * (sqrt(area) - 14) / 10, mean * ((sqrt(area) - 14)^2 / 100 - 0.1)]."""
        mean = x.sum(dim=(2, 3)) / area
        off = area.sqrt() - 14.0
        return torch.cat((mean, mean * (off / 10.0), mean * (off * off / 100.0 - 0.1)), dim=1)

    class Block(nn.Module):
        def __init__(self, b: BlockDesc):
            super().__init__()
            self.gpool = b.kind == "gpool"
            self.pre = Affine(b.pre_bn)
            self.conv1 = conv_module(b.conv1)
            self.mid = Affine(b.mid_bn)
            self.conv2 = conv_module(b.conv2)
            if self.gpool:
                assert b.gpool_conv is not None and b.gpool_bn is not None
                assert b.gpool_mul is not None
                self.gconv = conv_module(b.gpool_conv)
                self.gbn = Affine(b.gpool_bn)
                self.gmul = linear(b.gpool_mul)

        def forward(self, x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
            y = F.relu(self.pre(x))
            if self.gpool:
                g = F.relu(self.gbn(self.gconv(y)))
                a = self.conv1(y) + self.gmul(gpool(g, area))[:, :, None, None]
            else:
                a = self.conv1(y)
            return x + self.conv2(F.relu(self.mid(a)))

    class KataGoNet(nn.Module):
        """KataGo's version-8 residual net (see the module docstring for inputs/outputs)."""

        def __init__(self, desc: KataGoModelDesc):
            super().__init__()
            self.desc_name = desc.name
            self.version = desc.version
            self.num_input_channels = desc.num_input_channels
            self.num_input_globals = desc.num_input_globals
            self.conv1 = conv_module(desc.initial_conv)
            self.global_in = linear(desc.initial_matmul)
            self.blocks = nn.ModuleList(Block(b) for b in desc.blocks)
            self.tip = Affine(desc.trunk_tip_bn)
            self.p1 = conv_module(desc.p1_conv)
            self.g1 = conv_module(desc.g1_conv)
            self.g1_bn = Affine(desc.g1_bn)
            self.g1_bias = linear(desc.g1_to_bias)
            self.p1_bn = Affine(desc.p1_bn)
            self.p2 = conv_module(desc.p2_conv)
            self.g1_pass = linear(desc.g1_to_pass)
            self.v1 = conv_module(desc.v1_conv)
            self.v1_bn = Affine(desc.v1_bn)
            self.v2 = linear(desc.v2_mul, desc.v2_bias)
            self.v3 = linear(desc.v3_mul, desc.v3_bias)
            self.sv3 = linear(desc.sv3_mul, desc.sv3_bias)
            self.own = conv_module(desc.ownership_conv)
            self.eval()
            for p in self.parameters():
                p.requires_grad_(False)

        def forward(self, planes: torch.Tensor, globals: torch.Tensor) -> dict[str, torch.Tensor]:
            bsz = planes.shape[0]
            area = planes[:, 0].sum(dim=(1, 2)).unsqueeze(1)  # [B, 1] on-board points
            x = self.conv1(planes) + self.global_in(globals)[:, :, None, None]
            for block in self.blocks:
                x = block(x, area)
            x = F.relu(self.tip(x))
            # policy
            g = F.relu(self.g1_bn(self.g1(x)))
            gp = gpool(g, area)
            p = self.p1(x) + self.g1_bias(gp)[:, :, None, None]
            p = self.p2(F.relu(self.p1_bn(p))).reshape(bsz, -1)
            policy = torch.cat((p, self.g1_pass(gp)), dim=1)
            # value, score, ownership
            v = F.relu(self.v1_bn(self.v1(x)))
            h = F.relu(self.v2(value_pool(v, area)))
            return {
                "policy": policy,
                "value": self.v3(h),
                "score": self.sv3(h),
                "ownership": self.own(v).reshape(bsz, -1),
            }

    return KataGoNet


_NET_CLASS: Any = None


def _net_class() -> Any:
    global _NET_CLASS
    if _NET_CLASS is None:
        _NET_CLASS = _make_net_class()
    return _NET_CLASS


def __getattr__(name: str) -> Any:
    """``KataGoNet`` is created on first use, so that importing this module never imports torch."""
    if name == "KataGoNet":
        return _net_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
