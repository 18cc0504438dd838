"""Leela Zero weights (text format, versions 1 and 2, plain or gzip): reader and writer.

The format (see FORMATS.md in the shared docs; checked against the Debian ``leelaz`` 0.17
binary): line 1 is the version, ``1`` (value from the side to move's view) or ``2`` (value from
Black's view, as in ELF OpenGo). Then one tensor per line, space-separated ASCII floats:

    input conv group     weights [C][18][3][3], biases [C], bn means [C], bn variances [C]
    residual block x B   two such groups, 3x3 C -> C (8 lines)
    policy head          conv group 1x1 C -> 2 (4 lines), fc weights [362][722], fc biases [362]
    value head           conv group 1x1 C -> 1 (4 lines), fc1 [256][361], fc1 biases [256],
                         fc2 [256], fc2 bias [1]

so a file has ``19 + 8*B`` lines; leelaz takes B = (lines - 19) / 8 and C = the number of values
on file line 3. A gzip file is recognised by its content, as leelaz does.

Leela Zero checks almost nothing else (only the policy fc size): a wrong count on any other line,
a negative variance or a trailing empty line loads silently or is misread. This module checks
everything, on reading and on writing: every line's count, finite values, positive variances, no
empty line. Every problem raises ``KosumiError`` with ONE line naming the file and the line (and
the layer on it).

``LeelaZeroWeights`` keeps the file's tensors exactly as stored (``layers``, float32, one per
line), so reading and writing again gives the same numbers. Its mapping onto a kosumi ``lz``-head
``KosumiNet`` (``state_dict`` / ``from_state_dict``) is the one documented in
``kosumi.nets.resnet``:

    conv weights                <-> ``<conv>.weight`` (times BN gamma when writing)
    conv "biases" b             <-> ``<bn>.bias`` = b / sqrt(var + 1e-5), ``<bn>.weight`` = 1
    bn means / variances        <-> ``<bn>.running_mean`` (times gamma) / ``running_var``
    fc layers                   <-> ``policy_fc``, ``value_fc1``, ``value_fc2`` (same order)

A version-2 file's value is Black's: the tensors are the same, and the config says so
(``value_view`` "black"), so that whoever runs the net turns the value to the side to move's
(``runtime.NetEvaluator``, for every backend) and a writer keeps version 2.

Public API (numpy only, no torch):

``read_leelaz(path) -> LeelaZeroWeights``          read and validate (plain or gzip)
``parse_leelaz(data, source) -> LeelaZeroWeights`` the same from bytes
``write_leelaz(path, weights) -> int``              validate, then write atomically (gzip when
                                                    the name ends in ``.gz``)
``leelaz_bytes(weights, gzipped) -> bytes``         the file's bytes
``LeelaZeroWeights.from_state_dict(tensors, config)``  an ``lz``-head kosumi net -> weights
``LeelaZeroWeights.to_checkpoint()``                 weights -> a kosumi ``Checkpoint``
``read_leelaz_model(path) -> Checkpoint``            a file as (config, tensors)
``write_leelaz_model(checkpoint, out) -> str``       an lz-head net -> a file (export)
``sniff_leelaz(head) / is_leelaz_file(path)``        cheap content check (for format detection)
``describe_leelaz(path) -> dict``                    what ``kosumi inspect`` shows
``LEELAZ_TO_KOSUMI_SYMMETRY``                        leelaz's symmetry n as a kosumi symmetry
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.config import LZ_BOARD_SIZE, MAX_BLOCKS, MAX_CHANNELS, NetConfig
from kosumi.nets.gzipped import GZIP_MAGIC, gunzip

VERSIONS = (1, 2)
INPUT_PLANES = 18
POINTS = LZ_BOARD_SIZE * LZ_BOARD_SIZE  # 361
POLICY_CHANNELS, VALUE_CHANNELS, VALUE_HIDDEN = 2, 1, 256
BN_EPS = 1e-5  # Leela Zero adds it to the variances itself
HEAD_LINES = 14
#: lines of a net with no residual block: version + input conv group (4) + heads (14)
BASE_LINES = 1 + 4 + HEAD_LINES
MAX_TEXT_BYTES = 2 << 30  # b40c256 is ~0.6 GB of text; refuse to decompress beyond this
SNIFF_TEXT_BYTES = 4096
FLOAT_FORMAT = "%.9g"  # 9 significant digits: every float32 reads back exactly
#: bytes that may appear on a tensor line (digits, sign, point, exponent, spaces)
_NUMBER_BYTES = b"0123456789+-.eE \t\r\x0b\x0c"
#: ``LEELAZ_TO_KOSUMI_SYMMETRY[n]`` is the kosumi symmetry (``kosumi.go.coords``) that shows a
#: net the board as Leela Zero's symmetry n does (its ``heatmap n``); checked against leelaz
LEELAZ_TO_KOSUMI_SYMMETRY = (0, 2, 1, 3, 7, 6, 5, 4)
_FLOAT_RE = re.compile(rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SNIFF_RE = re.compile(rb"\A[ \t]*\d{1,8}[ \t]*\r?\n[ \t]*[-+.0-9]")


# ---------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class LayerSpec:
    """One line of the file: a human name (for messages) and the tensor's shape."""

    name: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class ConvGroup:
    """A conv + batchnorm group: 4 consecutive lines starting at layer index ``first``, and the
    kosumi module names they map onto."""

    conv: str
    bn: str
    first: int


