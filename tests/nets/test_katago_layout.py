"""The layout of a KataGo net in a kosumi config (kosumi.nets.katago_layout).

Oracles: layouts written by hand, their widths and tensor prefixes counted by hand, and the
config field each malformed entry must name."""

from __future__ import annotations

import pytest

from kosumi.errors import KosumiError
from kosumi.nets.katago_layout import block_specs, validate_katago_layout, walk

BASE = {"mid_channels": 8, "regular_channels": 6, "gpool_channels": 4}
ATTN = {"kind": "attention", "heads": 4, "kv_heads": 2, "q_dim": 8, "v_dim": 6,
        "rope": "learned", "rope_theta": 0.0, "eps": 1e-6}
FFN = {"kind": "ffn", "hidden": 12, "gated": True, "eps": 1e-6}
NESTED = {"kind": "nested", "channels": 5, "kernel_in": 1, "kernel_out": 3,
          "blocks": [ATTN, "ordinary", {"kind": "gpool", "regular": 3, "gpool": 2}, FFN]}


def layout(blocks, **extra):
    return {**BASE, "blocks": blocks, **extra}


def test_words_take_the_trunks_widths_and_objects_their_own():
    specs = block_specs(layout(["ordinary", "gpool", NESTED]))
    assert specs[0] == {"kind": "ordinary", "mid": 8}
    assert specs[1] == {"kind": "gpool", "regular": 6, "gpool": 4}
    inner = specs[2]["blocks"]
    assert inner[1] == {"kind": "ordinary", "mid": 8}  # a word inside: the trunk's widths
    assert inner[2] == {"kind": "gpool", "regular": 3, "gpool": 2}


def test_walk_names_every_block_depth_first_with_its_stream_width():
    specs = block_specs(layout(["ordinary", NESTED, FFN]))
    got = [(p, s["kind"], c) for p, s, c in walk(specs, channels=16)]
    assert got == [
        ("blocks.0", "ordinary", 16), ("blocks.1", "nested", 16),
        ("blocks.1.blocks.0", "attention", 5), ("blocks.1.blocks.1", "ordinary", 5),
        ("blocks.1.blocks.2", "gpool", 5), ("blocks.1.blocks.3", "ffn", 5),
        ("blocks.2", "ffn", 16)]


def test_a_good_layout_validates():
    validate_katago_layout(layout(["gpool", NESTED], activation="silu", score_channels=6,
                                  trunk_norm={"kind": "rms", "spatial": True, "eps": 1e-6},
                                  pass_hidden=4, policy_optimism=0.2), 2)


@pytest.mark.parametrize("blocks,extra,field", [
    (["ordinary"], {}, "katago.blocks': lists 1 blocks, the arch says 2"),
    (["ordinary", "dense"], {}, "katago.blocks[1]"),
    (["ordinary", {**ATTN, "kv_heads": 3}], {}, "katago.blocks[1].kv_heads"),
    (["ordinary", {**ATTN, "heads": 0}], {}, "katago.blocks[1].heads"),
    (["ordinary", {**ATTN, "rope": "spiral"}], {}, "katago.blocks[1].rope"),
    (["ordinary", {**ATTN, "rope": "fixed", "q_dim": 6}], {}, "katago.blocks[1].q_dim"),
    (["ordinary", {**ATTN, "eps": 2.0}], {}, "katago.blocks[1].eps"),
    (["ordinary", {**FFN, "gated": 1}], {}, "katago.blocks[1].gated"),
    (["ordinary", {**NESTED, "kernel_in": 2}], {}, "katago.blocks[1].kernel_in"),
    (["ordinary", {**NESTED, "blocks": []}], {}, "katago.blocks[1].blocks"),
    (["ordinary", {**NESTED, "blocks": [{**FFN, "hidden": -1}]}], {},
     "katago.blocks[1].blocks[0].hidden"),
    (["ordinary", "gpool"], {"activation": "gelu"}, "katago.activation"),
    (["ordinary", "gpool"], {"score_channels": 5}, "katago.score_channels"),
    (["ordinary", "gpool"], {"trunk_norm": {"kind": "layer"}}, "katago.trunk_norm"),
    (["ordinary", "gpool"], {"pass_hidden": -1}, "katago.pass_hidden"),
    (["ordinary", "gpool"], {"policy_optimism": 1.5}, "katago.policy_optimism"),
    (["ordinary", "gpool"], {"post": {"lead": 20.0}}, "katago.post"),
])
def test_bad_layouts_name_the_field(blocks, extra, field):
    with pytest.raises(KosumiError) as e:
        validate_katago_layout(layout(blocks, **extra), 2)
    assert field in str(e.value) and "\n" not in str(e.value)


def test_nesting_is_bounded():
    deep: dict = {"kind": "ffn", "hidden": 2, "gated": False, "eps": 1e-6}
    for _ in range(10):
        deep = {"kind": "nested", "channels": 2, "kernel_in": 1, "kernel_out": 1,
                "blocks": [deep]}
    with pytest.raises(KosumiError) as e:
        block_specs(layout([deep]))
    assert "deeper than 8" in str(e.value)
