"""The parsed form of a KataGo model file: layer descriptions with numpy float32 weights.

``KataGoModelDesc`` is what ``kosumi.nets.katago.read_katago`` returns and what
``kosumi.nets.katago.katago_checkpoint`` turns into a kosumi net: the header, the trunk, the
policy head and the value head, each layer a ``ConvDesc``, ``BNDesc``, ``MatMulDesc``,
``MatBiasDesc``, ``RMSNormDesc`` or ``TokenNormDesc``. The trunk's blocks are the five kinds of
KataGo's model versions 8 to 17: ``BlockDesc`` (ordinary and global-pooling residual blocks),
``NestedDesc`` (a nested bottleneck block: a 1x1-or-wider conv into an inner stack of any of the
five, and back), ``AttentionDesc`` (transformer attention over the board's points, grouped KV
heads, rotary position embedding) and ``FFNDesc`` (transformer feed-forward, gated SwiGLU or
plain). Also the model versions kosumi supports and their input features. Needs numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SUPPORTED_VERSIONS = tuple(range(8, 18))
#: input features of each supported model version: (name, spatial planes, global inputs)
INPUT_FEATURES = {v: ("katago_v7", 22, 19) for v in SUPPORTED_VERSIONS}
#: activations of model version 11 and later (``ACTIVATION_...`` in the file); ReLU before
ACTIVATIONS = {"ACTIVATION_IDENTITY": "identity", "ACTIVATION_RELU": "relu",
               "ACTIVATION_MISH": "mish", "ACTIVATION_SILU": "silu"}


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
class RMSNormDesc:
    """The trunk tip's RMS norm (model version 15+, trunk norm kind 1): y = x / rms * gamma + beta,
    the rms over the channels of each point, or (``spatial``) over channels and board together."""

    name: str
    channels: int
    eps: float
    spatial: bool
    gamma: np.ndarray
    beta: np.ndarray

    @property
    def num_parameters(self) -> int:
        return 2 * self.channels


@dataclass
class TokenNormDesc:
    """A transformer block's RMS norm over each point's channels, weight only."""

    name: str
    channels: int
    eps: float
    weight: np.ndarray

    @property
    def num_parameters(self) -> int:
        return self.channels


@dataclass
class AttentionDesc:
    """Transformer attention over the board's points (a residual block): RMS norm, q/k/v
    projections (``MatMulDesc``, [in, out]), rotary position embedding on q and k (``rope``
    "learned": ``rope_freqs`` [kv_heads, q_dim/2, 2] = (x, y) frequencies per channel pair;
    "fixed": ``rope_theta``; or "none"), softmax(q.k / sqrt(q_dim)) v per head (each of the
    ``kv_heads`` serves heads/kv_heads query heads), the output projection, added to the input."""

    kind = "attention"
    name: str
    heads: int
    kv_heads: int
    q_dim: int
    v_dim: int
    rope: str
    norm: TokenNormDesc
    q: MatMulDesc
    k: MatMulDesc
    v: MatMulDesc
    out: MatMulDesc
    rope_freqs: np.ndarray | None = None
    rope_theta: float = 0.0

    def layers(self) -> list[Any]:
        return [self.norm, self.q, self.k, self.v, self.out]

    @property
    def num_parameters(self) -> int:
        extra = 0 if self.rope_freqs is None else int(self.rope_freqs.size)
        return sum(x.num_parameters for x in self.layers()) + extra


@dataclass
class FFNDesc:
    """Transformer feed-forward (a residual block): RMS norm, then SwiGLU
    (silu(x W1) * (x Wgate)) W2 when ``gated``, else act(x W1) W2 with the net's activation."""

    kind = "ffn"
    name: str
    channels: int
    hidden: int
    gated: bool
    norm: TokenNormDesc
    w1: MatMulDesc
    w2: MatMulDesc
    gate: MatMulDesc | None = None

    def layers(self) -> list[Any]:
        return [self.norm, self.w1, *([self.gate] if self.gate is not None else []), self.w2]

    @property
    def num_parameters(self) -> int:
        return sum(x.num_parameters for x in self.layers())