def _group_specs(label: str, cin: int, cout: int, k: int) -> list[LayerSpec]:
    return [LayerSpec(f"{label} weights", (cout, cin, k, k)), LayerSpec(f"{label} biases", (cout,)),
            LayerSpec(f"{label} bn means", (cout,)), LayerSpec(f"{label} bn variances", (cout,))]


def layer_specs(blocks: int, channels: int) -> list[LayerSpec]:
    """The tensors of a ``b<blocks>c<channels>`` net, in file order (file line = index + 2)."""
    c = channels
    specs = _group_specs("input conv", INPUT_PLANES, c, 3)
    for b in range(1, blocks + 1):
        specs += _group_specs(f"residual block {b} conv 1", c, c, 3)
        specs += _group_specs(f"residual block {b} conv 2", c, c, 3)
    specs += _group_specs("policy conv", c, POLICY_CHANNELS, 1)
    specs += [LayerSpec("policy fc weights", (POINTS + 1, POLICY_CHANNELS * POINTS)),
              LayerSpec("policy fc biases", (POINTS + 1,))]
    specs += _group_specs("value conv", c, VALUE_CHANNELS, 1)
    specs += [LayerSpec("value fc1 weights", (VALUE_HIDDEN, VALUE_CHANNELS * POINTS)),
              LayerSpec("value fc1 biases", (VALUE_HIDDEN,)),
              LayerSpec("value fc2 weights", (1, VALUE_HIDDEN)),
              LayerSpec("value fc2 bias", (1,))]
    return specs


def conv_groups(blocks: int) -> list[ConvGroup]:
    """Every conv + BN group in file order, with the index of its first layer."""
    groups = [ConvGroup("input_conv", "input_bn", 0)]
    for b in range(blocks):
        groups.append(ConvGroup(f"blocks.{b}.conv1", f"blocks.{b}.bn1", 4 + 8 * b))
        groups.append(ConvGroup(f"blocks.{b}.conv2", f"blocks.{b}.bn2", 8 + 8 * b))
    head = 4 + 8 * blocks
    groups.append(ConvGroup("policy_conv", "policy_bn", head))
    groups.append(ConvGroup("value_conv", "value_bn", head + 6))
    return groups


def _fc_layers(blocks: int) -> dict[int, str]:
    """Layer index -> kosumi tensor name for the fully connected layers."""
    head = 4 + 8 * blocks
    return {head + 4: "policy_fc.weight", head + 5: "policy_fc.bias",
            head + 10: "value_fc1.weight", head + 11: "value_fc1.bias",
            head + 12: "value_fc2.weight", head + 13: "value_fc2.bias"}


def lz_config(blocks: int, channels: int, provenance: dict[str, Any] | None = None,
              version: int = 1) -> NetConfig:
    """The kosumi ``NetConfig`` of a Leela Zero net of this size (``version`` 2: the value is
    Black's, ``value_view`` "black")."""
    return NetConfig(arch=f"b{blocks}c{channels}", features="lz18", head="lz",
                     board_sizes=[LZ_BOARD_SIZE], value="tanh", score_lead=False,
                     ownership=False, provenance=dict(provenance or {}),
                     value_view="black" if version == 2 else "side_to_move")


