"""The lossy step for a smaller file: int8 weights near zero set to zero.

``zero_small_weights(checkpoint, threshold, means)`` sets every weight of the int8 layers with
``|q| <= threshold`` to 0 (threshold 0 leaves the net as it is; 1 zeroes the weights the
quantizer put one step from zero, floats within 1.5 steps). Zeros compress far better than the
small values they replace (their share of the entropy grows), and the int32 bias of each output
channel takes back the mean the zeroed weights contributed when ``means`` (each layer's mean
input per channel over calibration positions, ``input_means``) is given, the way bias
correction does for rounding. It gives what it did as a ``record.Zeroed`` (threshold, weights
zeroed, int8 weights in all), which ``kosumi quantize --zero`` writes into the scheme's record.

``zeroing_curve(checkpoint, states, thresholds)`` is the size-vs-agreement curve a user picks a
threshold from: per threshold, the share of int8 weights zeroed, the pack's bytes
(``export.pack``) and its ratio to the naive file of the net as given (its tensors in file order
through zstd -19), the order-0 entropy of the int8 weights, and the agreement
(``runtime.agreement``) with the net as given on the positions. ``kosumi quantize --zero T``
applies one; ``kosumi viz --calib`` draws the curve.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.graph import WEIGHTED_OPS, inference_graph
from kosumi.nets.quant import scheme_of
from kosumi.quantize.record import Zeroed

DEFAULT_THRESHOLDS = (0, 1, 2, 3, 4, 6, 8)


def _int8_layers(checkpoint: Checkpoint) -> list[Any]:
    scheme = scheme_of(checkpoint.config)
    if scheme is None or scheme.bits != 8:
        raise KosumiError("zeroing works on int8 weights: quantize the net with --bits 8 first")
    return [n for n in inference_graph(checkpoint.config).nodes
            if n.op in WEIGHTED_OPS and scheme.layers.get(n.name) == "int8"]


def input_means(checkpoint: Checkpoint, states: Sequence[Any]) -> dict[str, np.ndarray]:
    """Per int8 layer: the mean of its input per channel over ``states``, in the input's integer
    units (q - zero point), as the integer backend multiplies it."""
    from kosumi.nets.features import get_feature_set
    from kosumi.quantize.calibration import collect_stats
    from kosumi.runtime.numpy_int8 import Int8NumpyBackend

    backend = Int8NumpyBackend(checkpoint.config, checkpoint.tensors)
    stats = collect_stats(backend, get_feature_set(checkpoint.config.features), list(states))
    out = {}
    for n in _int8_layers(checkpoint):
        x = n.inputs[0]
        out[n.name] = stats[x].chan_mean / backend.acts[x].scale
    return out


def zero_small_weights(checkpoint: Checkpoint, threshold: int,
                       means: dict[str, np.ndarray] | None = None) -> tuple[Checkpoint, Zeroed]:
    """(the net with small int8 weights zeroed, what was zeroed)."""
    if threshold < 0:
        raise KosumiError(f"--zero {threshold}: a threshold is 0 or more")
    layers = _int8_layers(checkpoint)
    if threshold == 0:
        return checkpoint, Zeroed(0, 0, sum(checkpoint.tensors[f"{n.name}.weight"].size
                                            for n in layers), means is not None)
    tensors = dict(checkpoint.tensors)
    zeroed = total = 0
    for n in layers:
        w = tensors[f"{n.name}.weight"]
        total += w.size
        mask = (np.abs(w.astype(np.int16)) <= threshold) & (w != 0)
        if not mask.any():
            continue
        zeroed += int(mask.sum())
        removed = np.where(mask, w, 0).astype(np.int64)
        tensors[f"{n.name}.weight"] = np.where(mask, 0, w).astype(np.int8)
        m = None if means is None else means.get(n.name)
        if m is not None and len(m) == removed.shape[1]:
            m = np.asarray(m, np.float64)
            per_in = removed.reshape(removed.shape[0], removed.shape[1], -1).sum(axis=2)
            shift = np.rint(per_in @ m).astype(np.int64)  # [O]: the mean the zeros took away
            b = tensors[f"{n.name}.bias"].astype(np.int64) + shift
            if np.abs(b).max(initial=0) >= 2**31:
                raise KosumiError(f"layer {n.name}: the corrected bias does not fit int32")
            tensors[f"{n.name}.bias"] = b.astype(np.int32)
    return (Checkpoint(checkpoint.config, tensors, dict(checkpoint.metadata)),
            Zeroed(int(threshold), zeroed, total, means is not None))


def recorded(checkpoint: Checkpoint, zeroed: Zeroed) -> Checkpoint:
    """The net with ``zeroed`` in its scheme's record (``info["zeroed"]``), as ``kosumi quantize
    --zero`` writes it."""
    q = checkpoint.config.quantization
    info = {**q.get("info", {}), "zeroed": asdict(zeroed)}
    return Checkpoint(replace(checkpoint.config, quantization={**q, "info": info}),
                      checkpoint.tensors, dict(checkpoint.metadata))


def zeroing_curve(checkpoint: Checkpoint, states: Sequence[Any],
                  thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
                  progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The size-vs-agreement curve (see the module docstring), one row per threshold."""
    from kosumi.export.compressibility import entropy_bytes
    from kosumi.export.pack import pack_checkpoint
    from kosumi.runtime import NetEvaluator
    from kosumi.runtime.agreement import agreement, evaluate_all
    from kosumi.runtime.numpy_int8 import Int8NumpyBackend

    def evaluate(ck: Checkpoint) -> list[Any]:
        return evaluate_all(NetEvaluator(Int8NumpyBackend(ck.config, ck.tensors), ck.config),
                            states)

    means = input_means(checkpoint, states)
    ref = evaluate(checkpoint)
    sizes = [s.size for s in states]
    from kosumi.export.compressibility import compress
    from kosumi.export.pack import PACK_CODEC

    naive = len(compress(b"".join(np.ascontiguousarray(v).tobytes()
                                  for v in checkpoint.tensors.values()), PACK_CODEC))
    rows = []
    for t in thresholds:
        if progress:
            progress(f"zeroing |q| <= {t}")
        ck, z = zero_small_weights(checkpoint, t, means)
        data, _ = pack_checkpoint(recorded(ck, z) if t else ck)  # as quantize --zero T writes it
        rows.append({"threshold": int(t), "zeroed": round(z.weights / max(1, z.of), 4),
                     "pack_bytes": len(data), "vs_naive": round(len(data) / naive, 3),
                     "weights_entropy": round(sum(entropy_bytes(ck.tensors[f"{n.name}.weight"])
                                                  for n in _int8_layers(ck))),
                     "agreement": agreement(ref, evaluate(ck), sizes)})
    return rows
