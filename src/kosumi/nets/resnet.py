"""``KosumiNet``: the PyTorch residual network every kosumi student is, with two head styles.

Trunk: input conv 3x3 -> (+ global inputs through a linear layer, as a per-channel bias) -> BN ->
ReLU, then ``blocks`` residual blocks (conv3x3-BN-ReLU-conv3x3-BN, + skip, ReLU). Convolutions
have no bias (the BN after them has one). BatchNorm eps is 1e-5 (Leela Zero's).

``forward(planes, globals=None)`` takes the arrays of the config's feature set (one board size
per batch, no padding) and returns a dict of RAW outputs, before any final nonlinearity (the
runtime applies softmax / tanh once, for every backend):

    policy      [B, N*N + 1] logits, kosumi order (row-major from the top-left point, then pass)
    value       [B, 3] win/loss/noResult logits ("wdl"), or [B, 1] pre-tanh value ("tanh");
                both from the side to move's view
    score_lead  [B] the side to move's lead in points, komi included (only if config.score_lead)
    ownership   [B, N*N] pre-tanh ownership, tanh(.) = +1 when the side to move will own the
                point (only if config.ownership)

Head ``conv`` (any board size): policy = conv1x1 (C -> Cp) -> BN -> ReLU -> conv1x1 (Cp -> 1,
with bias) = one logit per point; pass logit = linear (2*Cp -> 1) on the mean and max over the
board of that activated Cp-channel map. Value = conv1x1 (C -> Cv) -> BN -> ReLU -> [mean, max]
pool (2*Cv; with ``value_pool`` "katago" [mean, mean * (N - 14) / 10, max], 3*Cv, so that the
layers after it know the board's size) -> linear (-> H) -> ReLU -> linear (-> 3 or 1); score
lead = linear (H -> 1) * 20; ownership = conv1x1 (Cv -> 1, with bias) on the activated value map.

Head ``lz`` (19x19 only) is Leela Zero's, tensor for tensor. Leela Zero numbers points
``y*19 + x`` with y = 0 the BOTTOM row, and its 3x3 kernels and fc weights live in that frame.
So that every tensor can be copied 1:1, an lz-head net runs entirely in Leela Zero's frame: the
input planes are flipped vertically on entry (``planes.flip(2)``) and the 361 point logits are
flipped back to kosumi's top-left order on exit; nothing is permuted inside. Mapping of the
Leela Zero text file (one line per tensor) onto ``state_dict`` names, for a reader/writer:

    conv weights [out][in][k][k]  <-> ``<conv>.weight`` (same shape, same order)
    conv "biases"                 <-> ``<bn>.bias * sqrt(<bn>.running_var + 1e-5)``
    bn means / variances          <-> ``<bn>.running_mean`` / ``<bn>.running_var``
                                      (``<bn>.weight`` must be 1 when reading; a writer folds a
                                      gamma g exactly: weights*g, means*g,
                                      biases = beta*sqrt(var+eps))
    input conv group              <-> input_conv, input_bn
    residual block i (2 groups)   <-> blocks.i.conv1/bn1, blocks.i.conv2/bn2
    policy conv group             <-> policy_conv, policy_bn
    policy fc [362][722], biases  <-> policy_fc.weight, policy_fc.bias (input: channel-major
                                      c*361 + point, LZ point order; output: LZ order, 361 = pass)
    value conv group              <-> value_conv, value_bn
    value fc1 [256][361], biases  <-> value_fc1.weight, value_fc1.bias
    value fc2 [256], bias         <-> value_fc2.weight (shape [1, 256]), value_fc2.bias
    winrate = (1 + tanh(value)) / 2 (version-1 files: side to move; version 2: Black's view).
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from kosumi.nets.config import LZ_BOARD_SIZE, NetConfig
from kosumi.nets.features import get_feature_set
from kosumi.nets.katago_net import gpool

BN_EPS = 1e-5
SCORE_SCALE = 20.0  # the score-lead linear predicts points / 20


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS)


def _conv(cin: int, cout: int, k: int, bias: bool = False) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, padding=k // 2, bias=bias)


class ResBlock(nn.Module):
    """conv3x3 - BN - ReLU - conv3x3 - BN, + skip, ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = _conv(channels, channels, 3)
        self.bn1 = _bn(channels)
        self.conv2 = _conv(channels, channels, 3)
        self.bn2 = _bn(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(x + y)


def _pool(x: torch.Tensor) -> torch.Tensor:
    """[B, C, H, W] -> [B, 2C]: mean then max over the board."""
    return torch.cat((x.mean(dim=(2, 3)), x.amax(dim=(2, 3))), dim=1)


class KosumiNet(nn.Module):
    """A residual network described by a ``NetConfig`` (see the module docstring)."""

    def __init__(self, config: NetConfig):
        super().__init__()
        self.config = config
        fs = get_feature_set(config.features)
        c = config.channels
        self.num_planes = fs.num_planes
        self.num_globals = fs.num_globals
        self.input_conv = _conv(fs.num_planes, c, 3)
        self.global_linear = nn.Linear(fs.num_globals, c, bias=False) if fs.num_globals else None
        self.input_bn = _bn(c)
        self.blocks = nn.ModuleList(ResBlock(c) for _ in range(config.blocks))
        if config.head == "lz":
            n2 = LZ_BOARD_SIZE * LZ_BOARD_SIZE
            self.policy_conv = _conv(c, 2, 1)
            self.policy_bn = _bn(2)
            self.policy_fc = nn.Linear(2 * n2, n2 + 1)
            self.value_conv = _conv(c, 1, 1)
            self.value_bn = _bn(1)
            self.value_fc1 = nn.Linear(n2, 256)
            self.value_fc2 = nn.Linear(256, 1)
        else:
            cp, cv, hid = config.policy_channels, config.value_channels, config.value_hidden
            self.policy_conv = _conv(c, cp, 1)
            self.policy_bn = _bn(cp)
            self.policy_point = _conv(cp, 1, 1, bias=True)
            self.policy_pass = nn.Linear(2 * cp, 1)
            self.value_conv = _conv(c, cv, 1)
            self.value_bn = _bn(cv)
            self.value_fc1 = nn.Linear((3 if config.value_pool == "katago" else 2) * cv, hid)
            self.value_fc2 = nn.Linear(hid, config.value_outputs)
            self.score_fc = nn.Linear(hid, 1) if config.score_lead else None
            self.ownership_conv = _conv(cv, 1, 1, bias=True) if config.ownership else None

    # ------------------------------------------------------------------ forward
    def forward(
        self, planes: torch.Tensor, globals: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        if planes.dim() != 4 or planes.shape[1] != self.num_planes:
            raise ValueError(f"expected planes [B, {self.num_planes}, N, N], got "
                             f"{list(planes.shape)}")
        lz = self.config.head == "lz"
        if lz:
            if planes.shape[2] != LZ_BOARD_SIZE or planes.shape[3] != LZ_BOARD_SIZE:
                raise ValueError(f"the lz head is 19x19 only, got a {planes.shape[2]}x"
                                 f"{planes.shape[3]} board")
            planes = planes.flip(2)  # into Leela Zero's bottom-up frame
        x = self.input_conv(planes)
        if self.global_linear is not None:
            if globals is None:
                raise ValueError(f"this net needs {self.num_globals} global inputs")
            x = x + self.global_linear(globals)[:, :, None, None]
        x = F.relu(self.input_bn(x))
        for block in self.blocks:
            x = block(x)
        return self._lz_heads(x) if lz else self._conv_heads(x)

    def _lz_heads(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        b = x.shape[0]
        n = LZ_BOARD_SIZE
        p = F.relu(self.policy_bn(self.policy_conv(x)))
        logits = self.policy_fc(p.flatten(1))  # Leela Zero order: y = 0 is the bottom row
        points = logits[:, : n * n].reshape(b, n, n).flip(1).reshape(b, n * n)
        policy = torch.cat((points, logits[:, n * n :]), dim=1)
        v = F.relu(self.value_bn(self.value_conv(x)))
        value = self.value_fc2(F.relu(self.value_fc1(v.flatten(1))))
        return {"policy": policy, "value": value}

    def _conv_heads(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        p = F.relu(self.policy_bn(self.policy_conv(x)))
        points = self.policy_point(p).flatten(1)
        policy = torch.cat((points, self.policy_pass(_pool(p))), dim=1)
        v = F.relu(self.value_bn(self.value_conv(x)))
        if self.config.value_pool == "katago":  # KataGo's pooling over the whole board
            pooled = gpool(v, v.new_full((v.shape[0], 1), float(v.shape[2] * v.shape[3])))
        else:
            pooled = _pool(v)
        h = F.relu(self.value_fc1(pooled))
        out = {"policy": policy, "value": self.value_fc2(h)}
        if self.score_fc is not None:
            out["score_lead"] = self.score_fc(h).squeeze(1) * SCORE_SCALE
        if self.ownership_conv is not None:
            out["ownership"] = self.ownership_conv(v).flatten(1)
        return out

    # ------------------------------------------------------------------ construction
    def reset_parameters(self, seed: int = 0) -> KosumiNet:
        """Random initialisation, deterministic for ``seed``, giving sane outputs in eval mode:
        He-normal convolutions, residual branches scaled down (second BN gamma 1/sqrt(blocks)) so
        that the trunk's activations stay bounded with depth, output layers rescaled so that a
        random net's policy is neither uniform nor one-hot and its value is near even."""
        g = torch.Generator().manual_seed(int(seed))
        bn2_gamma = 1.0 / max(1, len(self.blocks)) ** 0.5
        with torch.no_grad():
            for name, m in self.named_modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, nonlinearity="relu", generator=g)
                    if m.bias is not None:
                        m.bias.zero_()
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=(1.0 / m.in_features) ** 0.5, generator=g)
                    if m.bias is not None:
                        m.bias.zero_()
                elif isinstance(m, nn.BatchNorm2d):
                    m.reset_running_stats()
                    m.weight.fill_(bn2_gamma if name.endswith("bn2") else 1.0)
                    m.bias.zero_()
            for name, gain in self._output_gains.items():
                layer = getattr(self, name, None)
                if layer is not None:
                    layer.weight.mul_(gain)
        return self

    #: extra gains of the output layers at initialisation: the trunk's features vary little
    #: across the board at first, so the point logits need a boost to be non-uniform
    _output_gains: ClassVar[dict[str, float]] = {
        "policy_point": 3.0, "policy_fc": 3.0, "value_fc2": 0.5, "score_fc": 0.5,
        "ownership_conv": 0.5}

    @classmethod
    def random(cls, config: NetConfig, seed: int = 0) -> KosumiNet:
        """A randomly initialised net in eval mode (see ``reset_parameters``)."""
        return cls(config).reset_parameters(seed).eval()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def inference_tensors(net: nn.Module) -> dict[str, torch.Tensor]:
    """The tensors a checkpoint stores: the state dict without BN's ``num_batches_tracked``."""
    return {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
