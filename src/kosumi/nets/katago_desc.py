"""The parsed form of a KataGo model file: layer descriptions with numpy float32 weights.

``KataGoModelDesc`` is what ``kosumi.nets.katago.read_katago`` returns and what
``kosumi.nets.katago_net.build_katago_net`` builds a torch module from: the header, the trunk
(``BlockDesc`` residual blocks), the policy head and the value head, each layer a ``ConvDesc``,
``BNDesc``, ``MatMulDesc`` or ``MatBiasDesc``. Also the model versions kosumi supports and their
input features. Needs numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SUPPORTED_VERSIONS = (8,)
#: input features of each supported model version: (name, spatial planes, global inputs)
INPUT_FEATURES = {8: ("katago_v7", 22, 19)}


@dataclass
class ConvDesc:
    """A convolution: ``weight`` float32 [oc, ic, ky, kx] (PyTorch order), no bias."""

    name: str
    ky: int
    kx: int
    ic: int
    oc: int
    dil_y: int
    dil_x: int
    weight: np.ndarray

    @property
    def num_parameters(self) -> int:
        return int(self.weight.size)


@dataclass
class BNDesc:
    """A batch norm, y = (x - mean) / sqrt(var + eps) * scale + bias (fixup nets: mean 0, var 1)."""

    name: str
    channels: int
    eps: float
    has_scale: bool
    has_bias: bool
    mean: np.ndarray
    var: np.ndarray
    scale: np.ndarray
    bias: np.ndarray

    @property
    def num_parameters(self) -> int:
        """Learned values only (scale, bias), as KataGo counts them."""
        return self.channels * (int(self.has_scale) + int(self.has_bias))

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """(multiplier, offset) float32 [C]: y = x * multiplier + offset."""
        mult = self.scale.astype(np.float64) / np.sqrt(self.var.astype(np.float64) + self.eps)
        off = self.bias.astype(np.float64) - mult * self.mean.astype(np.float64)
        return mult.astype(np.float32), off.astype(np.float32)


@dataclass
class MatMulDesc:
    """A dense layer without bias: ``weight`` float32 [ic, oc] (y = x @ weight)."""

    name: str
    ic: int
    oc: int
    weight: np.ndarray

    @property
    def num_parameters(self) -> int:
        return int(self.weight.size)


@dataclass
class MatBiasDesc:
    """A bias vector added after a ``MatMulDesc``."""

    name: str
    channels: int
    bias: np.ndarray

    @property
    def num_parameters(self) -> int:
        return int(self.bias.size)


@dataclass
class BlockDesc:
    """A residual block: ``kind`` "ordinary" (pre_bn, conv1, mid_bn, conv2) or "gpool"
    (pre_bn, conv1 = regular conv, gpool_conv, gpool_bn, gpool_mul, mid_bn, conv2)."""

    kind: str
    name: str
    pre_bn: BNDesc
    conv1: ConvDesc
    mid_bn: BNDesc
    conv2: ConvDesc
    gpool_conv: ConvDesc | None = None
    gpool_bn: BNDesc | None = None
    gpool_mul: MatMulDesc | None = None

    def layers(self) -> list[Any]:
        extra = [self.gpool_conv, self.gpool_bn, self.gpool_mul] if self.kind == "gpool" else []
        return [self.pre_bn, self.conv1, *extra, self.mid_bn, self.conv2]


@dataclass
class KataGoModelDesc:
    """A parsed KataGo model: header, trunk, policy head, value head (numpy float32 weights)."""

    path: str
    name: str
    version: int
    binary: bool
    gzipped: bool
    num_input_channels: int
    num_input_globals: int
    trunk_channels: int
    mid_channels: int
    regular_channels: int
    dilated_channels: int
    gpool_channels: int
    initial_conv: ConvDesc
    initial_matmul: MatMulDesc
    blocks: list[BlockDesc]
    trunk_tip_bn: BNDesc
    # policy head
    p1_conv: ConvDesc
    g1_conv: ConvDesc
    g1_bn: BNDesc
    g1_to_bias: MatMulDesc
    p1_bn: BNDesc
    p2_conv: ConvDesc
    g1_to_pass: MatMulDesc
    # value head
    v1_conv: ConvDesc
    v1_bn: BNDesc
    v2_mul: MatMulDesc
    v2_bias: MatBiasDesc
    v3_mul: MatMulDesc
    v3_bias: MatBiasDesc
    sv3_mul: MatMulDesc
    sv3_bias: MatBiasDesc
    ownership_conv: ConvDesc

    def all_layers(self) -> list[Any]:
        out: list[Any] = [self.initial_conv, self.initial_matmul]
        for b in self.blocks:
            out.extend(b.layers())
        out += [self.trunk_tip_bn, self.p1_conv, self.g1_conv, self.g1_bn, self.g1_to_bias,
                self.p1_bn, self.p2_conv, self.g1_to_pass, self.v1_conv, self.v1_bn, self.v2_mul,
                self.v2_bias, self.v3_mul, self.v3_bias, self.sv3_mul, self.sv3_bias,
                self.ownership_conv]
        return out

    @property
    def num_parameters(self) -> int:
        """Parameters as KataGo counts them (conv/matmul weights, biases, BN scale/bias)."""
        return sum(layer.num_parameters for layer in self.all_layers())

    @property
    def features(self) -> str:
        return INPUT_FEATURES[self.version][0]

    def arch(self) -> str:
        return f"b{len(self.blocks)}c{self.trunk_channels}"