def _is_variance(spec: LayerSpec) -> bool:
    return spec.name.endswith("bn variances")


# ---------------------------------------------------------------------------- the weights
@dataclass
class LeelaZeroWeights:
    """A Leela Zero net as stored: ``version`` (1: value from the side to move's view, 2: from
    Black's), size, and one float32 tensor per file line (shapes from ``layer_specs``)."""

    version: int
    blocks: int
    channels: int
    layers: list[np.ndarray]
    source: str = "<memory>"
    gzipped: bool = False

    @property
    def specs(self) -> list[LayerSpec]:
        return layer_specs(self.blocks, self.channels)

    @property
    def arch(self) -> str:
        return f"b{self.blocks}c{self.channels}"

    @property
    def value_perspective(self) -> str:
        """Whose winrate the value head predicts: "side to move" (v1) or "Black" (v2)."""
        return "side to move" if self.version == 1 else "Black"

    @property
    def config(self) -> NetConfig:
        """The kosumi config of the equivalent ``lz``-head net."""
        return lz_config(self.blocks, self.channels,
                         {"converted_from": "leela-zero", "leelaz_version": self.version},
                         version=self.version)

    @property
    def num_parameters(self) -> int:
        """Learned values (everything but the BN means and variances), as Leela Zero counts."""
        return sum(int(t.size) for t, s in zip(self.layers, self.specs, strict=True)
                   if not s.name.endswith(("bn means", "bn variances")))

    # ------------------------------------------------------------------ validation
    def validate(self, name: str | None = None) -> None:
        """Everything leelaz does not check: version, sizes, every shape, finite values,
        positive variances. Raises KosumiError naming ``name`` (default: ``source``) and the
        layer's file line."""
        src = self.source if name is None else name
        if self.version not in VERSIONS:
            raise KosumiError(f"{src}: version {self.version!r} is not a Leela Zero text "
                              "version (1 or 2)")
        if not 0 <= self.blocks <= MAX_BLOCKS or not 1 <= self.channels <= MAX_CHANNELS:
            raise KosumiError(f"{src}: b{self.blocks}c{self.channels} is out of range "
                              f"(0..{MAX_BLOCKS} blocks, 1..{MAX_CHANNELS} channels)")
        specs = self.specs
        if len(self.layers) != len(specs):
            raise KosumiError(f"{src}: {len(self.layers)} tensors, a b{self.blocks}c"
                              f"{self.channels} net has {len(specs)}")
        for i, (t, spec) in enumerate(zip(self.layers, specs, strict=True)):
            where = f"{src}: line {i + 2} ({spec.name})"
            if tuple(np.shape(t)) != spec.shape:
                raise KosumiError(f"{where}: shape {list(np.shape(t))}, expected "
                                  f"{list(spec.shape)}")
            _check_values(np.asarray(t), spec, where)

    # ------------------------------------------------------------------ kosumi mapping
    def state_dict(self) -> dict[str, np.ndarray]:
        """The tensors of the equivalent kosumi ``lz``-head net (float32, state-dict names,
        without ``num_batches_tracked``). The value is the file's (Black's for version 2)."""
        out: dict[str, np.ndarray] = {}
        layers = self.layers
        for g in conv_groups(self.blocks):
            w, b, mean, var = layers[g.first : g.first + 4]
            out[f"{g.conv}.weight"] = _f32(w)
            out[f"{g.bn}.weight"] = np.ones_like(b, dtype=np.float32)
            out[f"{g.bn}.bias"] = _f32(b.astype(np.float64) / np.sqrt(var.astype(np.float64)
                                                                       + BN_EPS))
            out[f"{g.bn}.running_mean"] = _f32(mean)
            out[f"{g.bn}.running_var"] = _f32(var)
        for i, name in _fc_layers(self.blocks).items():
            out[name] = _f32(layers[i])
        return out

    def to_checkpoint(self) -> Any:
        """A kosumi ``Checkpoint`` (config + tensors) of this net (a version-2 net's config has
        ``value_view`` "black")."""
        from kosumi.nets.checkpoint import Checkpoint

        return Checkpoint(config=self.config, tensors=self.state_dict(),
                          metadata={"source": os.path.basename(self.source)})

    @classmethod
    def from_state_dict(cls, tensors: dict[str, Any], config: NetConfig, version: int = 1,
                        source: str = "net") -> LeelaZeroWeights:
        """The Leela Zero tensors of a kosumi ``lz``-head net (numpy arrays or torch tensors).

        BatchNorm's gamma g is folded exactly: weights*g, means*g, biases = beta*sqrt(var+eps).
        A net Leela Zero cannot represent (another head, other features or sizes) is refused
        with a KosumiError naming ``source`` and why; so is a missing or misshapen tensor.
        """
        _check_convertible(config, source)
        blocks, channels = config.blocks, config.channels
        arrays = {k: _as_numpy(v) for k, v in tensors.items()}
        specs = layer_specs(blocks, channels)
        layers: list[np.ndarray | None] = [None] * len(specs)

        def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
            if name not in arrays:
                raise KosumiError(f"{source}: tensor {name!r} is missing")
            t = arrays[name]
            if tuple(t.shape) != tuple(shape):
                raise KosumiError(f"{source}: tensor {name!r} has shape {list(t.shape)}, "
                                  f"expected {list(shape)}")
            if not np.isfinite(t).all():
                raise KosumiError(f"{source}: tensor {name!r} holds NaN or inf")
            return t.astype(np.float64)

        for g in conv_groups(blocks):
            w_spec, b_spec = specs[g.first], specs[g.first + 1]
            w = get(f"{g.conv}.weight", w_spec.shape)
            c = b_spec.shape
            gamma, beta = get(f"{g.bn}.weight", c), get(f"{g.bn}.bias", c)
            mean, var = get(f"{g.bn}.running_mean", c), get(f"{g.bn}.running_var", c)
            if (var <= 0).any():
                raise KosumiError(f"{source}: tensor '{g.bn}.running_var' has a non-positive "
                                  "variance")
            layers[g.first] = _f32(w * gamma[:, None, None, None])
            layers[g.first + 1] = _f32(beta * np.sqrt(var + BN_EPS))
            layers[g.first + 2] = _f32(mean * gamma)
            layers[g.first + 3] = _f32(var)
        for i, name in _fc_layers(blocks).items():
            layers[i] = _f32(get(name, specs[i].shape))
        weights = cls(version=int(version), blocks=blocks, channels=channels,
                      layers=layers, source=str(source))  # type: ignore[arg-type]
        weights.validate()
        return weights


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _as_numpy(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().cpu().numpy()
    return np.asarray(t)


def _check_convertible(config: NetConfig, source: str) -> None:
    """Refuse, naming why, a net whose architecture Leela Zero's format cannot hold."""
    why = None
    if config.head != "lz":
        why = (f"it has a {config.head!r} head, and Leela Zero's format holds only its own "
               "fixed heads (kosumi's 'lz' head: make one with `kosumi init --head lz "
               "--features lz18`)")
    elif config.features != "lz18":
        why = (f"its input features are {config.features!r}; Leela Zero reads exactly its 18 "
               "planes ('lz18')")
    elif config.board_sizes != [LZ_BOARD_SIZE] or config.value != "tanh":
        why = "Leela Zero nets are 19x19 with a tanh value"
    if why:
        raise KosumiError(f"{source}: cannot be written as Leela Zero weights: {why}")


def _check_values(t: np.ndarray, spec: LayerSpec, where: str) -> None:
    if not np.isfinite(t).all():
        bad = np.flatnonzero(~np.isfinite(t.reshape(-1)))[0]
        raise KosumiError(f"{where}: value {bad + 1} is {t.reshape(-1)[bad]} (not finite)")
    if _is_variance(spec) and (t <= 0).any():
        bad = np.flatnonzero(t.reshape(-1) <= 0)[0]
        raise KosumiError(f"{where}: variance {bad + 1} is {t.reshape(-1)[bad]:g} (must be > 0)")


# ---------------------------------------------------------------------------- reading


def _bad_token(line: bytes) -> bytes:
    """The first token of ``line`` that is not a plain decimal number."""
    for tok in line.split():
        if not _FLOAT_RE.fullmatch(tok):
            return tok
    return b""


def _parse_line(line: bytes, spec: LayerSpec, where: str) -> np.ndarray:
    tokens = line.split()
    if len(tokens) != spec.size:
        raise KosumiError(f"{where}: {len(tokens)} values, expected {spec.size} "
                          f"(shape {list(spec.shape)})")
    bad = b"" if not line.translate(None, _NUMBER_BYTES) else _bad_token(line)
    values = None
    if not bad:
        try:
            values = np.array(tokens, dtype=np.float32)
        except (ValueError, OverflowError):
            bad = _bad_token(line)
    if values is None:
        shown = bad[:24].decode("ascii", "replace") if bad else "?"
        raise KosumiError(f"{where}: {shown!r} is not a number")
    values = values.reshape(spec.shape)
    _check_values(values, spec, where)
    return values


def _split_lines(text: bytes) -> list[bytes]:
    """Lines as ``std::getline`` sees them: a final newline ends the last line."""
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def parse_leelaz(data: bytes, source: str = "<memory>") -> LeelaZeroWeights:
    """Parse and validate the bytes of a Leela Zero weights file (plain or gzip)."""
    gzipped = data[:2] == GZIP_MAGIC
    text = gunzip(data, MAX_TEXT_BYTES, source, "Leela Zero net") if gzipped else data
    lines = _split_lines(text)
    if not lines:
        raise KosumiError(f"{source}: empty file, not a Leela Zero net")
    first = lines[0].strip()
    if first not in (b"1", b"2"):
        shown = first[:24].decode("ascii", "replace")
        raise KosumiError(f"{source}: line 1: version {shown!r} is not a Leela Zero text "
                          "version (1 or 2)")
    version = int(first)
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            trailing = all(not rest.strip() for rest in lines[i - 1 :])
            raise KosumiError(f"{source}: line {i} is empty" + (
                " (a trailing empty line: leelaz would miscount the layers)" if trailing else ""))
    n = len(lines)
    if n < BASE_LINES or (n - BASE_LINES) % 8:
        raise KosumiError(f"{source}: {n} lines (line {n} is the last) do not make a Leela Zero "
                          f"net: it has {BASE_LINES} + 8 per residual block")
    blocks = (n - BASE_LINES) // 8
    channels = len(lines[2].split())
    if not 1 <= channels <= MAX_CHANNELS or blocks > MAX_BLOCKS:
        raise KosumiError(f"{source}: line 3 (input conv biases): b{blocks}c{channels} is out "
                          f"of range (at most {MAX_BLOCKS} blocks, 1..{MAX_CHANNELS} channels)")
    specs = layer_specs(blocks, channels)
    layers = [_parse_line(line, spec, f"{source}: line {i} ({spec.name})")
              for i, (line, spec) in enumerate(zip(lines[1:], specs, strict=True), start=2)]
    return LeelaZeroWeights(version=version, blocks=blocks, channels=channels, layers=layers,
                            source=source, gzipped=gzipped)


def read_leelaz(path: str | os.PathLike[str]) -> LeelaZeroWeights:
    """Read and validate a Leela Zero weights file. Raises KosumiError (one line)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    return parse_leelaz(data, str(path))


# ---------------------------------------------------------------------------- writing
def _format_tensor(t: np.ndarray) -> bytes:
    fmt = FLOAT_FORMAT
    return " ".join([fmt % v for v in t.reshape(-1).tolist()]).encode("ascii")


def leelaz_bytes(weights: LeelaZeroWeights, gzipped: bool = False,
                 name: str | None = None) -> bytes:
    """The file's bytes (validated first; errors name ``name``, default the weights' source):
    the version line, one line per tensor, each ended by a newline, no empty line; gzip
    (deterministic: no timestamp) if ``gzipped``."""
    weights.validate(name)
    lines = [str(weights.version).encode("ascii")]
    lines += [_format_tensor(np.asarray(t, dtype=np.float32)) for t in weights.layers]
    text = b"\n".join(lines) + b"\n"
    return gzip.compress(text, compresslevel=6, mtime=0) if gzipped else text


def write_leelaz(path: str | os.PathLike[str], weights: LeelaZeroWeights,
                 gzipped: bool | None = None) -> int:
    """Validate and write ``weights`` atomically; gzip when ``gzipped`` (default: the name ends
    in ``.gz``). Returns the number of bytes written."""
    from kosumi.fileio import atomic_write

    if gzipped is None:
        gzipped = str(path).lower().endswith(".gz")
    data = leelaz_bytes(weights, gzipped, name=str(path))
    try:
        atomic_write(path, data)
    except OSError as e:
        raise KosumiError(f"{path}: cannot write ({e.strerror or e})") from None
    return len(data)


# ---------------------------------------------------------------------------- detection
def sniff_leelaz(head: bytes) -> bool:
    """Do these first bytes of a file (gzip or not) look like Leela Zero text weights?

    A lone integer on line 1 (the version itself is checked on reading, so that a wrong one gets
    a clear message), then the input convolution's C*18*9 >= 162 numbers on line 2 (or as many
    as the head holds)."""
    if head[:2] == GZIP_MAGIC:
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, SNIFF_TEXT_BYTES)
        except zlib.error:
            return False
    if not _SNIFF_RE.match(head):
        return False
    line2, complete, _ = head.partition(b"\n")[2].partition(b"\n")
    tokens = line2.split()
    if complete:
        enough = len(tokens) >= INPUT_PLANES * 9
    else:  # line 2 runs on beyond the head: its last token may be cut
        tokens = tokens[:-1]
        enough = bool(tokens)
    return enough and not b"".join(tokens).translate(None, _NUMBER_BYTES)


def is_leelaz_file(path: str | os.PathLike[str]) -> bool:
    """Cheap check of a file's first bytes (see ``sniff_leelaz``)."""
    try:
        with open(path, "rb") as f:
            return sniff_leelaz(f.read(4096))
    except OSError:
        return False


