"""``NetConfig``: everything that describes a kosumi network, travelling as JSON in every file.

A config fully determines the architecture (and so every tensor name and shape) of a
``KosumiNet``: trunk size (``arch`` = ``b<blocks>c<channels>``), input feature set, head style,
supported board sizes, which outputs exist, and the widths of the heads. ``provenance`` is a
free dict (teacher, data, commands) that kosumi carries along but never interprets.

JSON form (``to_json``/``from_json``)::

    {"version": 1, "arch": "b6c64", "features": "basic", "head": "conv",
     "board_sizes": [9, 13, 19], "value": "wdl", "score_lead": true, "ownership": true,
     "policy_channels": 16, "value_channels": 16, "value_hidden": 32, "provenance": {}}

Head widths of 0 mean "derive from the trunk" and are resolved on construction, so a written
config always holds the concrete numbers. Invalid configs raise ``KosumiError`` with one line
naming the field.

Three heads (network families):

- ``conv``: kosumi's student ResNet with convolutional heads, any board size;
- ``lz``: the same trunk with Leela Zero's heads, tensor for tensor (19x19, tanh value);
- ``katago``: KataGo's model-version-8 network (pre-activation trunk with global-pooling blocks,
  its policy and value heads, outputs ``policy``, ``value`` (3 logits) ``score`` (4 raw values)
  and ``ownership``). Its layout, beyond ``arch`` and the head widths, is in ``katago``:
  ``{"model_version": 8, "name": ..., "mid_channels", "regular_channels",
  "dilated_channels", "gpool_channels", "policy_gpool_channels", "initial_kernel",
  "blocks": ["ordinary" | "gpool", ...]}``.

Optional fields, left out of the JSON at their defaults (so older files read unchanged):
``value_pool`` (the conv head's value pooling: "mean_max", or "katago": KataGo's mean, mean x
(N - 14) / 10 and max, which tells the value and score layers the board size; it needs a feature
set whose plane 0 is the on-board mask), ``value_view`` ("side_to_move", or "black" for Leela
Zero version-2 weights, whose value is Black's), ``extra_tensors`` (names of tensors a file
carries beyond the architecture's own), ``katago`` and ``quantization`` (a quantized net's
scheme, ``nets.quant``: its tensors are then those of the folded inference graph, int8 where the
scheme says so).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kosumi.errors import KosumiError
from kosumi.go.coords import MAX_SIZE, MIN_SIZE
from kosumi.nets.katago_layout import validate_katago_layout

CONFIG_VERSION = 1
HEADS = ("conv", "lz", "katago")
VALUE_KINDS = ("wdl", "tanh")
VALUE_VIEWS = ("side_to_move", "black")
VALUE_POOLS = ("mean_max", "katago")
#: the ``katago`` layout's integer fields (the block kinds are a list)
KATAGO_LAYOUT_INTS = ("model_version", "mid_channels", "regular_channels", "dilated_channels",
                      "gpool_channels", "policy_gpool_channels", "initial_kernel")
LZ_BOARD_SIZE = 19
MAX_BLOCKS, MAX_CHANNELS = 128, 1024

_ARCH_RE = re.compile(r"b(\d+)c(\d+)")


def parse_arch(arch: str) -> tuple[int, int]:
    """``"b6c64"`` -> ``(6, 64)`` (residual blocks, trunk channels). Raises KosumiError."""
    m = _ARCH_RE.fullmatch(str(arch).strip().lower())
    if not m:
        raise KosumiError(f"config field 'arch': {arch!r} is not of the form b<blocks>c<channels>, "
                          "e.g. b6c64")
    blocks, channels = int(m.group(1)), int(m.group(2))
    if not 0 <= blocks <= MAX_BLOCKS:
        raise KosumiError(f"config field 'arch': {blocks} blocks is out of range 0..{MAX_BLOCKS}")
    if not 1 <= channels <= MAX_CHANNELS:
        raise KosumiError(
            f"config field 'arch': {channels} channels is out of range 1..{MAX_CHANNELS}")
    return blocks, channels


def parse_board_sizes(text: str | list[int] | tuple[int, ...]) -> list[int]:
    """``"9,13,19"`` or ``[9, 13, 19]`` -> sorted unique sizes. Raises KosumiError."""
    items = text.split(",") if isinstance(text, str) else list(text)
    sizes = []
    for item in items:
        try:
            size = int(str(item).strip())
        except ValueError:
            raise KosumiError(f"config field 'board_sizes': {item!r} is not an integer") from None
        sizes.append(size)
    return sorted(set(sizes))


@dataclass
class NetConfig:
    """The description of a kosumi network. See the module docstring for the JSON form."""

    arch: str = "b6c64"
    features: str = "basic"
    head: str = "conv"
    board_sizes: list[int] = field(default_factory=lambda: [9, 13, 19])
    value: str = "wdl"  # "wdl" (3 logits: win, loss, noResult) | "tanh" (1 scalar, Leela Zero)
    score_lead: bool = True
    ownership: bool = True
    policy_channels: int = 0  # conv head: width of the policy conv (0 = derived)
    value_channels: int = 0  # conv head: width of the value conv (0 = derived)
    value_hidden: int = 0  # conv head: width of the value fc layer (0 = derived)
    provenance: dict[str, Any] = field(default_factory=dict)
    value_view: str = "side_to_move"  # whose view the raw value is from ("black": LZ v2 files)
    extra_tensors: list[str] = field(default_factory=list)  # tensors beyond the architecture's
    katago: dict[str, Any] = field(default_factory=dict)  # head "katago": the net's layout
    quantization: dict[str, Any] = field(default_factory=dict)  # nets.quant.QuantScheme
    value_pool: str = "mean_max"  # conv head: "mean_max" | "katago" (+ mean x (N - 14) / 10)

    def __post_init__(self) -> None:
        self.arch = str(self.arch).strip().lower()
        self.validate()
        if self.head == "lz":
            self.policy_channels, self.value_channels, self.value_hidden = 2, 1, 256
        elif self.head == "katago":
            pass  # every width is given (validate checks it)
        else:
            c = self.channels
            self.policy_channels = self.policy_channels or max(8, c // 4)
            self.value_channels = self.value_channels or max(8, c // 4)
            self.value_hidden = self.value_hidden or max(16, 2 * self.value_channels)

    # ------------------------------------------------------------------ derived
    @property
    def blocks(self) -> int:
        return parse_arch(self.arch)[0]

    @property
    def channels(self) -> int:
        return parse_arch(self.arch)[1]

    @property
    def value_outputs(self) -> int:
        return 3 if self.value == "wdl" else 1

    @property
    def quantized(self) -> bool:
        """A net made by ``kosumi quantize`` (its tensors are the folded graph's)."""
        return bool(self.quantization)

    @property
    def own_precision(self) -> str | None:
        """The precision a quantized net runs and exports at, whatever is asked: ``"int8"``
        for 8 bits (int8 Q/DQ), ``"fp16"`` for 16; None for a float net."""
        if not self.quantization:
            return None
        return "int8" if int(self.quantization.get("bits", 8)) == 8 else "fp16"

    @property
    def family(self) -> str:
        """``"katago"`` for KataGo's network, ``"kosumi"`` for kosumi's own ResNet (both heads)."""
        return "katago" if self.head == "katago" else "kosumi"

    def supports_size(self, size: int) -> bool:
        return int(size) in self.board_sizes

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check every field; raise KosumiError naming the first bad one."""
        parse_arch(self.arch)
        self._validate_inputs()
        self._validate_outputs()
        if not isinstance(self.provenance, dict):
            raise KosumiError("config field 'provenance': must be a JSON object")
        if (not isinstance(self.extra_tensors, list)
                or not all(isinstance(t, str) and t for t in self.extra_tensors)
                or len(set(self.extra_tensors)) != len(self.extra_tensors)):
            raise KosumiError("config field 'extra_tensors': must be a list of distinct names")
        if not isinstance(self.katago, dict):
            raise KosumiError("config field 'katago': must be a JSON object")
        if not isinstance(self.quantization, dict):
            raise KosumiError("config field 'quantization': must be a JSON object")
        if self.head == "katago":
            self._validate_katago()
        elif self.katago:
            raise KosumiError(f"config field 'katago': only for the katago head, not "
                              f"{self.head!r}")
        if self.head == "lz":
            self._validate_lz()

    def _validate_inputs(self) -> None:
        """features, head and board_sizes (sorted and deduplicated here)."""
        from kosumi.nets.features import known_feature_sets  # late: features imports no config

        known = known_feature_sets()
        if not isinstance(self.features, str) or self.features not in known:
            raise KosumiError(f"config field 'features': unknown feature set {self.features!r} "
                              f"(known: {', '.join(known)})")
        if self.head not in HEADS:
            raise KosumiError(
                f"config field 'head': unknown head {self.head!r} (use {' or '.join(HEADS)})")
        if (not isinstance(self.board_sizes, (list, tuple)) or not self.board_sizes
                or not all(isinstance(s, int) and not isinstance(s, bool)
                           for s in self.board_sizes)):
            raise KosumiError("config field 'board_sizes': must be a non-empty list of integers")
        self.board_sizes = sorted(set(self.board_sizes))
        for s in self.board_sizes:
            if not MIN_SIZE <= s <= MAX_SIZE:
                raise KosumiError(f"config field 'board_sizes': size {s} is out of range "
                                  f"{MIN_SIZE}..{MAX_SIZE}")

    def _validate_outputs(self) -> None:
        """value, score_lead, ownership, the head widths and value_view."""
        if self.value not in VALUE_KINDS:
            raise KosumiError(f"config field 'value': unknown value kind {self.value!r} "
                              f"(use {' or '.join(VALUE_KINDS)})")
        for name in ("score_lead", "ownership"):
            if not isinstance(getattr(self, name), bool):
                raise KosumiError(f"config field {name!r}: must be true or false")
        for name in ("policy_channels", "value_channels", "value_hidden"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_CHANNELS:
                raise KosumiError(f"config field {name!r}: {v!r} is not an integer in "
                                  f"0..{MAX_CHANNELS}")
        if self.value_view not in VALUE_VIEWS:
            raise KosumiError(f"config field 'value_view': {self.value_view!r} is not one of "
                              f"{', '.join(VALUE_VIEWS)}")
        self._validate_value_pool()

    def _validate_value_pool(self) -> None:
        if self.value_pool not in VALUE_POOLS:
            raise KosumiError(f"config field 'value_pool': {self.value_pool!r} is not one of "
                              f"{', '.join(VALUE_POOLS)}")
        if self.value_pool == "mean_max":
            return
        from kosumi.nets.features import get_feature_set  # late: features imports no config

        if self.head != "conv":
            raise KosumiError(f"config field 'value_pool': {self.value_pool!r} is for the conv "
                              f"head, not {self.head!r}")
        if get_feature_set(self.features).plane_names[:1] != ("on board",):
            raise KosumiError(f"config field 'value_pool': {self.value_pool!r} needs plane 0 of "
                              f"the features to be the on-board mask, and {self.features!r} "
                              "has none")

    def _validate_lz(self) -> None:
        """Leela Zero's head: 19x19, a tanh value, no score or ownership, fixed widths."""
        if self.board_sizes != [LZ_BOARD_SIZE]:
            raise KosumiError(f"config field 'board_sizes': the lz head is 19x19 only, got "
                              f"{','.join(map(str, self.board_sizes))}")
        if self.value != "tanh":
            raise KosumiError("config field 'value': the lz head has a tanh value, not "
                              f"{self.value!r}")
        if self.score_lead or self.ownership:
            which = "score_lead" if self.score_lead else "ownership"
            raise KosumiError(f"config field {which!r}: the lz head has no such output")
        for name in ("policy_channels", "value_channels", "value_hidden"):
            fixed = {"policy_channels": 2, "value_channels": 1, "value_hidden": 256}[name]
            if getattr(self, name) not in (0, fixed):
                raise KosumiError(f"config field {name!r}: the lz head fixes it to {fixed}")

    def _validate_katago(self) -> None:
        lay = self.katago
        for name in KATAGO_LAYOUT_INTS:
            v = lay.get(name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise KosumiError(f"config field 'katago.{name}': {v!r} is not a non-negative "
                                  "integer")
        validate_katago_layout(lay, self.blocks)
        if self.features != "katago_v7" or self.value != "wdl" or self.value_view != "side_to_move":
            raise KosumiError("config field 'head': the katago head takes katago_v7 features "
                              "and a wdl value from the side to move's view")
        if not (self.score_lead and self.ownership):
            raise KosumiError("config field 'head': the katago head has score and ownership")
        for name in ("policy_channels", "value_channels", "value_hidden"):
            if getattr(self, name) < 1:
                raise KosumiError(f"config field {name!r}: the katago head needs it set")

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        d = {"version": CONFIG_VERSION, **asdict(self)}
        for name, default in (("value_view", "side_to_move"), ("extra_tensors", []),
                              ("katago", {}), ("quantization", {}), ("value_pool", "mean_max")):
            if d[name] == default:
                del d[name]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any, source: str = "config") -> NetConfig:
        """Build from a parsed JSON object; errors name ``source`` and the field."""
        if not isinstance(data, dict):
            raise KosumiError(f"{source}: the net config is not a JSON object")
        data = dict(data)
        version = data.pop("version", CONFIG_VERSION)
        if version != CONFIG_VERSION:
            raise KosumiError(f"{source}: config field 'version': {version!r} is not supported "
                              f"(this kosumi reads version {CONFIG_VERSION})")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise KosumiError(f"{source}: config field {unknown[0]!r} is unknown")
        try:
            return cls(**data)
        except KosumiError as e:
            raise KosumiError(f"{source}: {e}") from None

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "config") -> NetConfig:
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise KosumiError(f"{source}: the net config is not valid JSON ({e})") from None
        return cls.from_dict(data, source)

    def describe(self) -> str:
        """A one-line human summary, e.g. ``b6c64 basic conv head, wdl+score+ownership,
        9,13,19``."""
        outs = [self.value] + (["score"] if self.score_lead else []) + (
            ["ownership"] if self.ownership else [])
        sizes = _size_ranges(self.board_sizes)
        return f"{self.arch} {self.features} {self.head} head, {'+'.join(outs)}, sizes {sizes}"


def _size_ranges(sizes: list[int]) -> str:
    """``[2, 3, 4, 9]`` -> ``"2-4,9"``."""
    parts: list[str] = []
    start = prev = None
    for s in sizes:
        if prev is not None and s == prev + 1:
            prev = s
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = s
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)
