"""Batch-norm folding: a net's tensors -> the tensors of its inference graph, no BN left to run.

``fold_batchnorm(config, tensors)`` returns float32 tensors named by the layers of
``kosumi.nets.graph.inference_graph``: every convolution and dense layer gets a ``.weight`` and a
``.bias`` (zeros where it had none), with the batch norm that follows it folded in exactly
(y = x * s + t with s = gamma / sqrt(var + eps), t = beta - mean * s, so W' = W * s and
b' = b * s + t per output channel). It is the one place where folding happens: ONNX export,
the numpy backend, quantization and the weight plots all start from its output.

kosumi nets (heads ``conv`` and ``lz``):
- the stem: ``input_conv`` and ``global_linear`` (the global inputs, added as a per-channel bias)
  both feed ``input_bn``, so both are scaled by its s and the conv takes its t;
- each block's ``conv1``/``conv2`` take ``bn1``/``bn2``; the head convs take their BNs;
- the score-lead layer takes the factor 20 (``resnet.SCORE_SCALE``), so the graph needs no
  multiply;
- an ``lz`` head runs in Leela Zero's frame (its input flipped vertically, its point logits
  flipped back). Folding moves the flip into the weights: every 3x3 kernel is flipped
  vertically and the dense layers' point rows and columns are reordered, so the folded graph
  runs in kosumi's frame with no flip at all (convolution commutes with the flip).

KataGo nets (head ``katago``): its batch norms that follow a convolution (a block's middle and
global-pooling norms, the policy and value head norms) are folded into it; the pre-activation
norms of each block and the trunk tip sit on the residual stream and stay as per-channel
``affine`` layers (``.scale``, ``.bias``), as do a nested bottleneck block's pre and post norms;
a transformer block's RMS-norm weight is folded into the 1x1 projections that read the norm (its
input channels scaled), and learned rotary frequencies are copied as they are.

``FoldedNet`` is the result as a type: a float net's config and its folded tensors, what every
step after folding takes and gives (equalisation, refit, QAT, PTQ, the numpy backend's float
reference, ONNX export, the weight plots) instead of a loose dict beside a config.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.config import LZ_BOARD_SIZE, NetConfig
from kosumi.nets.graph import Graph, graph_tensors, inference_graph
from kosumi.nets.katago_layout import block_specs, walk

BN_EPS = 1e-5  # kosumi's BatchNorm eps (nets.resnet.BN_EPS; kept here so folding needs no torch)
SCORE_SCALE = 20.0  # nets.resnet.SCORE_SCALE


def _f64(t: dict[str, np.ndarray], name: str) -> np.ndarray:
    try:
        return np.asarray(t[name], dtype=np.float64)
    except KeyError:
        raise KosumiError(f"cannot fold the net: tensor {name!r} is missing") from None


def _bn_affine(t: dict[str, np.ndarray], bn: str) -> tuple[np.ndarray, np.ndarray]:
    """(s, t) of a BatchNorm2d's state: y = x * s + t."""
    s = _f64(t, f"{bn}.weight") / np.sqrt(_f64(t, f"{bn}.running_var") + BN_EPS)
    return s, _f64(t, f"{bn}.bias") - _f64(t, f"{bn}.running_mean") * s


