"""KataGo model files (``.bin.gz``, ``.txt.gz``, ``.bin``, ``.txt``): reader, sniffer, description.

The format (facts from KataGo's public sources; this is an independent implementation): a stream
of whitespace-separated ASCII tokens, optionally gzipped. Every float block is either ``@BIN@``
directly followed by N little-endian float32 values (``.bin``) or N ASCII floats (``.txt``);
the count N always follows from the shapes read just before. Both float styles are recognised
from the content, as is gzip, so the file name does not matter.

Supported: model versions 8 to 17 (KataGo's g170 nets of 2020 to today's nets, transformers
included; all take input features V7: 22 spatial + 19 global). The specification is KataGo's
``cpp/neuralnet/desc.cpp`` (v1.17.2). Layout of a file::

    name version numInputChannels numInputGlobalChannels
    [v13+: 7 post-processing multipliers] [v15+: metaEncoderVersion preferPassAlive + 6 zeros]
    trunk numBlocks trunkC midC regularC dilatedC gpoolC [v15+: trunkNormKind + 5 zeros]
      conv (initial, e.g. 5x5 22->trunkC), matmul (globals -> trunkC)
      numBlocks x block, each:  ordinary_block | gpool_block          (name + layers)
                                nested_bottleneck_block name n: BN, act, conv, n blocks, BN,
                                    act, conv
                                transformer_attention_block name heads kvHeads qDim vDim useRope
                                    learnableRope: rms norm, q/k/v/out matmuls, rope freqs|theta
                                transformer_ffn_block name C F swiglu: rms norm, matmuls
      trunk tip: BN (or, v15+ with trunkNormKind 1, an RMS norm), activation
    policy head: name [v17: outChannels + 3 zeros], conv p1, conv g1, BN g1, act, matmul
                 gpool->bias, BN p1, act, conv p2 (1, 2 or 4 channels), matmul gpool->pass
                 [v15+: bias, act, matmul -> the pass channels]
    value head:  name [v17: 3 zeros], conv v1, BN v1, act, matmul v2, bias v2, act, matmul v3,
                 bias v3 (3), matmul sv3, bias sv3 (4; 6 from v9), conv ownership

Layer records: conv ``name ky kx ic oc dilY dilX`` + floats [y][x][ic][oc]; BN ``name C eps
hasScale hasBias`` + mean, var, [scale], [bias]; matmul ``name ic oc`` + floats [ic][oc]; matbias
``name C`` + floats; activation: a name (always ReLU before version 11), then from version 11 its
kind (``ACTIVATION_RELU``, ``_SILU``, ``_MISH``, ``_IDENTITY``). A net with several policy
channels is run with KataGo's policy optimism 0.2 mixed in (``POLICY_OPTIMISM``); a net with an
SGF-metadata encoder (human SL nets) is refused.

Every problem -- not gzip/truncated, wrong version, a shape that does not fit, NaN/inf, a count
larger than the file -- raises ``KosumiError`` with ONE line naming the file and the layer.
Sizes are checked against the bytes left before anything is allocated, and decompression is
capped, so a corrupt file can neither hang the reader nor exhaust memory.

Public API:

``read_katago(path) -> KataGoModelDesc``   parse and validate (numpy weights, no torch)
``parse_katago(data, path) -> ...Desc``     the same on decompressed bytes
``is_katago_file(path) -> bool``            cheap, gzip-aware sniff of the header
``sniff_katago(head) -> bool``              the same on the first (decompressed) bytes
``describe_katago(path) -> dict``           format, version, blocks, channels, parameters, ...
``describe_desc(desc) -> dict``             the same for an already parsed model
``read_katago_model(path) -> Checkpoint``    the model as a kosumi net: (config, tensors)
``katago_checkpoint(desc)``                  the same for an already parsed model

The parsed layers (``KataGoModelDesc`` and friends) are defined in ``kosumi.nets.katago_desc``;
the torch network (``KataGoNet``, built from the config and tensors like every kosumi net) lives
in ``kosumi.nets.katago_net``. This module needs numpy only (no torch).
"""

from __future__ import annotations

import builtins
import os
import re
import zlib
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.go.coords import MAX_SIZE, MIN_SIZE
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.gzipped import GZIP_MAGIC, gunzip
from kosumi.nets.katago_desc import (
    ACTIVATIONS,
    INPUT_FEATURES,
    SUPPORTED_VERSIONS,
    AttentionDesc,
    BlockDesc,
    BNDesc,
    ConvDesc,
    FFNDesc,
    KataGoModelDesc,
    MatBiasDesc,
    MatMulDesc,
    NestedDesc,
    RMSNormDesc,
    TokenNormDesc,
)
from kosumi.nets.katago_layout import DEFAULT_POST

MAX_DECOMPRESSED_BYTES = 1 << 30  # a real KataGo net is far below this (b40c256: ~190 MB)
MAX_CHANNELS = 16384
MAX_KERNEL = 31
MAX_BLOCKS = 1024
_WHITESPACE = b" \t\n\r\x0b\x0c"
_NAME_RE = re.compile(rb"[\x21-\x7e]{1,256}")


