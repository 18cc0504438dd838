"""What ``kosumi inspect`` says of a kosumi net: ``describe_checkpoint(path)`` for a checkpoint
file and ``describe_checkpoint_parts(config, tensors, format)`` for a net in memory (the pack's
reader and the strength table use it). The keys are those ``nets.inspect`` documents."""

from __future__ import annotations

import os
from typing import Any


def describe_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe a kosumi checkpoint (read and validated without torch)."""
    from kosumi.nets.checkpoint import read_checkpoint

    ckpt = read_checkpoint(path)
    return describe_checkpoint_parts(ckpt.config, ckpt.tensors, "kosumi checkpoint")


def describe_checkpoint_parts(cfg: Any, tensors: dict[str, Any], fmt: str) -> dict[str, Any]:
    """The description of a net in memory (a checkpoint's or a pack's config and tensors)."""
    from kosumi.nets.config import CONFIG_VERSION
    from kosumi.nets.features import get_feature_set

    fs = get_feature_set(cfg.features)
    params = sum(int(t.size) for name, t in tensors.items()
                 if not name.endswith(("running_mean", "running_var")))
    value = ("win/loss/noResult (softmax)" if cfg.value == "wdl"
             else "tanh winrate, side to move's view")
    if cfg.value_pool == "katago":
        value += "; pooled with the board size (mean, mean x (N-14)/10, max)"
    heads: dict[str, str] = {"policy": "N*N points + pass (softmax)", "value": value}
    if cfg.score_lead:
        heads["score_lead"] = "the side to move's lead in points"
    if cfg.ownership:
        heads["ownership"] = "per point, tanh; +1 = the side to move owns it"
    info: dict[str, Any] = {
        "format": fmt,
        "version": CONFIG_VERSION,
        "arch": cfg.arch,
        "blocks": cfg.blocks,
        "channels": cfg.channels,
        "parameters": params,
        "input_features": {"name": fs.name, "spatial": fs.num_planes, "global": fs.num_globals},
        "head": cfg.head,
        "heads": heads,
        "board_sizes": list(cfg.board_sizes),
    }
    if cfg.quantized:
        from kosumi.nets.quant import describe_scheme

        info["quantization"] = describe_scheme(cfg, tensors)
        info["parameters"] = sum(int(t.size) for name, t in tensors.items()
                                 if name.endswith((".weight", ".bias")))
    types: dict[str, int] = {}
    for t in tensors.values():
        types[str(t.dtype)] = types.get(str(t.dtype), 0) + 1
    if set(types) != {"float32"}:
        info["tensor_types"] = types
    if cfg.extra_tensors:
        info["extra_tensors"] = len(cfg.extra_tensors)
    if cfg.provenance:
        info["provenance"] = cfg.provenance
    return info
