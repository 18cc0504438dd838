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
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kosumi.errors import KosumiError
from kosumi.go.coords import MAX_SIZE, MIN_SIZE

CONFIG_VERSION = 1
HEADS = ("conv", "lz")
VALUE_KINDS = ("wdl", "tanh")
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

    def __post_init__(self) -> None:
        self.arch = str(self.arch).strip().lower()
        self.validate()
        if self.head == "lz":
            self.policy_channels, self.value_channels, self.value_hidden = 2, 1, 256
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

    def supports_size(self, size: int) -> bool:
        return int(size) in self.board_sizes

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check every field; raise KosumiError naming the first bad one."""
        parse_arch(self.arch)
        from kosumi.nets.features import FEATURE_SETS  # late: features imports nothing of ours

        if not isinstance(self.features, str) or self.features not in FEATURE_SETS:
            raise KosumiError(f"config field 'features': unknown feature set {self.features!r} "
                              f"(known: {', '.join(sorted(FEATURE_SETS))})")
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
        if not isinstance(self.provenance, dict):
            raise KosumiError("config field 'provenance': must be a JSON object")
        if self.head == "lz":
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

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        return {"version": CONFIG_VERSION, **asdict(self)}

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
        """A one-line human summary, e.g. ``b6c64 basic conv head, wdl+score+ownership, 9,13,19``."""
        outs = [self.value] + (["score"] if self.score_lead else []) + (
            ["ownership"] if self.ownership else [])
        sizes = ",".join(map(str, self.board_sizes))
        return f"{self.arch} {self.features} {self.head} head, {'+'.join(outs)}, sizes {sizes}"
