"""KataGo's model-version-8 residual network as a torch module (inference), built from a config.

``KataGoNet(config)`` takes a ``NetConfig`` with head ``katago`` (``kosumi.nets.katago.
katago_config``) and has exactly the tensors ``kosumi.nets.katago.katago_tensors`` names, so a
KataGo model is built like every kosumi net: ``nets.checkpoint.build_net(Checkpoint(config,
tensors))``. Importing this module imports torch; only the torch backend and training do.

``forward(planes, globals)`` takes V7 features (``kosumi.nets.katago_features``) at the board's
exact size (channel 0 = on board) and returns RAW outputs from the side to move's view:
``policy`` [B, N*N+1] logits (row-major from the top-left point, then pass), ``value`` [B, 3]
win/loss/noResult logits, ``score`` [B, 4] raw (score mean/20, pre-softplus stdev/20, lead/20,
pre-softplus variance of time left/40) and ``ownership`` [B, N*N] pre-tanh. KataGo's
post-processing (masking, softmax, score scaling, no-result rules) is ``runtime.NetEvaluator``'s
``katago`` head adapter, the same for every backend.

Layers (see docs/FORMATS.md): a batch norm is stored as its exact per-channel affine map
(``scale``, ``bias``); the pools are KataGo's: [mean, mean * (sqrt(area) - 14) / 10, max] in the
blocks and the policy head, [mean, mean * (sqrt(area) - 14) / 10, mean * ((sqrt(area) - 14)^2 /
100 - 0.1)] in the value head, where area = on-board points.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kosumi.nets.config import NetConfig


class Affine(nn.Module):
    """A batch norm at inference: y = x * scale + bias, per channel."""

    scale: torch.Tensor  # buffers (registered in __init__)
    bias: torch.Tensor

    def __init__(self, channels: int):
        super().__init__()
        self.register_buffer("scale", torch.ones(channels))
        self.register_buffer("bias", torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias.view(1, -1, 1, 1), x, self.scale.view(1, -1, 1, 1))


def _conv(cin: int, cout: int, k: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, padding=k // 2, bias=False)


def gpool(x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
    """[mean, mean * (sqrt(area) - 14) / 10, max] over the board -> [B, 3C]."""
    mean = x.sum(dim=(2, 3)) / area
    return torch.cat((mean, mean * ((area.sqrt() - 14.0) / 10.0), x.amax(dim=(2, 3))), dim=1)


def value_pool(x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
    """[mean, mean * (sqrt(area) - 14) / 10, mean * ((sqrt(area) - 14)^2 / 100 - 0.1)]."""
    mean = x.sum(dim=(2, 3)) / area
    off = area.sqrt() - 14.0
    return torch.cat((mean, mean * (off / 10.0), mean * (off * off / 100.0 - 0.1)), dim=1)


class Block(nn.Module):
    """Pre-activation residual block: ordinary (conv, affine, conv) or with global pooling."""

    def __init__(self, kind: str, trunk: int, mid: int, regular: int, gpool_c: int):
        super().__init__()
        self.gpool = kind == "gpool"
        inner = regular if self.gpool else mid
        self.pre = Affine(trunk)
        self.conv1 = _conv(trunk, inner, 3)
        if self.gpool:
            self.gconv = _conv(trunk, gpool_c, 3)
            self.gbn = Affine(gpool_c)
            self.gmul = nn.Linear(3 * gpool_c, inner, bias=False)
        self.mid = Affine(inner)
        self.conv2 = _conv(inner, trunk, 3)

    def forward(self, x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.pre(x))
        a = self.conv1(y)
        if self.gpool:
            g = F.relu(self.gbn(self.gconv(y)))
            a = a + self.gmul(gpool(g, area))[:, :, None, None]
        return x + self.conv2(F.relu(self.mid(a)))


class KataGoNet(nn.Module):
    """KataGo's version-8 residual net (see the module docstring for inputs and outputs)."""

    def __init__(self, config: NetConfig):
        super().__init__()
        lay = config.katago
        c = config.channels
        self.config = config
        self.num_planes, self.num_globals = 22, 19
        self.conv1 = _conv(self.num_planes, c, int(lay["initial_kernel"]))
        self.global_in = nn.Linear(self.num_globals, c, bias=False)
        self.blocks = nn.ModuleList(
            Block(kind, c, lay["mid_channels"], lay["regular_channels"], lay["gpool_channels"])
            for kind in lay["blocks"])
        self.tip = Affine(c)
        p, g = config.policy_channels, lay["policy_gpool_channels"]
        self.p1 = _conv(c, p, 1)
        self.g1 = _conv(c, g, 1)
        self.g1_bn = Affine(g)
        self.g1_bias = nn.Linear(3 * g, p, bias=False)
        self.p1_bn = Affine(p)
        self.p2 = _conv(p, 1, 1)
        self.g1_pass = nn.Linear(3 * g, 1, bias=False)
        v, h = config.value_channels, config.value_hidden
        self.v1 = _conv(c, v, 1)
        self.v1_bn = Affine(v)
        self.v2 = nn.Linear(3 * v, h)
        self.v3 = nn.Linear(h, 3)
        self.sv3 = nn.Linear(h, 4)
        self.own = _conv(v, 1, 1)
        self.eval()
        for param in self.parameters():
            param.requires_grad_(False)

    def forward(self, planes: torch.Tensor, globals: torch.Tensor) -> dict[str, torch.Tensor]:
        bsz = planes.shape[0]
        area = planes[:, 0].sum(dim=(1, 2)).unsqueeze(1)  # [B, 1] on-board points
        x = self.conv1(planes) + self.global_in(globals)[:, :, None, None]
        for block in self.blocks:
            x = block(x, area)
        x = F.relu(self.tip(x))
        g = F.relu(self.g1_bn(self.g1(x)))
        gp = gpool(g, area)
        p = self.p1(x) + self.g1_bias(gp)[:, :, None, None]
        p = self.p2(F.relu(self.p1_bn(p))).reshape(bsz, -1)
        v = F.relu(self.v1_bn(self.v1(x)))
        h = F.relu(self.v2(value_pool(v, area)))
        return {
            "policy": torch.cat((p, self.g1_pass(gp)), dim=1),
            "value": self.v3(h),
            "score": self.sv3(h),
            "ownership": self.own(v).reshape(bsz, -1),
        }