def describe_weights(weights: LeelaZeroWeights) -> dict[str, Any]:
    """What ``kosumi inspect`` shows for parsed Leela Zero weights."""
    fmt = "Leela Zero text weights" + (" (gzip)" if weights.gzipped else "")
    return {
        "format": fmt,
        "version": weights.version,
        "arch": weights.arch,
        "blocks": weights.blocks,
        "channels": weights.channels,
        "parameters": weights.num_parameters,
        "input_features": {"name": "lz18", "spatial": INPUT_PLANES, "global": 0},
        "heads": {
            "policy": "361 points + pass (softmax); conv 1x1 -> 2 channels -> fc 722 -> 362",
            "value": f"tanh winrate, {weights.value_perspective}'s view; conv 1x1 -> 1 channel "
                     "-> fc 361 -> 256 -> 1",
        },
        "board_sizes": [LZ_BOARD_SIZE],
    }


def describe_leelaz(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and describe a Leela Zero weights file. Raises KosumiError on a bad file."""
    return describe_weights(read_leelaz(path))


# ---------------------------------------------------------------------------- as a kosumi net
def read_leelaz_model(path: str | os.PathLike[str]) -> Any:
    """A Leela Zero file as a kosumi net in memory: ``Checkpoint(config, tensors)``."""
    return read_leelaz(path).to_checkpoint()


def write_leelaz_model(checkpoint: Any, out: str | os.PathLike[str], source: str = "net",
                       **_: Any) -> str:
    """Write an ``lz``-head net (``Checkpoint``) as Leela Zero weights (version 2 when its
    value is Black's, else 1); gzip when ``out`` ends in ``.gz``. Returns a summary line."""
    version = 2 if checkpoint.config.value_view == "black" else 1
    weights = LeelaZeroWeights.from_state_dict(checkpoint.tensors, checkpoint.config,
                                               version=version, source=source)
    nbytes = write_leelaz(out, weights)
    gz = ", gzip" if str(out).lower().endswith(".gz") else ""
    return (f"wrote {out}: Leela Zero weights v{weights.version}{gz}, {weights.arch}, "
            f"{weights.num_parameters:,} parameters, {nbytes:,} bytes")