def _scaled(w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Scale a conv [O, ...] or dense [O, I] weight's output channels by s [O]."""
    return w * s.reshape((-1,) + (1,) * (w.ndim - 1))


def _bias(t: dict[str, np.ndarray], name: str, out_channels: int) -> np.ndarray:
    b = t.get(f"{name}.bias")
    return np.zeros(out_channels) if b is None else np.asarray(b, dtype=np.float64)


def fold_batchnorm(config: NetConfig, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The folded float32 tensors of a net (see the module docstring). ``tensors`` are the
    net's own (a checkpoint's); KosumiError if one is missing or not floating point."""
    for name, v in tensors.items():
        if np.asarray(v).dtype.kind != "f" and name not in config.extra_tensors:
            raise KosumiError(f"cannot fold the net: tensor {name!r} is {np.asarray(v).dtype}, "
                              "not floating point (an already quantized net?)")
    out = _fold_katago(config, tensors) if config.family == "katago" \
        else _fold_kosumi(config, tensors)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


@dataclass(frozen=True)
class FoldedNet:
    """A float net with nothing left to fold: ``config`` (never a quantized one) and the float
    tensors of its inference graph, named by its layers (``NAME.weight``, ``NAME.bias``,
    ``NAME.scale``). Made by ``fold`` from a net's own tensors; a step that rewrites tensors
    gives a new one (``with_tensors``)."""

    config: NetConfig
    tensors: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        if self.config.quantized:
            raise KosumiError("a folded net is a float net: this config carries a quantization "
                              "scheme")

    @cached_property
    def graph(self) -> Graph:
        return inference_graph(self.config)

    def check(self, source: str) -> None:
        """Every tensor the inference graph reads is there: KosumiError naming the first one
        missing (``source``: what the net is, for the message)."""
        missing = next((t for t in graph_tensors(self.graph) if t not in self.tensors), None)
        if missing is not None:
            raise KosumiError(f"{source}: tensor {missing!r} is missing (the folded graph "
                              "reads it)")

    def with_tensors(self, tensors: dict[str, np.ndarray]) -> FoldedNet:
        """The same net with (some of) its tensors replaced."""
        return FoldedNet(self.config, {**self.tensors, **tensors})

    def weight(self, layer: str) -> np.ndarray:
        return self.tensors[f"{layer}.weight"]

    def bias(self, layer: str) -> np.ndarray:
        return self.tensors[f"{layer}.bias"]


def fold(config: NetConfig, tensors: dict[str, np.ndarray]) -> FoldedNet:
    """A float net's ``FoldedNet`` (``fold_batchnorm``)."""
    return FoldedNet(config, fold_batchnorm(config, tensors))


# ---------------------------------------------------------------------------- kosumi nets
def _fold_conv_bn(t: dict[str, np.ndarray], out: dict[str, np.ndarray], conv: str,
                  bn: str) -> None:
    w = _f64(t, f"{conv}.weight")
    s, shift = _bn_affine(t, bn)
    out[f"{conv}.weight"] = _scaled(w, s)
    out[f"{conv}.bias"] = _bias(t, conv, w.shape[0]) * s + shift


def _copy(t: dict[str, np.ndarray], out: dict[str, np.ndarray], name: str) -> None:
    w = _f64(t, f"{name}.weight")
    out[f"{name}.weight"] = w
    out[f"{name}.bias"] = _bias(t, name, w.shape[0])


def _fold_kosumi(config: NetConfig, t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    s, shift = _bn_affine(t, "input_bn")
    out["input_conv.weight"] = _scaled(_f64(t, "input_conv.weight"), s)
    out["input_conv.bias"] = _bias(t, "input_conv", s.size) * s + shift
    if "global_linear.weight" in t:
        out["global_linear.weight"] = _scaled(_f64(t, "global_linear.weight"), s)
        out["global_linear.bias"] = np.zeros(s.size)
    for i in range(config.blocks):
        _fold_conv_bn(t, out, f"blocks.{i}.conv1", f"blocks.{i}.bn1")
        _fold_conv_bn(t, out, f"blocks.{i}.conv2", f"blocks.{i}.bn2")
    _fold_conv_bn(t, out, "policy_conv", "policy_bn")
    _fold_conv_bn(t, out, "value_conv", "value_bn")
    if config.head == "lz":
        for name in ("policy_fc", "value_fc1", "value_fc2"):
            _copy(t, out, name)
        _lz_to_kosumi_frame(config, out)
        return out
    for name in ("policy_point", "policy_pass", "value_fc1", "value_fc2"):
        _copy(t, out, name)
    if config.score_lead:
        _copy(t, out, "score_fc")
        out["score_fc.weight"] = out["score_fc.weight"] * SCORE_SCALE
        out["score_fc.bias"] = out["score_fc.bias"] * SCORE_SCALE
    if config.ownership:
        _copy(t, out, "ownership_conv")
    return out


def _lz_to_kosumi_frame(config: NetConfig, out: dict[str, np.ndarray]) -> None:
    """Move an lz head's vertical flips into its weights (see the module docstring)."""
    n = LZ_BOARD_SIZE
    for name, w in list(out.items()):
        if name.endswith(".weight") and w.ndim == 4 and w.shape[2] > 1:
            out[name] = w[:, :, ::-1, :]  # conv(flip(x), w) = flip(conv(x, flipped w))
    rows = np.arange(n * n).reshape(n, n)[::-1].reshape(-1)  # kosumi point -> LZ point
    # the policy fc reads 2 channel-major maps and writes LZ-ordered points, then pass
    pol_w, pol_b = out["policy_fc.weight"], out["policy_fc.bias"]
    cols = np.concatenate([c * n * n + rows for c in range(pol_w.shape[1] // (n * n))])
    order = np.concatenate([rows, [n * n]])
    out["policy_fc.weight"] = pol_w[order][:, cols]
    out["policy_fc.bias"] = pol_b[order]
    out["value_fc1.weight"] = out["value_fc1.weight"][:, rows]


# ---------------------------------------------------------------------------- KataGo nets
def _fold_katago(config: NetConfig, t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}

    def conv_affine(conv: str, affine: str, extra_linear: str | None = None) -> None:
        s, shift = _f64(t, f"{affine}.scale"), _f64(t, f"{affine}.bias")
        out[f"{conv}.weight"] = _scaled(_f64(t, f"{conv}.weight"), s)
        out[f"{conv}.bias"] = shift
        if extra_linear is not None:  # a pooled bias added before the norm: scaled alike
            out[f"{extra_linear}.weight"] = _scaled(_f64(t, f"{extra_linear}.weight"), s)
            out[f"{extra_linear}.bias"] = np.zeros(s.size)

    def plain(name: str) -> None:
        _copy(t, out, name)

    def affine(name: str) -> None:
        out[f"{name}.scale"] = _f64(t, f"{name}.scale")
        out[f"{name}.bias"] = _f64(t, f"{name}.bias")

    def point_scaled(name: str, norm: str) -> None:  # a 1x1 conv reading a weighted rms norm
        w = _f64(t, f"{name}.weight") * _f64(t, f"{norm}.scale").reshape(1, -1, 1, 1)
        out[f"{name}.weight"] = w
        out[f"{name}.bias"] = np.zeros(w.shape[0])

    plain("conv1")
    plain("global_in")
    for p, spec, _ in walk(block_specs(config.katago)):
        kind = spec["kind"]
        if kind in ("ordinary", "gpool"):
            affine(f"{p}.pre")
            if kind == "gpool":
                conv_affine(f"{p}.gconv", f"{p}.gbn")
                conv_affine(f"{p}.conv1", f"{p}.mid", f"{p}.gmul")
            else:
                conv_affine(f"{p}.conv1", f"{p}.mid")
            plain(f"{p}.conv2")
        elif kind == "nested":
            affine(f"{p}.pre")
            plain(f"{p}.conv_in")
            affine(f"{p}.post")
            plain(f"{p}.conv_out")
        elif kind == "attention":
            for w in ("q", "k", "v"):
                point_scaled(f"{p}.{w}", f"{p}.norm")
            plain(f"{p}.out")
            if spec["rope"] == "learned":
                out[f"{p}.rope_freqs"] = _f64(t, f"{p}.rope_freqs")
        else:
            point_scaled(f"{p}.w1", f"{p}.norm")
            if spec["gated"]:
                point_scaled(f"{p}.gate", f"{p}.norm")
            plain(f"{p}.w2")
    affine("tip")
    conv_affine("g1", "g1_bn")
    conv_affine("p1", "p1_bn", "g1_bias")
    passes = ("g1_pass", "pass2") if config.katago.get("pass_hidden", 0) else ("g1_pass",)
    for name in ("p2", *passes, "v2", "v3", "sv3", "own"):
        plain(name)
    conv_affine("v1", "v1_bn")
    return out