@dataclass
class NestedDesc:
    """A nested bottleneck block: pre norm, act, ``pre_conv`` (trunk -> inner channels), an inner
    stack of blocks of any kind, post norm, act, ``post_conv`` (inner -> trunk), added to the
    input."""

    kind = "nested"
    name: str
    pre_bn: BNDesc
    pre_conv: ConvDesc
    blocks: list[Any]
    post_bn: BNDesc
    post_conv: ConvDesc

    def layers(self) -> list[Any]:
        out: list[Any] = [self.pre_bn, self.pre_conv]
        for b in self.blocks:
            out.extend(b.layers())
        return [*out, self.post_bn, self.post_conv]

    @property
    def num_parameters(self) -> int:
        extra = sum(int(b.rope_freqs.size) for b in walk_blocks(self.blocks)
                    if isinstance(b, AttentionDesc) and b.rope_freqs is not None)
        return sum(x.num_parameters for x in self.layers()) + extra


def walk_blocks(blocks: list[Any]) -> list[Any]:
    """Every block of a stack, depth first (a nested block before its inner blocks)."""
    out: list[Any] = []
    for b in blocks:
        out.append(b)
        if isinstance(b, NestedDesc):
            out.extend(walk_blocks(b.blocks))
    return out


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
    blocks: list[Any]  # BlockDesc, NestedDesc, AttentionDesc, FFNDesc
    trunk_tip_bn: BNDesc | RMSNormDesc
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
    # model version 15+: the pass logit through a hidden layer (bias, activation, matmul)
    pass_bias: MatBiasDesc | None = None
    pass_mul2: MatMulDesc | None = None
    activation: str = "relu"  # the one activation of every layer (model version 11+ names it)
    post: dict[str, float] | None = None  # post-processing multipliers (before 13: the default)
    meta_encoder_version: int = 0
    prefer_pass_alive_suicide: bool = False

    def all_layers(self) -> list[Any]:
        out: list[Any] = [self.initial_conv, self.initial_matmul]
        for b in self.blocks:
            out.extend(b.layers())
        out += [self.trunk_tip_bn, self.p1_conv, self.g1_conv, self.g1_bn, self.g1_to_bias,
                self.p1_bn, self.p2_conv, self.g1_to_pass]
        out += [x for x in (self.pass_bias, self.pass_mul2) if x is not None]
        out += [self.v1_conv, self.v1_bn, self.v2_mul, self.v2_bias, self.v3_mul, self.v3_bias,
                self.sv3_mul, self.sv3_bias, self.ownership_conv]
        return out

    @property
    def num_parameters(self) -> int:
        """Parameters as KataGo counts them (conv/matmul weights, biases, norm scales/biases,
        learned rotary frequencies)."""
        rope = sum(int(b.rope_freqs.size) for b in walk_blocks(self.blocks)
                   if isinstance(b, AttentionDesc) and b.rope_freqs is not None)
        return sum(layer.num_parameters for layer in self.all_layers()) + rope

    @property
    def policy_out_channels(self) -> int:
        return self.p2_conv.oc

    def block_kinds(self) -> dict[str, int]:
        """How many blocks of each kind, the inner ones of nested blocks included."""
        out: dict[str, int] = {}
        for b in walk_blocks(self.blocks):
            out[b.kind] = out.get(b.kind, 0) + 1
        return out

    def short_kind(self) -> str:
        """KataGo's own words: "convnet", "transformer", "nbt convnet", "nbt transformer"."""
        kinds = self.block_kinds()
        tf = "attention" in kinds or "ffn" in kinds
        nbt = any(isinstance(b, NestedDesc) for b in self.blocks)
        return ("nbt " if nbt else "") + ("transformer" if tf else "convnet")

    @property
    def features(self) -> str:
        return INPUT_FEATURES[self.version][0]

    def arch(self) -> str:
        return f"b{len(self.blocks)}c{self.trunk_channels}"

