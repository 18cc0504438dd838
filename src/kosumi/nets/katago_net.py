"""KataGo's networks (model versions 8 to 17) as a torch module (inference), built from a config.

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

Layers (the file format: ``kosumi.nets.katago``; ../shared/docs/FORMATS.md): a batch norm is
stored as its exact per-channel affine map (``scale``, ``bias``); the pools are KataGo's: [mean,
mean * (sqrt(area) - 14) / 10, max] in the blocks and the policy head, [mean, mean * (sqrt(area)
- 14) / 10, mean * ((sqrt(area) - 14)^2 / 100 - 0.1)] in the value head, where area = on-board
points. The blocks are those of
``kosumi.nets.katago_layout``: ordinary and global-pooling residual blocks, nested bottleneck
blocks, and transformer attention (rotary position embedding, grouped KV heads) and
feed-forward blocks, whose per-point matmuls are 1x1 convolutions here. The activation is the
net's one (ReLU before model version 11; SiLU or Mish after). The board runs at its exact size,
so no mask is needed: attention sees only the board's points, as KataGo's masked attention does.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from kosumi.nets.config import NetConfig
from kosumi.nets.katago_layout import activation, block_specs


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


def act_fn(kind: str) -> Any:
    """The activation of this name (``kosumi.nets.katago_layout.ACTIVATIONS``)."""
    return {"relu": F.relu, "silu": F.silu, "mish": F.mish, "identity": lambda x: x}[kind]


class Block(nn.Module):
    """Pre-activation residual block: ordinary (conv, affine, conv) or with global pooling."""

    def __init__(self, kind: str, trunk: int, mid: int, regular: int, gpool_c: int,
                 act: str = "relu"):
        super().__init__()
        self.act = act_fn(act)
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
        y = self.act(self.pre(x))
        a = self.conv1(y)
        if self.gpool:
            g = self.act(self.gbn(self.gconv(y)))
            a = a + self.gmul(gpool(g, area))[:, :, None, None]
        return x + self.conv2(self.act(self.mid(a)))


class PointNorm(nn.Module):
    """RMS norm over each point's channels, times a per-channel weight (``scale``)."""

    scale: torch.Tensor

    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.eps = float(eps)
        self.register_buffer("scale", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ms = (x * x).mean(dim=1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps) * self.scale.view(1, -1, 1, 1)


def rope_angles(spec: dict[str, Any], freqs: torch.Tensor | None, n: int) -> torch.Tensor:
    """Rotation angles [kv_heads or 1, q_dim/2, n*n] of the board's points (row-major from the
    top-left): learned, x*fx + y*fy per KV head and channel pair; fixed, the first half of the
    pairs turn with the row y, the second with the column x, at theta^(-2p/(q_dim/2))."""
    pos = torch.arange(n * n, dtype=torch.float32, device=None if freqs is None else freqs.device)
    xs, ys = pos % n, torch.div(pos, n, rounding_mode="floor")
    if spec["rope"] == "learned":
        assert freqs is not None
        return freqs[..., 0:1] * xs + freqs[..., 1:2] * ys
    pairs = spec["q_dim"] // 2
    half = pairs // 2
    p = torch.arange(half, dtype=torch.float32)
    f = 1.0 / torch.pow(torch.tensor(float(spec["rope_theta"])), 2 * p / pairs)
    return torch.cat((f[:, None] * ys, f[:, None] * xs), dim=0)[None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs (2p, 2p+1) of x [B, heads, T, D] by angles cos/sin [heads or 1,
    T, D/2]."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    """Transformer attention over the board's points (a residual block)."""

    def __init__(self, spec: dict[str, Any], channels: int):
        super().__init__()
        self.spec = spec
        h, k, d, e = spec["heads"], spec["kv_heads"], spec["q_dim"], spec["v_dim"]
        self.norm = PointNorm(channels, spec["eps"])
        self.q = _conv(channels, h * d, 1)
        self.k = _conv(channels, k * d, 1)
        self.v = _conv(channels, k * e, 1)
        self.out = _conv(h * e, channels, 1)
        self.rope_freqs: torch.Tensor | None
        if spec["rope"] == "learned":
            self.register_buffer("rope_freqs", torch.zeros(k, d // 2, 2))
        else:
            self.rope_freqs = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        return x + self.out(attend(self.q(y), self.k(y), self.v(y), self.spec, self.rope_freqs))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: dict[str, Any],
           freqs: torch.Tensor | None) -> torch.Tensor:
    """Attention over the board's points from the projections q [B, H*D, N, N], k [B, K*D, N,
    N], v [B, K*E, N, N] -> [B, H*E, N, N] (``kosumi.nets.graph``'s attention op)."""
    b, _, n, _ = q.shape
    h, kv, d, e = (spec[key] for key in ("heads", "kv_heads", "q_dim", "v_dim"))
    t = n * n
    qh = q.reshape(b, h, d, t).transpose(2, 3)
    kh = k.reshape(b, kv, d, t).transpose(2, 3)
    vh = v.reshape(b, kv, e, t).transpose(2, 3)
    if spec["rope"] != "none":
        ang = rope_angles(spec, freqs, n).transpose(1, 2)  # [K|1, T, D/2]
        cos, sin = torch.cos(ang), torch.sin(ang)
        kh = apply_rope(kh, cos, sin)
        if ang.shape[0] > 1:  # per KV head: each serves heads/kv_heads query heads
            cos, sin = (a.repeat_interleave(h // kv, dim=0) for a in (cos, sin))
        qh = apply_rope(qh, cos, sin)
    if kv != h:
        kh, vh = kh.repeat_interleave(h // kv, dim=1), vh.repeat_interleave(h // kv, dim=1)
    w = torch.softmax(qh @ kh.transpose(2, 3) * (1.0 / math.sqrt(d)), dim=-1)
    return (w @ vh).transpose(2, 3).reshape(b, h * e, n, n)


class FFN(nn.Module):
    """Transformer feed-forward (a residual block): SwiGLU when gated, else act(x W1) W2."""

    def __init__(self, spec: dict[str, Any], channels: int, act: str):
        super().__init__()
        self.gated = bool(spec["gated"])
        self.act = act_fn(act)
        self.norm = PointNorm(channels, spec["eps"])
        self.w1 = _conv(channels, spec["hidden"], 1)
        if self.gated:
            self.gate = _conv(channels, spec["hidden"], 1)
        self.w2 = _conv(spec["hidden"], channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        h = F.silu(self.w1(y)) * self.gate(y) if self.gated else self.act(self.w1(y))
        return x + self.w2(h)


class Nested(nn.Module):
    """A nested bottleneck block: affine, act, conv in, an inner stack, affine, act, conv out,
    added to the input."""

    def __init__(self, spec: dict[str, Any], channels: int, act: str):
        super().__init__()
        inner = spec["channels"]
        self.act = act_fn(act)
        self.pre = Affine(channels)
        self.conv_in = _conv(channels, inner, spec["kernel_in"])
        self.blocks = nn.ModuleList(make_block(s, inner, act) for s in spec["blocks"])
        self.post = Affine(inner)
        self.conv_out = _conv(inner, channels, spec["kernel_out"])

    def forward(self, x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
        y = self.conv_in(self.act(self.pre(x)))
        for block in self.blocks:
            y = run_block(block, y, area)
        return x + self.conv_out(self.act(self.post(y)))


def make_block(spec: dict[str, Any], channels: int, act: str) -> nn.Module:
    kind = spec["kind"]
    if kind in ("ordinary", "gpool"):
        return Block(kind, channels, spec.get("mid", 0), spec.get("regular", 0),
                     spec.get("gpool", 0), act)
    if kind == "nested":
        return Nested(spec, channels, act)
    if kind == "attention":
        return Attention(spec, channels)
    return FFN(spec, channels, act)


def run_block(block: nn.Module, x: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
    return block(x, area) if isinstance(block, (Block, Nested)) else block(x)


class TipNorm(nn.Module):
    """The trunk tip's RMS norm (model version 15+): x / rms * scale + bias, the rms over each
    point's channels or (``spatial``) over the channels and the board together."""

    scale: torch.Tensor
    bias: torch.Tensor

    def __init__(self, channels: int, spatial: bool, eps: float):
        super().__init__()
        self.dims = (1, 2, 3) if spatial else (1,)
        self.eps = float(eps)
        self.register_buffer("scale", torch.ones(channels))
        self.register_buffer("bias", torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ms = (x * x).mean(dim=self.dims, keepdim=True)
        y = x * torch.rsqrt(ms + self.eps)
        return torch.addcmul(self.bias.view(1, -1, 1, 1), y, self.scale.view(1, -1, 1, 1))


class KataGoNet(nn.Module):
    """A KataGo net (see the module docstring for inputs and outputs)."""

    def __init__(self, config: NetConfig):
        super().__init__()
        lay = config.katago
        c = config.channels
        self.config = config
        act = activation(lay)
        self.act = act_fn(act)
        self.num_planes, self.num_globals = 22, 19
        self.conv1 = _conv(self.num_planes, c, int(lay["initial_kernel"]))
        self.global_in = nn.Linear(self.num_globals, c, bias=False)
        self.blocks = nn.ModuleList(make_block(s, c, act) for s in block_specs(lay))
        norm = lay.get("trunk_norm")
        self.tip: nn.Module = Affine(c) if norm is None else \
            TipNorm(c, norm["spatial"], norm["eps"])
        p, g = config.policy_channels, lay["policy_gpool_channels"]
        self.p1 = _conv(c, p, 1)
        self.g1 = _conv(c, g, 1)
        self.g1_bn = Affine(g)
        self.g1_bias = nn.Linear(3 * g, p, bias=False)
        self.p1_bn = Affine(p)
        self.p2 = _conv(p, 1, 1)
        hidden = int(lay.get("pass_hidden", 0))
        if hidden:
            self.g1_pass = nn.Linear(3 * g, hidden)
            self.pass2 = nn.Linear(hidden, 1, bias=False)
        else:
            self.g1_pass = nn.Linear(3 * g, 1, bias=False)
        v, h = config.value_channels, config.value_hidden
        self.v1 = _conv(c, v, 1)
        self.v1_bn = Affine(v)
        self.v2 = nn.Linear(3 * v, h)
        self.v3 = nn.Linear(h, 3)
        self.sv3 = nn.Linear(h, int(lay.get("score_channels", 4)))
        self.own = _conv(v, 1, 1)
        self.eval()
        for param in self.parameters():
            param.requires_grad_(False)

    def forward(self, planes: torch.Tensor, globals: torch.Tensor) -> dict[str, torch.Tensor]:
        bsz = planes.shape[0]
        act = self.act
        area = planes[:, 0].sum(dim=(1, 2)).unsqueeze(1)  # [B, 1] on-board points
        x = self.conv1(planes) + self.global_in(globals)[:, :, None, None]
        for block in self.blocks:
            x = run_block(block, x, area)
        x = act(self.tip(x))
        g = act(self.g1_bn(self.g1(x)))
        gp = gpool(g, area)
        p = self.p1(x) + self.g1_bias(gp)[:, :, None, None]
        p = self.p2(act(self.p1_bn(p))).reshape(bsz, -1)
        pass_logit = self.g1_pass(gp)
        if hasattr(self, "pass2"):
            pass_logit = self.pass2(act(pass_logit))
        v = act(self.v1_bn(self.v1(x)))
        h = act(self.v2(value_pool(v, area)))
        return {
            "policy": torch.cat((p, pass_logit), dim=1),
            "value": self.v3(h),
            "score": self.sv3(h),
            "ownership": self.own(v).reshape(bsz, -1),
        }
