"""The layout of a KataGo net as a kosumi config keeps it (``NetConfig.katago``), and its walk.

A KataGo net's config (head ``katago``) holds, besides the widths of model version 8
(``mid_channels``, ``regular_channels``, ``gpool_channels``, ...), the list ``blocks``: one entry
per trunk block, either a word (``"ordinary"``, ``"gpool"``: the trunk's widths) or an object:

    {"kind": "ordinary", "mid": C}                     (an inner ordinary block, its own width)
    {"kind": "gpool", "regular": C, "gpool": G}
    {"kind": "nested", "channels": C, "kernel_in": k, "kernel_out": k, "blocks": [...]}
    {"kind": "attention", "heads": H, "kv_heads": K, "q_dim": D, "v_dim": E,
     "rope": "learned" | "fixed" | "none", "rope_theta": T, "eps": e}
    {"kind": "ffn", "hidden": F, "gated": true | false, "eps": e}

and the optional keys of later model versions (absent: version 8's value): ``activation``
(relu, silu, mish, identity), ``trunk_norm`` ({"kind": "rms", "spatial": bool, "eps": e};
absent: a batch norm), ``pass_hidden`` (the width of the pass logit's hidden layer, 0: none),
``score_channels`` (4, or 6 from version 9: + short-term value and score errors), ``post``
(KataGo's post-processing multipliers) and ``policy_optimism`` (the mix of the policy and the
optimistic policy channels that the net's one policy output carries).

``block_specs`` turns the list into objects with every width filled in, ``walk`` names each
block's tensors' prefix (``blocks.3``, ``blocks.3.blocks.1``) -- the names the torch module, the
tensors, batch-norm folding and the inference graph share -- and ``validate_katago_layout``
checks a config's layout (config field errors name ``katago.blocks...``). Pure Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kosumi.errors import KosumiError

ACTIVATIONS = ("relu", "silu", "mish", "identity")
ROPE_KINDS = ("learned", "fixed", "none")
BLOCK_KINDS = ("ordinary", "gpool", "nested", "attention", "ffn")
#: KataGo's post-processing multipliers of model versions 8 to 12 (from 13 the file has them)
DEFAULT_POST = {"td_score": 20.0, "score_mean": 20.0, "score_stdev": 20.0, "lead": 20.0,
                "variance_time": 40.0, "shortterm_value_error": 0.25,
                "shortterm_score_error": 30.0}
MAX_DEPTH = 8
_INTS = {
    "ordinary": ("mid",),
    "gpool": ("regular", "gpool"),
    "nested": ("channels", "kernel_in", "kernel_out"),
    "attention": ("heads", "kv_heads", "q_dim", "v_dim"),
    "ffn": ("hidden",),
}


def _fail(where: str, what: str) -> KosumiError:
    return KosumiError(f"config field 'katago.{where}': {what}")


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def block_specs(lay: dict[str, Any], blocks: list[Any] | None = None, where: str = "blocks",
                depth: int = 0) -> list[dict[str, Any]]:
    """The blocks of a layout (the trunk's, or ``blocks`` of a nested one) as objects with every
    width filled in; KosumiError naming the entry when one is malformed."""
    if depth > MAX_DEPTH:
        raise _fail(where, f"nested blocks deeper than {MAX_DEPTH}")
    raw = lay.get("blocks") if blocks is None else blocks
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "must be a non-empty list of blocks")
    out = []
    for i, b in enumerate(raw):
        at = f"{where}[{i}]"
        spec = _spec_of(lay, b, at)
        _check_spec(spec, at)
        if spec["kind"] == "nested":
            spec["blocks"] = block_specs(lay, spec.get("blocks"), f"{at}.blocks", depth + 1)
        out.append(spec)
    return out


def _spec_of(lay: dict[str, Any], b: Any, at: str) -> dict[str, Any]:
    """One entry as an object (a word takes the trunk's widths)."""
    if b == "ordinary":
        return {"kind": "ordinary", "mid": lay.get("mid_channels")}
    if b == "gpool":
        return {"kind": "gpool", "regular": lay.get("regular_channels"),
                "gpool": lay.get("gpool_channels")}
    if isinstance(b, dict) and b.get("kind") in BLOCK_KINDS:
        return dict(b)
    raise _fail(at, f"{b!r} is not a block ({', '.join(BLOCK_KINDS)})")


def _check_spec(spec: dict[str, Any], at: str) -> None:
    kind = spec["kind"]
    for key in _INTS[kind]:
        if not _positive_int(spec.get(key)):
            raise _fail(f"{at}.{key}", f"{spec.get(key)!r} is not a positive integer")
    if kind == "nested":
        for key in ("kernel_in", "kernel_out"):
            if spec[key] % 2 == 0:
                raise _fail(f"{at}.{key}", f"kernel {spec[key]} is not odd")
    elif kind == "attention":
        if spec["heads"] % spec["kv_heads"]:
            raise _fail(f"{at}.kv_heads", "must divide heads")
        if spec.get("rope") not in ROPE_KINDS:
            raise _fail(f"{at}.rope", f"{spec.get('rope')!r} is not one of "
                                      f"{', '.join(ROPE_KINDS)}")
        if spec["rope"] != "none" and spec["q_dim"] % (4 if spec["rope"] == "fixed" else 2):
            raise _fail(f"{at}.q_dim", "does not split into rotary channel pairs")
        if spec["rope"] == "fixed" and not _positive_number(spec.get("rope_theta")):
            raise _fail(f"{at}.rope_theta", "must be a positive number")
        _check_eps(spec, at)
    elif kind == "ffn":
        if not isinstance(spec.get("gated"), bool):
            raise _fail(f"{at}.gated", "must be true or false")
        _check_eps(spec, at)


def _positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _check_eps(spec: dict[str, Any], at: str) -> None:
    eps = spec.get("eps")
    if not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and 0 < eps <= 1):
        raise _fail(f"{at}.eps", f"{eps!r} is not a number in (0, 1]")


def walk(specs: list[dict[str, Any]], prefix: str = "blocks", channels: int = 0
         ) -> Iterator[tuple[str, dict[str, Any], int]]:
    """(tensor prefix, spec, channels of its residual stream) for every block, depth first."""
    for i, spec in enumerate(specs):
        p = f"{prefix}.{i}"
        yield p, spec, channels
        if spec["kind"] == "nested":
            yield from walk(spec["blocks"], f"{p}.blocks", spec["channels"])


def has_attention(lay: dict[str, Any]) -> bool:
    """Does the net have a transformer attention block (its cost grows with the points^2)?"""
    return bool(lay.get("blocks")) and any(
        spec["kind"] == "attention" for _, spec, _ in walk(block_specs(lay)))


def activation(lay: dict[str, Any]) -> str:
    return str(lay.get("activation", "relu"))


def validate_katago_layout(lay: dict[str, Any], num_blocks: int) -> None:
    """Check a katago config's layout (the optional keys and ``blocks``); KosumiError naming the
    field."""
    specs = block_specs(lay)
    if len(specs) != num_blocks:
        raise _fail("blocks", f"lists {len(specs)} blocks, the arch says {num_blocks}")
    if activation(lay) not in ACTIVATIONS:
        raise _fail("activation", f"{lay.get('activation')!r} is not one of "
                                  f"{', '.join(ACTIVATIONS)}")
    norm = lay.get("trunk_norm")
    if norm is not None:
        if (not isinstance(norm, dict) or norm.get("kind") != "rms"
                or not isinstance(norm.get("spatial"), bool)):
            raise _fail("trunk_norm", 'must be {"kind": "rms", "spatial": true|false, "eps": e}')
        _check_eps(norm, "trunk_norm")
    hidden = lay.get("pass_hidden", 0)
    if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 0:
        raise _fail("pass_hidden", f"{hidden!r} is not a non-negative integer")
    if lay.get("score_channels", 4) not in (4, 6):
        raise _fail("score_channels", f"{lay.get('score_channels')!r} is not 4 or 6")
    post = lay.get("post", DEFAULT_POST)
    if (not isinstance(post, dict) or set(post) != set(DEFAULT_POST)
            or not all(_positive_number(v) for v in post.values())):
        raise _fail("post", f"must give the positive multipliers {', '.join(DEFAULT_POST)}")
    opt = lay.get("policy_optimism", 0.0)
    if not isinstance(opt, (int, float)) or isinstance(opt, bool) or not 0 <= opt <= 1:
        raise _fail("policy_optimism", f"{opt!r} is not a number in [0, 1]")
