"""KataGo model files (``.bin.gz``, ``.txt.gz``, ``.bin``, ``.txt``): reader, sniffer, description.

The format (facts from KataGo's public sources; this is an independent implementation): a stream
of whitespace-separated ASCII tokens, optionally gzipped. Every float block is either ``@BIN@``
directly followed by N little-endian float32 values (``.bin``) or N ASCII floats (``.txt``);
the count N always follows from the shapes read just before. Both float styles are recognised
from the content, as is gzip, so the file name does not matter.

Supported: model version 8 (KataGo's g170 nets, input features V7: 22 spatial + 19 global).
Layout of a version-8 file::

    name version numInputChannels numInputGlobalChannels
    trunk numBlocks trunkC midC regularC dilatedC gpoolC
      conv (initial, e.g. 5x5 22->trunkC), matmul (globals -> trunkC)
      numBlocks x (ordinary_block | gpool_block) name + layers
      BN (trunk tip), activation
    policy head: name, conv p1, conv g1, BN g1, act, matmul gpool->bias, BN p1, act, conv p2,
                 matmul gpool->pass
    value head:  name, conv v1, BN v1, act, matmul v2, bias v2, act, matmul v3, bias v3 (3),
                 matmul sv3, bias sv3 (4), conv ownership

Layer records: conv ``name ky kx ic oc dilY dilX`` + floats [y][x][ic][oc]; BN ``name C eps
hasScale hasBias`` + mean, var, [scale], [bias]; matmul ``name ic oc`` + floats [ic][oc]; matbias
``name C`` + floats; activation: a name only (always ReLU before version 11).

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
    INPUT_FEATURES,
    SUPPORTED_VERSIONS,
    BlockDesc,
    BNDesc,
    ConvDesc,
    KataGoModelDesc,
    MatBiasDesc,
    MatMulDesc,
)

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
    name = s.name("", "the name of an activation layer")
    if version >= 11:  # pragma: no cover - only version 8 is accepted today
        s.name(name, "the activation kind")
    return name


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


def _read_block(s: _Stream, version: int, trunk_c: int, widths: dict[str, int]) -> BlockDesc:
    kind_tok = s.name("", "a residual block kind")
    if kind_tok not in ("ordinary_block", "gpool_block"):
        raise s.fail("", f"unknown block kind {kind_tok!r} (version {version} nets have "
                         "ordinary_block and gpool_block)")
    name = s.name("", "a residual block name")
    pre_bn = _read_bn(s, trunk_c, f"block {name} pre-activation batch norm")
    _read_act(s, version)
    if kind_tok == "ordinary_block":
        # KataGo: an ordinary block's regular conv outputs midNumChannels
        conv1 = _read_conv(s, trunk_c, widths["mid"], f"block {name} first conv")
        mid_bn = _read_bn(s, conv1.oc, f"block {name} middle batch norm")
        _read_act(s, version)
        conv2 = _read_conv(s, conv1.oc, trunk_c, f"block {name} second conv")
        return BlockDesc("ordinary", name, pre_bn, conv1, mid_bn, conv2)
    # a gpool block's regular conv outputs regularNumChannels, its gpool conv gpoolNumChannels
    conv1 = _read_conv(s, trunk_c, widths["regular"], f"block {name} regular conv")
    gconv = _read_conv(s, trunk_c, widths["gpool"], f"block {name} gpool conv")
    gbn = _read_bn(s, gconv.oc, f"block {name} gpool batch norm")
    _read_act(s, version)
    gmul = _read_matmul(s, 3 * gconv.oc, conv1.oc, f"block {name} gpool-to-bias matmul")
    mid_bn = _read_bn(s, conv1.oc, f"block {name} middle batch norm")
    _read_act(s, version)
    conv2 = _read_conv(s, conv1.oc, trunk_c, f"block {name} final conv")
    return BlockDesc("gpool", name, pre_bn, conv1, mid_bn, conv2, gconv, gbn, gmul)


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


def parse_katago(data: bytes, path: str = "<memory>", gzipped: bool = False) -> KataGoModelDesc:
    """Parse a decompressed KataGo model (see the module docstring). Raises KosumiError."""
    s = _Stream(data, str(path))
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

    trunk_name = s.name("trunk", "the trunk name")
    num_blocks = s.int(trunk_name, "numBlocks", 1, MAX_BLOCKS)
    trunk_c = s.int(trunk_name, "trunk channels", 1, MAX_CHANNELS)
    mid_c = s.int(trunk_name, "mid channels", 1, MAX_CHANNELS)
    regular_c = s.int(trunk_name, "regular channels", 1, MAX_CHANNELS)
    dilated_c = s.int(trunk_name, "dilated channels", 1, MAX_CHANNELS)
    gpool_c = s.int(trunk_name, "gpool channels", 1, MAX_CHANNELS)
    if mid_c != regular_c + dilated_c:  # KataGo refuses such a trunk, and so do we
        raise s.fail(trunk_name, f"midNumChannels ({mid_c}) != regularNumChannels ({regular_c}) "
                                 f"+ dilatedNumChannels ({dilated_c})")
    widths = {"mid": mid_c, "regular": regular_c, "gpool": gpool_c}
    init_conv = _read_conv(s, n_in, trunk_c, "initial conv")
    init_mm = _read_matmul(s, n_glob, trunk_c, "initial global matmul")
    blocks = [_read_block(s, version, trunk_c, widths) for _ in range(num_blocks)]
    tip_bn = _read_bn(s, trunk_c, "trunk tip batch norm")
    _read_act(s, version)

    # policy head
    s.name("policy head", "the policy head name")
    p1 = _read_conv(s, trunk_c, None, "policy p1 conv")
    g1 = _read_conv(s, trunk_c, None, "policy g1 conv")
    g1_bn = _read_bn(s, g1.oc, "policy g1 batch norm")
    _read_act(s, version)
    g1_bias = _read_matmul(s, 3 * g1.oc, p1.oc, "policy gpool-to-bias matmul")
    p1_bn = _read_bn(s, p1.oc, "policy p1 batch norm")
    _read_act(s, version)
    p2 = _read_conv(s, p1.oc, 1, "policy p2 conv")
    g1_pass = _read_matmul(s, 3 * g1.oc, 1, "policy gpool-to-pass matmul")

    # value head
    s.name("value head", "the value head name")
    v1 = _read_conv(s, trunk_c, None, "value v1 conv")
    v1_bn = _read_bn(s, v1.oc, "value v1 batch norm")
    _read_act(s, version)
    v2 = _read_matmul(s, 3 * v1.oc, None, "value v2 matmul")
    v2b = _read_matbias(s, v2.oc, "value v2 bias")
    _read_act(s, version)
    v3 = _read_matmul(s, v2.oc, 3, "value v3 matmul")
    v3b = _read_matbias(s, 3, "value v3 bias")
    sv3 = _read_matmul(s, v2.oc, 4, "score sv3 matmul")
    sv3b = _read_matbias(s, 4, "score sv3 bias")
    own = _read_conv(s, v1.oc, 1, "ownership conv")

    rest = data[s.pos :].strip()
    if rest:
        raise s.fail("end", f"{len(rest)} unexpected bytes after the value head")
    return KataGoModelDesc(
        path=str(path), name=name, version=version, binary=bool(s.binary), gzipped=gzipped,
        num_input_channels=n_in, num_input_globals=n_glob, trunk_channels=trunk_c,
        mid_channels=mid_c, regular_channels=regular_c, dilated_channels=dilated_c,
        gpool_channels=gpool_c, initial_conv=init_conv, initial_matmul=init_mm, blocks=blocks,
        trunk_tip_bn=tip_bn, p1_conv=p1, g1_conv=g1, g1_bn=g1_bn, g1_to_bias=g1_bias,
        p1_bn=p1_bn, p2_conv=p2, g1_to_pass=g1_pass, v1_conv=v1, v1_bn=v1_bn, v2_mul=v2,
        v2_bias=v2b, v3_mul=v3, v3_bias=v3b, sv3_mul=sv3, sv3_bias=sv3b, ownership_conv=own,
    )


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
    kinds = [b.kind for b in desc.blocks]
    fmt = "KataGo " + ("binary" if desc.binary else "text") + (" (gzip)" if desc.gzipped else "")
    return {
        "format": fmt,
        "name": desc.name,
        "version": desc.version,
        "arch": desc.arch(),
        "blocks": len(desc.blocks),
        "block_kinds": {"ordinary": kinds.count("ordinary"), "gpool": kinds.count("gpool")},
        "channels": {
            "trunk": desc.trunk_channels, "mid": desc.mid_channels,
            "regular": desc.regular_channels, "gpool": desc.gpool_channels,
            "policy": desc.p1_conv.oc, "policy_gpool": desc.g1_conv.oc,
            "value": desc.v1_conv.oc, "value_hidden": desc.v2_mul.oc,
        },
        "parameters": desc.num_parameters,
        "input_features": {"name": desc.features, "spatial": desc.num_input_channels,
                           "global": desc.num_input_globals},
        "heads": {
            "policy": "N*N points + pass (logits; illegal points masked before the softmax)",
            "value": "win / loss / noResult (softmax)",
            "score": "score mean, score stdev, lead, variance of time left (x20, softplus x20, "
                     "x20, softplus x40)",
            "ownership": "per point, tanh; +1 = the side to move owns it",
        },
        "board_sizes": list(range(2, 20)),
    }


# ================================================================================ as a kosumi net
def katago_config(desc: KataGoModelDesc) -> NetConfig:
    """The ``NetConfig`` (head ``katago``) of a parsed model: its layout and outputs."""
    return NetConfig(
        arch=desc.arch(), features=desc.features, head="katago",
        board_sizes=list(range(MIN_SIZE, MAX_SIZE + 1)), value="wdl",
        score_lead=True, ownership=True, policy_channels=desc.p1_conv.oc,
        value_channels=desc.v1_conv.oc, value_hidden=desc.v2_mul.oc,
        katago={
            "model_version": desc.version, "name": desc.name,
            "mid_channels": desc.mid_channels, "regular_channels": desc.regular_channels,
            "dilated_channels": desc.dilated_channels, "gpool_channels": desc.gpool_channels,
            "policy_gpool_channels": desc.g1_conv.oc, "initial_kernel": desc.initial_conv.ky,
            "blocks": [b.kind for b in desc.blocks],
        },
        provenance={"source": "KataGo model", "katago_name": desc.name},
    )


def _affine(out: dict[str, np.ndarray], name: str, bn: BNDesc) -> None:
    scale, bias = bn.merged()
    out[f"{name}.scale"] = scale
    out[f"{name}.bias"] = bias


def _conv_weight(desc: KataGoModelDesc, conv: ConvDesc, k: int) -> np.ndarray:
    if (conv.ky, conv.kx) != (k, k) or (conv.dil_y, conv.dil_x) != (1, 1):
        raise KosumiError(f"{desc.path}: KataGo layer {conv.name}: a {conv.ky}x{conv.kx} "
                          f"convolution with dilation {conv.dil_y}x{conv.dil_x}; kosumi runs "
                          f"{k}x{k} undilated convolutions there")
    return conv.weight


def katago_tensors(desc: KataGoModelDesc) -> dict[str, np.ndarray]:
    """The tensors of a parsed model, named as ``kosumi.nets.katago_net.KataGoNet`` names them
    (float32, PyTorch layouts; each batch norm as its exact per-channel ``scale``/``bias``)."""
    t: dict[str, np.ndarray] = {}
    k0 = desc.initial_conv.ky
    t["conv1.weight"] = _conv_weight(desc, desc.initial_conv, k0)
    t["global_in.weight"] = np.ascontiguousarray(desc.initial_matmul.weight.T)
    for i, b in enumerate(desc.blocks):
        p = f"blocks.{i}"
        _affine(t, f"{p}.pre", b.pre_bn)
        t[f"{p}.conv1.weight"] = _conv_weight(desc, b.conv1, 3)
        if b.kind == "gpool":
            assert b.gpool_conv is not None and b.gpool_bn is not None and b.gpool_mul is not None
            t[f"{p}.gconv.weight"] = _conv_weight(desc, b.gpool_conv, 3)
            _affine(t, f"{p}.gbn", b.gpool_bn)
            t[f"{p}.gmul.weight"] = np.ascontiguousarray(b.gpool_mul.weight.T)
        _affine(t, f"{p}.mid", b.mid_bn)
        t[f"{p}.conv2.weight"] = _conv_weight(desc, b.conv2, 3)
    _affine(t, "tip", desc.trunk_tip_bn)
    t["p1.weight"] = _conv_weight(desc, desc.p1_conv, 1)
    t["g1.weight"] = _conv_weight(desc, desc.g1_conv, 1)
    _affine(t, "g1_bn", desc.g1_bn)
    t["g1_bias.weight"] = np.ascontiguousarray(desc.g1_to_bias.weight.T)
    _affine(t, "p1_bn", desc.p1_bn)
    t["p2.weight"] = _conv_weight(desc, desc.p2_conv, 1)
    t["g1_pass.weight"] = np.ascontiguousarray(desc.g1_to_pass.weight.T)
    t["v1.weight"] = _conv_weight(desc, desc.v1_conv, 1)
    _affine(t, "v1_bn", desc.v1_bn)
    for name, mm, bias in (("v2", desc.v2_mul, desc.v2_bias), ("v3", desc.v3_mul, desc.v3_bias),
                           ("sv3", desc.sv3_mul, desc.sv3_bias)):
        t[f"{name}.weight"] = np.ascontiguousarray(mm.weight.T)
        t[f"{name}.bias"] = bias.bias
    t["own.weight"] = _conv_weight(desc, desc.ownership_conv, 1)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in t.items()}


def katago_checkpoint(desc: KataGoModelDesc) -> Checkpoint:
    """A parsed KataGo model as a kosumi net in memory: (config, tensors)."""
    return Checkpoint(config=katago_config(desc), tensors=katago_tensors(desc),
                      metadata={"source": os.path.basename(desc.path)})


def read_katago_model(path: str | os.PathLike[str]) -> Checkpoint:
    """Read a KataGo model file as (config, tensors). Raises KosumiError on a bad file."""
    return katago_checkpoint(read_katago(path))
