"""Two exact rewrites of a folded float net that make it quantize better (Nagel et al., "Data-Free
Quantization", 2019, adapted to per-channel weights and calibrated per-tensor activations).

``equalize_blocks``: inside a residual block, relu(s * y) = s * relu(y) for s > 0, so output
channel c of the first convolution can be divided by s_c (its weights and bias) and input channel
c of the second multiplied by s_c without changing the block. The first convolution's weights
are quantized per output channel, so its side costs nothing; the activation between the two is
quantized per tensor, where a few wide channels waste the grid of all the others. With
s_c = sqrt(a_c / w_c) (a_c the channel's calibrated range, w_c the largest weight reading it)
the activation's channels and the second convolution's weights share the range evenly.

``weight_bias_correction``: rounding weights shifts each output channel's mean by
sum (W_q - W) * E[x]; subtracting that from the bias removes the shift (E[x] per input channel
from calibration).
"""

from __future__ import annotations

import numpy as np

from kosumi.nets.fold import FoldedNet
from kosumi.quantize.calibration import ValueStats

MIN_SCALE, MAX_SCALE = 1 / 64, 64.0


def equalize_blocks(net: FoldedNet, stats: dict[str, ValueStats]
                    ) -> tuple[FoldedNet, dict[str, float]]:
    """(the equalized net, per block the ratio of widest to narrowest channel range before)."""
    config = net.config
    out = dict(net.tensors)
    spread: dict[str, float] = {}
    if config.family != "kosumi":
        return net, spread
    for i in range(config.blocks):
        p = f"blocks.{i}"
        st = stats.get(f"{p}.conv1:relu")
        if st is None or st.chan_max is None:
            continue
        a = np.maximum(st.chan_max.astype(np.float64), 1e-6)
        w2 = out[f"{p}.conv2.weight"].astype(np.float64)
        w = np.maximum(np.abs(w2).max(axis=(0, 2, 3)), 1e-9)
        s = np.clip(np.sqrt(a / w), MIN_SCALE, MAX_SCALE)
        s /= np.exp(np.mean(np.log(s)))  # keep the overall magnitude
        spread[p] = float(a.max() / a.min())
        out[f"{p}.conv1.weight"] = out[f"{p}.conv1.weight"] / s[:, None, None, None]
        out[f"{p}.conv1.bias"] = out[f"{p}.conv1.bias"] / s
        out[f"{p}.conv2.weight"] = w2 * s[None, :, None, None]
    return FoldedNet(config, {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}), spread


def equalize_stream(net: FoldedNet, stats: dict[str, ValueStats], balance: float = 0.5
                    ) -> tuple[FoldedNet, float]:
    """The same rewrite for the residual stream (kosumi nets): every tensor of the stream (the
    stem's output and each block's) is quantized per tensor, and its channel c can be divided by
    s_c throughout -- the stem's and every second convolution's output rows divided, every
    reader's input columns (each block's first convolution, the heads' convolutions) multiplied
    -- because the skip adds and ReLUs commute with it. s_c = a_c^b * r_c^(b-1) up to a common
    factor, a_c the channel's largest range over the stream, r_c the largest reader weight of it,
    b = ``balance`` (1: equal activation ranges; 0.5: DFQ's balance). Returns (the net, the
    ratio of widest to narrowest channel before)."""
    config, folded = net.config, net.tensors
    if config.family != "kosumi":
        return net, 1.0
    names = ["stem:relu"] + [f"blocks.{i}:relu" for i in range(config.blocks)]
    ranges = [m for m in (stats[n].chan_max for n in names if n in stats) if m is not None]
    if not ranges:
        return net, 1.0
    a = np.maximum(np.max(np.stack(ranges), axis=0).astype(np.float64), 1e-6)
    readers = [f"blocks.{i}.conv1" for i in range(config.blocks)] + ["policy_conv", "value_conv"]
    writers = ["input_conv", "global_linear"] + [f"blocks.{i}.conv2" for i in range(config.blocks)]
    r = np.max(np.stack([np.abs(folded[f"{n}.weight"]).max(axis=tuple(
        d for d in range(folded[f"{n}.weight"].ndim) if d != 1)) for n in readers
        if f"{n}.weight" in folded]), axis=0).astype(np.float64)
    s = a ** balance * np.maximum(r, 1e-9) ** (balance - 1.0)
    s = np.clip(s / np.exp(np.mean(np.log(s))), MIN_SCALE, MAX_SCALE)
    out = {k: v.astype(np.float64) for k, v in folded.items()}
    for n in writers:
        if f"{n}.weight" in out:
            w = out[f"{n}.weight"]
            out[f"{n}.weight"] = w / s.reshape((-1,) + (1,) * (w.ndim - 1))
            out[f"{n}.bias"] = out[f"{n}.bias"] / s
    for n in readers:
        if f"{n}.weight" in out:
            w = out[f"{n}.weight"]
            out[f"{n}.weight"] = w * s.reshape((1, -1) + (1,) * (w.ndim - 2))
    return (FoldedNet(config, {k: v.astype(np.float32) for k, v in out.items()}),
            float(a.max() / a.min()))


def weight_bias_correction(w: np.ndarray, wq_float: np.ndarray, mean_in: np.ndarray) -> np.ndarray:
    """The bias shift sum (W_q - W) * E[x] per output channel ([O]; conv weights [O, I, k, k] or
    dense [O, I]; ``mean_in`` [I])."""
    diff = wq_float.astype(np.float64) - w.astype(np.float64)
    if diff.ndim == 4:
        diff = diff.sum(axis=(2, 3))
    return diff @ mean_in.astype(np.float64)