# ================================================================================ tokens
class _Stream:
    """Tokens and float blocks of a decompressed KataGo model, with positions for messages."""

    def __init__(self, data: bytes, path: str):
        self.data = data
        self.pos = 0
        self.path = path
        self.binary: bool | None = None  # decided by the first float block
        self.activation: str | None = None  # decided by the first activation layer

    def fail(self, layer: str, what: str) -> KosumiError:
        where = f" (layer {layer})" if layer else ""
        return KosumiError(f"{self.path}: invalid KataGo model{where}: {what}")

    def token(self, layer: str, what: str) -> bytes:
        data, n = self.data, len(self.data)
        i = self.pos
        while i < n and data[i] in _WHITESPACE:
            i += 1
        j = i
        while j < n and data[j] not in _WHITESPACE:
            j += 1
            if j - i > 512:
                raise self.fail(layer, f"expected {what}, found a token longer than 512 bytes")
        if i == j:
            raise self.fail(layer, f"file ends where {what} was expected (truncated?)")
        self.pos = j
        return data[i:j]

    def name(self, layer: str, what: str) -> str:
        tok = self.token(layer, what)
        if not _NAME_RE.fullmatch(tok):
            raise self.fail(layer, f"expected {what}, found non-text bytes")
        return tok.decode("ascii")

    def int(self, layer: str, what: str, lo: int, hi: int) -> int:
        tok = self.token(layer, what)
        try:
            value = int(tok.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            shown = tok[:20].decode("ascii", "replace")
            raise self.fail(layer, f"expected {what} (an integer), found {shown!r}") from None
        if not lo <= value <= hi:
            raise self.fail(layer, f"{what} = {value} is out of range {lo}..{hi}")
        return value

    def float(self, layer: str, what: str) -> float:
        tok = self.token(layer, what)
        try:
            value = float(tok.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            shown = tok[:20].decode("ascii", "replace")
            raise self.fail(layer, f"expected {what} (a number), found {shown!r}") from None
        return value

    # (below the int and float methods, the builtins need their module's name in annotations)
    def _text_floats(self, start: builtins.int, count: builtins.int, layer: str, what: str
                     ) -> np.ndarray:
        """``count`` ASCII floats from ``start`` (vectorised: split a slice, convert at once)."""
        data, n = self.data, len(self.data)
        # every ASCII float takes at least 2 bytes (a digit and a separator)
        if 2 * count > n - start + 1:
            raise self.fail(layer, f"file ends inside the {what} values (truncated?)")
        span = 48 * count + 64
        while True:
            chunk = data[start : start + span]
            toks = chunk.split(None, count)
            if len(toks) > count or start + span >= n:
                break
            span *= 4  # unusually long tokens: look further
        if len(toks) < count:
            raise self.fail(layer, f"file ends inside the {what} values: need {count}, found "
                                   f"{len(toks)} (truncated?)")
        rest = toks[count] if len(toks) > count else b""
        self.pos = start + len(chunk) - len(rest)
        try:
            return np.array(toks[:count]).astype(np.float32)
        except ValueError:
            for k, tok in enumerate(toks[:count]):
                try:
                    float(tok)
                except ValueError:
                    shown = tok[:20].decode("ascii", "replace")
                    raise self.fail(layer, f"{what} value {k + 1} of {count} is {shown!r}, "
                                           "not a number") from None
            raise

    def floats(self, count: builtins.int, layer: str, what: str) -> np.ndarray:
        """A float block of ``count`` values (binary ``@BIN@`` or text), checked finite."""
        data, n = self.data, len(self.data)
        i = self.pos
        skipped = 0
        while i < n and data[i] in _WHITESPACE:
            i += 1
            skipped += 1
            if skipped > 100:
                raise self.fail(layer, f"too much whitespace before the {what} values")
        if i >= n:
            raise self.fail(layer, f"file ends before the {what} values (truncated?)")
        binary = data[i] == 0x40  # '@'
        if self.binary is None:
            self.binary = binary
        elif binary != self.binary:
            kind = "binary (@BIN@)" if self.binary else "text"
            raise self.fail(layer, f"the {what} values are not {kind} like the earlier blocks")
        if binary:
            if data[i : i + 5] != b"@BIN@":
                raise self.fail(layer, f"bad binary block marker before the {what} values")
            start = i + 5
            end = start + 4 * count
            if end > n:
                raise self.fail(layer, f"file ends inside the {what} values: need {count} "
                                       f"float32, {max(0, (n - start) // 4)} left (truncated?)")
            values = np.frombuffer(data, dtype="<f4", count=count, offset=start).astype(np.float32)
            self.pos = end
        else:
            values = self._text_floats(i, count, layer, what)
        bad = ~np.isfinite(values)
        if bad.any():
            k = int(np.argmax(bad))
            raise self.fail(layer, f"{what} value {k + 1} of {count} is {values[k]} "
                                   "(NaN or infinite)")
        return values


# ================================================================================ layer readers
def _read_conv(s: _Stream, expect_in: int | None = None, expect_out: int | None = None,
               role: str = "conv") -> ConvDesc:
    name = s.name("", f"the name of the {role} layer")
    ky = s.int(name, "kernel height", 1, MAX_KERNEL)
    kx = s.int(name, "kernel width", 1, MAX_KERNEL)
    ic = s.int(name, "input channels", 1, MAX_CHANNELS)
    oc = s.int(name, "output channels", 1, MAX_CHANNELS)
    dy = s.int(name, "vertical dilation", 1, 64)
    dx = s.int(name, "horizontal dilation", 1, 64)
    if ky % 2 == 0 or kx % 2 == 0:
        raise s.fail(name, f"convolution kernel {ky}x{kx} must have odd sizes")
    if expect_in is not None and ic != expect_in:
        raise s.fail(name, f"{role} has {ic} input channels, expected {expect_in}")
    if expect_out is not None and oc != expect_out:
        raise s.fail(name, f"{role} has {oc} output channels, expected {expect_out}")
    w = s.floats(ky * kx * ic * oc, name, "convolution weight")
    weight = np.ascontiguousarray(w.reshape(ky, kx, ic, oc).transpose(3, 2, 0, 1))
    return ConvDesc(name, ky, kx, ic, oc, dy, dx, weight)


def _read_bn(s: _Stream, expect: int | None = None, role: str = "batch norm") -> BNDesc:
    name = s.name("", f"the name of the {role} layer")
    c = s.int(name, "channels", 1, MAX_CHANNELS)
    eps = s.float(name, "epsilon")
    has_scale = s.int(name, "hasScale flag", 0, 1)
    has_bias = s.int(name, "hasBias flag", 0, 1)
    if not (np.isfinite(eps) and eps > 0):
        raise s.fail(name, f"batch norm epsilon {eps} is not positive and finite")
    if expect is not None and c != expect:
        raise s.fail(name, f"{role} has {c} channels, expected {expect}")
    mean = s.floats(c, name, "batch norm mean")
    var = s.floats(c, name, "batch norm variance")
    if (var + eps <= 0).any():
        raise s.fail(name, "batch norm variance + epsilon is not positive")
    scale = s.floats(c, name, "batch norm scale") if has_scale else np.ones(c, np.float32)
    bias = s.floats(c, name, "batch norm bias") if has_bias else np.zeros(c, np.float32)
    return BNDesc(name, c, eps, bool(has_scale), bool(has_bias), mean, var, scale, bias)


def _read_act(s: _Stream, version: int) -> str:
    """An activation layer: its name, and from model version 11 its kind. Returns the kind
    (kosumi's word: relu, silu, mish, identity); the first one read is the net's, and every
    later one must be the same (KataGo's own trainer uses one activation throughout)."""
    name = s.name("", "the name of an activation layer")
    kind = "relu"
    if version >= 11:
        tok = s.name(name, "the activation kind")
        if tok not in ACTIVATIONS:
            raise s.fail(name, f"unknown activation {tok!r} (KataGo knows "
                               f"{', '.join(ACTIVATIONS)})")
        kind = ACTIVATIONS[tok]
    if s.activation is None:
        s.activation = kind
    elif kind != s.activation:
        raise s.fail(name, f"activation {kind} differs from the net's earlier {s.activation}; "
                           "kosumi runs nets with one activation throughout")
    return kind


def _read_matmul(s: _Stream, expect_in: int | None = None, expect_out: int | None = None,
                 role: str = "matmul") -> MatMulDesc:
    name = s.name("", f"the name of the {role} layer")
    ic = s.int(name, "input channels", 1, MAX_CHANNELS)
    oc = s.int(name, "output channels", 1, MAX_CHANNELS)
    if expect_in is not None and ic != expect_in:
        raise s.fail(name, f"{role} has {ic} input channels, expected {expect_in}")
    if expect_out is not None and oc != expect_out:
        raise s.fail(name, f"{role} has {oc} output channels, expected {expect_out}")
    w = s.floats(ic * oc, name, "matmul weight").reshape(ic, oc)
    return MatMulDesc(name, ic, oc, w)


def _read_matbias(s: _Stream, expect: int | None = None, role: str = "bias") -> MatBiasDesc:
    name = s.name("", f"the name of the {role} layer")
    c = s.int(name, "channels", 1, MAX_CHANNELS)
    if expect is not None and c != expect:
        raise s.fail(name, f"{role} has {c} channels, expected {expect}")
    return MatBiasDesc(name, c, s.floats(c, name, "bias"))


def _zero_option(s: _Stream, layer: str, what: str) -> None:
    """One of the reserved integers of model version 15+/17 headers: KataGo refuses non-zero."""
    v = s.int(layer, what, -(10**9), 10**9)
    if v != 0:
        raise s.fail(layer, f"{what} is {v}; KataGo v1.17 knows only 0 there (a newer file?)")


def _read_token_norm(s: _Stream, channels: int, role: str) -> TokenNormDesc:
    name = s.name("", f"the name of the {role}")
    c = s.int(name, "channels", 1, MAX_CHANNELS)
    eps = s.float(name, "epsilon")
    if not (np.isfinite(eps) and 0 < eps <= 1):
        raise s.fail(name, f"rms norm epsilon {eps} is not in (0, 1]")
    if c != channels:
        raise s.fail(name, f"{role} has {c} channels, expected {channels}")
    return TokenNormDesc(name, c, eps, s.floats(c, name, "rms norm weight"))


def _read_attention(s: _Stream, channels: int) -> AttentionDesc:
    name = s.name("", "a transformer attention block name")
    heads = s.int(name, "numHeads", 1, 4096)
    kv_heads = s.int(name, "numKVHeads", 1, 4096)
    q_dim = s.int(name, "qHeadDim", 1, MAX_CHANNELS)
    v_dim = s.int(name, "vHeadDim", 1, MAX_CHANNELS)
    use_rope = s.int(name, "useRope flag", 0, 1)
    learned = s.int(name, "learnableRope flag", 0, 1)
    if heads % kv_heads:
        raise s.fail(name, f"numHeads ({heads}) is not a multiple of numKVHeads ({kv_heads})")
    if use_rope and q_dim % 2:
        raise s.fail(name, f"qHeadDim ({q_dim}) must be even when RoPE is used")
    norm = _read_token_norm(s, channels, f"attention block {name} norm")
    q = _read_matmul(s, channels, heads * q_dim, f"attention block {name} q projection")
    k = _read_matmul(s, channels, kv_heads * q_dim, f"attention block {name} k projection")
    v = _read_matmul(s, channels, kv_heads * v_dim, f"attention block {name} v projection")
    out = _read_matmul(s, heads * v_dim, channels, f"attention block {name} output projection")
    freqs, theta, rope = None, 0.0, "none"
    if use_rope and learned:
        fname = s.name(name, "the rope frequencies name")
        nk = s.int(fname, "rope kv heads", 1, 4096)
        npairs = s.int(fname, "rope pairs", 1, MAX_CHANNELS)
        two = s.int(fname, "rope last dimension", 1, 64)
        if nk != kv_heads or npairs != q_dim // 2 or two != 2:
            raise s.fail(fname, f"rope frequencies are {nk}x{npairs}x{two}, expected "
                                f"{kv_heads}x{q_dim // 2}x2 (numKVHeads x qHeadDim/2 x 2)")
        freqs = s.floats(nk * npairs * 2, fname, "rope frequencies").reshape(nk, npairs, 2)
        rope = "learned"
    elif use_rope:
        tname = s.name(name, "the rope theta name")
        theta = s.float(tname, "rope theta")
        if not (np.isfinite(theta) and theta > 0):
            raise s.fail(tname, f"rope theta {theta} is not positive and finite")
        if (q_dim // 2) % 2:
            raise s.fail(tname, f"fixed RoPE splits qHeadDim/2 ({q_dim // 2}) channel pairs "
                                "between rows and columns: it must be even")
        rope = "fixed"
    return AttentionDesc(name, heads, kv_heads, q_dim, v_dim, rope, norm, q, k, v, out,
                         freqs, theta)


def _read_ffn(s: _Stream, channels: int) -> FFNDesc:
    name = s.name("", "a transformer ffn block name")
    c = s.int(name, "numChannels", 1, MAX_CHANNELS)
    hidden = s.int(name, "ffnChannels", 1, 4 * MAX_CHANNELS)
    gated = s.int(name, "useSwiGLU flag", 0, 1)
    if c != channels:
        raise s.fail(name, f"ffn block has {c} channels, expected {channels}")
    norm = _read_token_norm(s, c, f"ffn block {name} norm")
    w1 = _read_matmul(s, c, hidden, f"ffn block {name} linear1")
    gate = _read_matmul(s, c, hidden, f"ffn block {name} gate") if gated else None
    w2 = _read_matmul(s, hidden, c, f"ffn block {name} linear2")
    return FFNDesc(name, c, hidden, bool(gated), norm, w1, w2, gate)


def _read_nested(s: _Stream, version: int, trunk_c: int, depth: int) -> NestedDesc:
    name = s.name("", "a nested bottleneck block name")
    n = s.int(name, "the number of inner blocks", 1, MAX_BLOCKS)
    pre_bn = _read_bn(s, trunk_c, f"block {name} pre norm")
    _read_act(s, version)
    pre_conv = _read_conv(s, trunk_c, None, f"block {name} pre conv")
    inner = _read_stack(s, version, pre_conv.oc, n, None, depth + 1, name)
    post_bn = _read_bn(s, pre_conv.oc, f"block {name} post norm")
    _read_act(s, version)
    post_conv = _read_conv(s, pre_conv.oc, trunk_c, f"block {name} post conv")
    return NestedDesc(name, pre_bn, pre_conv, inner, post_bn, post_conv)


BLOCK_KINDS = ("ordinary_block", "gpool_block", "nested_bottleneck_block",
               "transformer_attention_block", "transformer_ffn_block")


def _read_stack(s: _Stream, version: int, channels: int, count: int,
                widths: dict[str, int] | None, depth: int, parent: str) -> list[Any]:
    """``count`` blocks on a residual stream of ``channels``; ``widths`` checks the trunk's own
    ordinary and gpool blocks against its header (inner stacks have their own widths)."""
    if depth > 8:
        raise s.fail(parent, "nested bottleneck blocks nest deeper than 8")
    blocks: list[Any] = []
    for _ in range(count):
        kind_tok = s.name(parent, "a block kind")
        if kind_tok not in BLOCK_KINDS:
            raise s.fail(parent, f"unknown block kind {kind_tok!r} (KataGo knows "
                                 f"{', '.join(BLOCK_KINDS)})")
        if kind_tok in ("ordinary_block", "gpool_block"):
            blocks.append(_read_block(s, version, channels, widths, kind_tok))
        elif kind_tok == "nested_bottleneck_block":
            blocks.append(_read_nested(s, version, channels, depth))
        elif kind_tok == "transformer_attention_block":
            blocks.append(_read_attention(s, channels))
        else:
            blocks.append(_read_ffn(s, channels))
    return blocks


def _read_block(s: _Stream, version: int, trunk_c: int, widths: dict[str, int] | None,
                kind_tok: str) -> BlockDesc:
    w = widths or {}
    name = s.name("", "a residual block name")
    pre_bn = _read_bn(s, trunk_c, f"block {name} pre-activation batch norm")
    _read_act(s, version)
    if kind_tok == "ordinary_block":
        # KataGo: an ordinary block's regular conv outputs midNumChannels
        conv1 = _read_conv(s, trunk_c, w.get("mid"), f"block {name} first conv")
        mid_bn = _read_bn(s, conv1.oc, f"block {name} middle batch norm")
        _read_act(s, version)
        conv2 = _read_conv(s, conv1.oc, trunk_c, f"block {name} second conv")
        return BlockDesc("ordinary", name, pre_bn, conv1, mid_bn, conv2)
    # a gpool block's regular conv outputs regularNumChannels, its gpool conv gpoolNumChannels
    conv1 = _read_conv(s, trunk_c, w.get("regular"), f"block {name} regular conv")
    gconv = _read_conv(s, trunk_c, w.get("gpool"), f"block {name} gpool conv")
    gbn = _read_bn(s, gconv.oc, f"block {name} gpool batch norm")
    _read_act(s, version)
    gmul = _read_matmul(s, 3 * gconv.oc, conv1.oc, f"block {name} gpool-to-bias matmul")
    mid_bn = _read_bn(s, conv1.oc, f"block {name} middle batch norm")
    _read_act(s, version)
    conv2 = _read_conv(s, conv1.oc, trunk_c, f"block {name} final conv")
    return BlockDesc("gpool", name, pre_bn, conv1, mid_bn, conv2, gconv, gbn, gmul)


def _read_rmsnorm(s: _Stream, channels: int) -> RMSNormDesc:
    name = s.name("", "the name of the trunk tip rms norm")
    c = s.int(name, "channels", 1, MAX_CHANNELS)
    eps = s.float(name, "epsilon")
    spatial = s.int(name, "spatial flag", 0, 1)
    group = s.int(name, "cgroupSize", 0, MAX_CHANNELS)
    if not (np.isfinite(eps) and 0 < eps <= 1):
        raise s.fail(name, f"rms norm epsilon {eps} is not in (0, 1]")
    if group:
        raise s.fail(name, f"grouped rms norm (cgroupSize {group}) is not supported by KataGo")
    if c != channels:
        raise s.fail(name, f"trunk tip rms norm has {c} channels, expected {channels}")
    gamma = s.floats(c, name, "rms norm gamma")
    beta = s.floats(c, name, "rms norm beta")
    return RMSNormDesc(name, c, eps, bool(spatial), gamma, beta)


# ================================================================================ file level


def _read_bytes(path: str | os.PathLike[str]) -> tuple[bytes, bool]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise KosumiError(f"{path}: cannot read model file ({e.strerror or e})") from None
    if raw.startswith(GZIP_MAGIC):
        return gunzip(raw, MAX_DECOMPRESSED_BYTES, str(path), "KataGo model"), True
    return raw, False


def _read_header(s: _Stream, path: str) -> dict[str, Any]:
    """name, version, inputs, and the post-processing and options of later versions."""
    try:
        name = s.name("", "the model name")
        version = s.int("header", "the model version", -(10**9), 10**9)
    except KosumiError:
        raise KosumiError(f"{path}: not a KataGo model (a KataGo model starts with: name, "
                          "version, spatial inputs, global inputs)") from None
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(map(str, SUPPORTED_VERSIONS))
        raise KosumiError(f"{path}: KataGo model version {version} is not supported "
                          f"(supported: {supported})")
    n_in = s.int("header", "numInputChannels", 1, 4096)
    n_glob = s.int("header", "numInputGlobalChannels", 1, 4096)
    _, exp_in, exp_glob = INPUT_FEATURES[version]
    if (n_in, n_glob) != (exp_in, exp_glob):
        raise s.fail("header", f"a version-{version} net takes {exp_in} spatial and {exp_glob} "
                               f"global inputs, the file says {n_in} and {n_glob}")
    post = dict(DEFAULT_POST)
    if version >= 13:
        for key in DEFAULT_POST:
            value = s.float("header", f"the {key} multiplier")
            if not (np.isfinite(value) and value > 0):
                raise s.fail("header", f"the {key} multiplier {value} is not positive and finite")
            post[key] = value
    meta_version, prefer_pass_alive = 0, False
    if version >= 15:
        meta_version = s.int("header", "metaEncoderVersion", 0, 10**9)
        if meta_version > 0:
            raise s.fail("header", f"metaEncoderVersion {meta_version}: an SGF-metadata (human "
                                   "SL) net, which kosumi does not run")
        prefer_pass_alive = bool(s.int("header", "preferPassAliveUnderSuicideRules", 0, 1))
        for opt in "CDEFGH":
            _zero_option(s, "header", f"model option {opt}")
    return {"name": name, "version": version, "num_input_channels": n_in,
            "num_input_globals": n_glob, "post": post, "meta_encoder_version": meta_version,
            "prefer_pass_alive_suicide": prefer_pass_alive}


def _read_trunk(s: _Stream, version: int, n_in: int, n_glob: int) -> dict[str, Any]:
    trunk_name = s.name("trunk", "the trunk name")
    num_blocks = s.int(trunk_name, "numBlocks", 1, MAX_BLOCKS)
    trunk_c = s.int(trunk_name, "trunk channels", 1, MAX_CHANNELS)
    mid_c = s.int(trunk_name, "mid channels", 1, MAX_CHANNELS)
    regular_c = s.int(trunk_name, "regular channels", 1, MAX_CHANNELS)
    dilated_c = s.int(trunk_name, "dilated channels", 1, MAX_CHANNELS)
    gpool_c = s.int(trunk_name, "gpool channels", 1, MAX_CHANNELS)
    trunk_norm = 0
    if version >= 15:
        trunk_norm = s.int(trunk_name, "trunk norm kind", 0, 1)
        for opt in "BCDEF":
            _zero_option(s, trunk_name, f"trunk option {opt}")
    if mid_c != regular_c + dilated_c:  # KataGo's trainer writes mid = regular + dilated
        raise s.fail(trunk_name, f"midNumChannels ({mid_c}) != regularNumChannels ({regular_c}) "
                                 f"+ dilatedNumChannels ({dilated_c})")
    widths = {"mid": mid_c, "regular": regular_c, "gpool": gpool_c}
    init_conv = _read_conv(s, n_in, trunk_c, "initial conv")
    init_mm = _read_matmul(s, n_glob, trunk_c, "initial global matmul")
    blocks = _read_stack(s, version, trunk_c, num_blocks, widths, 0, trunk_name)
    if trunk_norm == 1:
        tip: BNDesc | RMSNormDesc = _read_rmsnorm(s, trunk_c)
    else:
        tip = _read_bn(s, trunk_c, "trunk tip batch norm")
    _read_act(s, version)
    return {"trunk_channels": trunk_c, "mid_channels": mid_c, "regular_channels": regular_c,
            "dilated_channels": dilated_c, "gpool_channels": gpool_c, "initial_conv": init_conv,
            "initial_matmul": init_mm, "blocks": blocks, "trunk_tip_bn": tip}


def _read_policy_head(s: _Stream, version: int, trunk_c: int) -> dict[str, Any]:
    head = s.name("policy head", "the policy head name")
    if version >= 17:
        policy_out = s.int(head, "policyOutChannels", 1, 64)
        if policy_out not in (2, 4):
            raise s.fail(head, f"policyOutChannels {policy_out} (KataGo knows 2 and 4)")
        for opt in "ABC":
            _zero_option(s, head, f"policy option {opt}")
    else:
        policy_out = 4 if version == 16 else 2 if version >= 12 else 1
    p1 = _read_conv(s, trunk_c, None, "policy p1 conv")
    g1 = _read_conv(s, trunk_c, None, "policy g1 conv")
    g1_bn = _read_bn(s, g1.oc, "policy g1 batch norm")
    _read_act(s, version)
    g1_bias = _read_matmul(s, 3 * g1.oc, p1.oc, "policy gpool-to-bias matmul")
    p1_bn = _read_bn(s, p1.oc, "policy p1 batch norm")
    _read_act(s, version)
    p2 = _read_conv(s, p1.oc, policy_out, "policy p2 conv")
    pass_bias = pass_mul2 = None
    if version >= 15:  # the pass logit through a hidden layer
        g1_pass = _read_matmul(s, 3 * g1.oc, p1.oc, "policy gpool-to-pass matmul")
        pass_bias = _read_matbias(s, p1.oc, "policy pass bias")
        _read_act(s, version)
        pass_mul2 = _read_matmul(s, p1.oc, policy_out, "policy pass second matmul")
    else:
        g1_pass = _read_matmul(s, 3 * g1.oc, policy_out, "policy gpool-to-pass matmul")
    return {"p1_conv": p1, "g1_conv": g1, "g1_bn": g1_bn, "g1_to_bias": g1_bias,
            "p1_bn": p1_bn, "p2_conv": p2, "g1_to_pass": g1_pass, "pass_bias": pass_bias,
            "pass_mul2": pass_mul2}


def _read_value_head(s: _Stream, version: int, trunk_c: int) -> dict[str, Any]:
    head = s.name("value head", "the value head name")
    if version >= 17:
        for opt in "ABC":
            _zero_option(s, head, f"value option {opt}")
    v1 = _read_conv(s, trunk_c, None, "value v1 conv")
    v1_bn = _read_bn(s, v1.oc, "value v1 batch norm")
    _read_act(s, version)
    v2 = _read_matmul(s, 3 * v1.oc, None, "value v2 matmul")
    v2b = _read_matbias(s, v2.oc, "value v2 bias")
    _read_act(s, version)
    v3 = _read_matmul(s, v2.oc, 3, "value v3 matmul")
    v3b = _read_matbias(s, 3, "value v3 bias")
    n_score = 6 if version >= 9 else 4  # + short-term value and score errors from version 9
    sv3 = _read_matmul(s, v2.oc, n_score, "score sv3 matmul")
    sv3b = _read_matbias(s, n_score, "score sv3 bias")
    own = _read_conv(s, v1.oc, 1, "ownership conv")
    return {"v1_conv": v1, "v1_bn": v1_bn, "v2_mul": v2, "v2_bias": v2b, "v3_mul": v3,
            "v3_bias": v3b, "sv3_mul": sv3, "sv3_bias": sv3b, "ownership_conv": own}


def parse_katago(data: bytes, path: str = "<memory>", gzipped: bool = False) -> KataGoModelDesc:
    """Parse a decompressed KataGo model (see the module docstring). Raises KosumiError."""
    s = _Stream(data, str(path))
    header = _read_header(s, str(path))
    version = header["version"]
    trunk = _read_trunk(s, version, header["num_input_channels"], header["num_input_globals"])
    policy = _read_policy_head(s, version, trunk["trunk_channels"])
    value = _read_value_head(s, version, trunk["trunk_channels"])
    rest = data[s.pos :].strip()
    if rest:
        raise s.fail("end", f"{len(rest)} unexpected bytes after the value head")
    return KataGoModelDesc(path=str(path), binary=bool(s.binary), gzipped=gzipped,
                           activation=s.activation or "relu", **header, **trunk, **policy,
                           **value)


def read_katago(path: str | os.PathLike[str]) -> KataGoModelDesc:
    """Read and validate a KataGo model file (gzip and binary/text detected from content)."""
    data, gz = _read_bytes(path)
    return parse_katago(data, str(path), gzipped=gz)


# ================================================================================ sniffing
def _head_bytes(path: str | os.PathLike[str], limit: int = 1024) -> bytes:
    """The first ``limit`` bytes of the (decompressed) file; b"" when unreadable."""
    try:
        with open(path, "rb") as f:
            raw = f.read(65536)
    except OSError:
        return b""
    if not raw.startswith(GZIP_MAGIC):
        return raw[:limit]
    d = zlib.decompressobj(wbits=31)
    try:
        return d.decompress(raw, limit)
    except zlib.error:
        return b""


def sniff_katago(head: bytes) -> bool:
    """Do these first (decompressed) bytes look like a KataGo model header?

    ``name version numInputs numGlobals`` followed, within the next few tokens, by the trunk."""
    toks = head.split()[:24]
    if len(toks) < 5 or not _NAME_RE.fullmatch(toks[0]):
        return False
    if not all(t.isdigit() for t in toks[1:4]):
        return False
    return 1 <= int(toks[1]) <= 99 and b"trunk" in toks[4:]


def is_katago_file(path: str | os.PathLike[str]) -> bool:
    """Cheap check: is ``path`` a KataGo model (any version; gzipped or not)?"""
    return sniff_katago(_head_bytes(path))


# ================================================================================ description
def describe_katago(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What ``kosumi inspect`` shows for a KataGo model. Raises KosumiError on a bad file."""
    desc = read_katago(path)
    return describe_desc(desc)


def describe_desc(desc: KataGoModelDesc) -> dict[str, Any]:
    fmt = "KataGo " + ("binary" if desc.binary else "text") + (" (gzip)" if desc.gzipped else "")
    heads = {
        "policy": "N*N points + pass (logits; illegal points masked before the softmax)",
        "value": "win / loss / noResult (softmax)",
        "score": "score mean, score stdev, lead, variance of time left (x20, softplus x20, "
                 "x20, softplus x40)",
        "ownership": "per point, tanh; +1 = the side to move owns it",
    }
    if desc.policy_out_channels > 1:
        heads["policy"] += (f"; {desc.policy_out_channels} channels (policy, optimistic policy"
                            + (", q-value" if desc.policy_out_channels > 2 else "")
                            + f"), run as policy + {POLICY_OPTIMISM} x (optimistic - policy)")
    if desc.sv3_mul.oc == 6:
        post = desc.post or {}
        heads["score"] = (f"score mean, score stdev, lead, variance of time left, short-term "
                          f"value error, short-term score error (x{post.get('score_mean')}, "
                          f"softplus x{post.get('score_stdev')}, x{post.get('lead')}, softplus "
                          f"x{post.get('variance_time')}, ...)")
    return {
        "format": fmt,
        "name": desc.name,
        "version": desc.version,
        "arch": desc.arch(),
        "kind": desc.short_kind(),
        "activation": desc.activation,
        "blocks": len(desc.blocks),
        "block_kinds": desc.block_kinds(),
        "channels": {
            "trunk": desc.trunk_channels, "mid": desc.mid_channels,
            "regular": desc.regular_channels, "gpool": desc.gpool_channels,
            "policy": desc.p1_conv.oc, "policy_gpool": desc.g1_conv.oc,
            "value": desc.v1_conv.oc, "value_hidden": desc.v2_mul.oc,
        },
        "parameters": desc.num_parameters,
        "input_features": {"name": desc.features, "spatial": desc.num_input_channels,
                           "global": desc.num_input_globals},
        "heads": heads,
        "board_sizes": list(range(2, 20)),
    }


# ================================================================================ as a kosumi net
#: the mix of the plain and the optimistic policy (model version 12+) that the net's one policy
#: output carries: KataGo's ``rootPolicyOptimism`` default in GTP and analysis (min(1, 0.2)),
#: which is what its ``kata-raw-nn`` answers with
POLICY_OPTIMISM = 0.2


def _block_spec(desc: KataGoModelDesc, b: Any, top: bool) -> Any:
    if isinstance(b, BlockDesc):
        if top:  # the trunk's own widths (checked against the header when read)
            return b.kind
        if b.kind == "ordinary":
            return {"kind": "ordinary", "mid": b.conv1.oc}
        assert b.gpool_conv is not None
        return {"kind": "gpool", "regular": b.conv1.oc, "gpool": b.gpool_conv.oc}
    if isinstance(b, NestedDesc):
        return {"kind": "nested", "channels": b.pre_conv.oc, "kernel_in": b.pre_conv.ky,
                "kernel_out": b.post_conv.ky,
                "blocks": [_block_spec(desc, x, False) for x in b.blocks]}
    if isinstance(b, AttentionDesc):
        return {"kind": "attention", "heads": b.heads, "kv_heads": b.kv_heads,
                "q_dim": b.q_dim, "v_dim": b.v_dim, "rope": b.rope,
                "rope_theta": b.rope_theta, "eps": b.norm.eps}
    assert isinstance(b, FFNDesc)
    return {"kind": "ffn", "hidden": b.hidden, "gated": b.gated, "eps": b.norm.eps}


def katago_config(desc: KataGoModelDesc, policy_optimism: float = POLICY_OPTIMISM) -> NetConfig:
    """The ``NetConfig`` (head ``katago``) of a parsed model: its layout and outputs
    (``kosumi.nets.katago_layout``)."""
    lay: dict[str, Any] = {
        "model_version": desc.version, "name": desc.name,
        "mid_channels": desc.mid_channels, "regular_channels": desc.regular_channels,
        "dilated_channels": desc.dilated_channels, "gpool_channels": desc.gpool_channels,
        "policy_gpool_channels": desc.g1_conv.oc, "initial_kernel": desc.initial_conv.ky,
        "blocks": [_block_spec(desc, b, True) for b in desc.blocks],
    }
    if desc.version > 8:  # what version 8 leaves out keeps its configs as they were
        lay["activation"] = desc.activation
        lay["score_channels"] = desc.sv3_mul.oc
        lay["post"] = dict(desc.post or {})
        lay["policy_optimism"] = float(policy_optimism) if desc.policy_out_channels > 1 else 0.0
        if desc.pass_mul2 is not None:
            lay["pass_hidden"] = desc.g1_to_pass.oc
        tip = desc.trunk_tip_bn
        if isinstance(tip, RMSNormDesc):
            lay["trunk_norm"] = {"kind": "rms", "spatial": tip.spatial, "eps": tip.eps}
        if desc.prefer_pass_alive_suicide:
            lay["prefer_pass_alive_suicide"] = True
    return NetConfig(
        arch=desc.arch(), features=desc.features, head="katago",
        board_sizes=list(range(MIN_SIZE, MAX_SIZE + 1)), value="wdl",
        score_lead=True, ownership=True, policy_channels=desc.p1_conv.oc,
        value_channels=desc.v1_conv.oc, value_hidden=desc.v2_mul.oc,
        katago=lay,
        provenance={"source": "KataGo model", "katago_name": desc.name},
    )


def _affine(out: dict[str, np.ndarray], name: str, bn: BNDesc) -> None:
    scale, bias = bn.merged()
    out[f"{name}.scale"] = scale
    out[f"{name}.bias"] = bias


def _conv_weight(desc: KataGoModelDesc, conv: ConvDesc, k: int | None) -> np.ndarray:
    k = conv.ky if k is None else k
    if (conv.ky, conv.kx) != (k, k) or (conv.dil_y, conv.dil_x) != (1, 1):
        raise KosumiError(f"{desc.path}: KataGo layer {conv.name}: a {conv.ky}x{conv.kx} "
                          f"convolution with dilation {conv.dil_y}x{conv.dil_x}; kosumi runs "
                          f"{k}x{k} undilated convolutions there")
    return conv.weight


def _point_weight(mm: MatMulDesc) -> np.ndarray:
    """A matmul on each point's channels as a 1x1 convolution's weight [out, in, 1, 1]."""
    return np.ascontiguousarray(mm.weight.T)[:, :, None, None]


def _mixed(w: np.ndarray, optimism: float) -> np.ndarray:
    """Channel 0 (policy) and 1 (optimistic policy) of an output axis-0 weight, mixed as KataGo
    mixes the logits: p + (p_opt - p) * optimism (the layers are linear, so the weights mix)."""
    if w.shape[0] == 1:
        return w
    w64 = w.astype(np.float64)
    return (w64[:1] + (w64[1:2] - w64[:1]) * optimism).astype(np.float32)


def _block_tensors(desc: KataGoModelDesc, t: dict[str, np.ndarray], p: str, b: Any) -> None:
    if isinstance(b, BlockDesc):
        _affine(t, f"{p}.pre", b.pre_bn)
        t[f"{p}.conv1.weight"] = _conv_weight(desc, b.conv1, 3)
        if b.kind == "gpool":
            assert b.gpool_conv is not None and b.gpool_bn is not None and b.gpool_mul is not None
            t[f"{p}.gconv.weight"] = _conv_weight(desc, b.gpool_conv, 3)
            _affine(t, f"{p}.gbn", b.gpool_bn)
            t[f"{p}.gmul.weight"] = np.ascontiguousarray(b.gpool_mul.weight.T)
        _affine(t, f"{p}.mid", b.mid_bn)
        t[f"{p}.conv2.weight"] = _conv_weight(desc, b.conv2, 3)
    elif isinstance(b, NestedDesc):
        _affine(t, f"{p}.pre", b.pre_bn)
        t[f"{p}.conv_in.weight"] = _conv_weight(desc, b.pre_conv, None)
        for j, inner in enumerate(b.blocks):
            _block_tensors(desc, t, f"{p}.blocks.{j}", inner)
        _affine(t, f"{p}.post", b.post_bn)
        t[f"{p}.conv_out.weight"] = _conv_weight(desc, b.post_conv, None)
    elif isinstance(b, AttentionDesc):
        t[f"{p}.norm.scale"] = b.norm.weight
        for name in ("q", "k", "v", "out"):
            t[f"{p}.{name}.weight"] = _point_weight(getattr(b, name))
        if b.rope_freqs is not None:
            t[f"{p}.rope_freqs"] = b.rope_freqs
    else:
        assert isinstance(b, FFNDesc)
        t[f"{p}.norm.scale"] = b.norm.weight
        t[f"{p}.w1.weight"] = _point_weight(b.w1)
        if b.gate is not None:
            t[f"{p}.gate.weight"] = _point_weight(b.gate)
        t[f"{p}.w2.weight"] = _point_weight(b.w2)


def katago_tensors(desc: KataGoModelDesc, policy_optimism: float = POLICY_OPTIMISM
                   ) -> dict[str, np.ndarray]:
    """The tensors of a parsed model, named as ``kosumi.nets.katago_net.KataGoNet`` names them
    (float32, PyTorch layouts; each batch norm as its exact per-channel ``scale``/``bias``; the
    policy's channels mixed by ``policy_optimism`` into one)."""
    t: dict[str, np.ndarray] = {}
    k0 = desc.initial_conv.ky
    t["conv1.weight"] = _conv_weight(desc, desc.initial_conv, k0)
    t["global_in.weight"] = np.ascontiguousarray(desc.initial_matmul.weight.T)
    for i, b in enumerate(desc.blocks):
        _block_tensors(desc, t, f"blocks.{i}", b)
    tip = desc.trunk_tip_bn
    if isinstance(tip, RMSNormDesc):
        t["tip.scale"], t["tip.bias"] = tip.gamma, tip.beta
    else:
        _affine(t, "tip", tip)
    opt = policy_optimism
    t["p1.weight"] = _conv_weight(desc, desc.p1_conv, 1)
    t["g1.weight"] = _conv_weight(desc, desc.g1_conv, 1)
    _affine(t, "g1_bn", desc.g1_bn)
    t["g1_bias.weight"] = np.ascontiguousarray(desc.g1_to_bias.weight.T)
    _affine(t, "p1_bn", desc.p1_bn)
    t["p2.weight"] = _mixed(_conv_weight(desc, desc.p2_conv, 1), opt)
    if desc.pass_mul2 is not None and desc.pass_bias is not None:
        t["g1_pass.weight"] = np.ascontiguousarray(desc.g1_to_pass.weight.T)
        t["g1_pass.bias"] = desc.pass_bias.bias
        t["pass2.weight"] = _mixed(np.ascontiguousarray(desc.pass_mul2.weight.T), opt)
    else:
        t["g1_pass.weight"] = _mixed(np.ascontiguousarray(desc.g1_to_pass.weight.T), opt)
    t["v1.weight"] = _conv_weight(desc, desc.v1_conv, 1)
    _affine(t, "v1_bn", desc.v1_bn)
    for name, mm, bias in (("v2", desc.v2_mul, desc.v2_bias), ("v3", desc.v3_mul, desc.v3_bias),
                           ("sv3", desc.sv3_mul, desc.sv3_bias)):
        t[f"{name}.weight"] = np.ascontiguousarray(mm.weight.T)
        t[f"{name}.bias"] = bias.bias
    t["own.weight"] = _conv_weight(desc, desc.ownership_conv, 1)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in t.items()}


def katago_checkpoint(desc: KataGoModelDesc, policy_optimism: float = POLICY_OPTIMISM
                      ) -> Checkpoint:
    """A parsed KataGo model as a kosumi net in memory: (config, tensors)."""
    return Checkpoint(config=katago_config(desc, policy_optimism),
                      tensors=katago_tensors(desc, policy_optimism),
                      metadata={"source": os.path.basename(desc.path)})


def read_katago_model(path: str | os.PathLike[str]) -> Checkpoint:
    """Read a KataGo model file as (config, tensors). Raises KosumiError on a bad file."""
    return katago_checkpoint(read_katago(path))
