"""The weights of any net as pictures: one figure per question a person asks of them.

``net_view(path)`` reads any model with tensors (a student, a quantized student, KataGo's or
Leela Zero's teacher, a pack) into the layers of its inference graph (``nets.graph``), in float
(the batch norms folded, ``nets.fold``; a quantized layer's int8 weights times their scales)
and, for int8 layers, the integers themselves. The figures (PNG bytes, matplotlib's Agg canvas,
no display):

- ``layer_figure``: a k x k convolution's filters tiled, output channels down, input channels
  across; a 1x1 convolution or a dense layer as its matrix; its bias below;
- ``first_layer_figure``: the first convolution's filters grouped by input feature plane (what
  each feature contributes to each channel);
- ``histogram_figure``: every layer's weight histogram; for int8 layers over the integer grid
  with the clipping thresholds (+-weight_max) marked;
- ``scales_figure``: the per-output-channel weight scales of the int8 layers;
- ``activations_figure``: each value's range over calibration positions, with the scheme's
  clipping range for a quantized net;
- ``sensitivity_figure``: the quantize report's per-layer SQNR, layers kept in float marked.

Every image uses a diverging colour map centred at zero with a colour bar, titles carry the
layer's name and shape, axes are labelled, and the size is capped (a few hundred KB).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kosumi.nets.config import NetConfig
from kosumi.nets.fold import FoldedNet, fold
from kosumi.nets.graph import WEIGHTED_OPS, inference_graph

CMAP = "RdBu_r"


@dataclass
class LayerView:
    """One layer with weights, in float and (int8 layers) as stored."""

    name: str
    op: str  # "conv" | "linear" | "affine"
    weight: np.ndarray  # float, [O, I, k, k] / [O, I] / [C] (affine scale)
    bias: np.ndarray | None
    mode: str = "float"  # "int8" | "float"
    qweight: np.ndarray | None = None  # int8, for int8 layers
    weight_scale: np.ndarray | None = None  # [O], for int8 layers
    first: bool = False  # reads the input planes

    @property
    def shape(self) -> list[int]:
        return list(self.weight.shape)


@dataclass
class NetView:
    config: NetConfig
    layers: list[LayerView]
    scheme: Any = None  # nets.quant.QuantScheme for a quantized net

    def layer(self, name: str) -> LayerView | None:
        return next((x for x in self.layers if x.name == name), None)


def net_view(config: NetConfig, tensors: dict[str, np.ndarray]) -> NetView:
    """The layers of a net in memory (see the module docstring)."""
    from kosumi.nets.quant import integer_plan, scheme_of

    scheme = scheme_of(config) if config.quantized else None
    folded = tensors if config.quantized else fold(config, tensors).tensors
    graph = inference_graph(config)
    acts = dict(scheme.acts) if scheme is not None else {}
    if scheme is not None and scheme.bits == 8:
        for out, src in integer_plan(graph, scheme.layers, scheme.acts).shared.items():
            if src in acts:
                acts.setdefault(out, acts[src])
    layers = []
    for n in graph.nodes:
        if n.op in WEIGHTED_OPS:
            w = folded[f"{n.name}.weight"]
            b = folded.get(f"{n.name}.bias")
            first = n.inputs[0] == "planes"
            if w.dtype == np.int8:
                sw = folded[f"{n.name}.weight_scale"].astype(np.float64)
                wf = w * sw.reshape((-1,) + (1,) * (w.ndim - 1))
                sx = acts[n.inputs[0]].scale if n.inputs[0] in acts else 1.0
                bf = None if b is None else b.astype(np.float64) * sx * sw
                layers.append(LayerView(n.name, n.op, wf.astype(np.float32),
                                        None if bf is None else bf.astype(np.float32), "int8",
                                        w, sw.astype(np.float32), first=first))
            else:
                layers.append(LayerView(n.name, n.op, np.asarray(w, np.float32),
                                        None if b is None else np.asarray(b, np.float32),
                                        first=first))
        elif n.op == "affine":
            layers.append(LayerView(n.name, "affine",
                                    np.asarray(folded[f"{n.name}.scale"], np.float32),
                                    np.asarray(folded[f"{n.name}.bias"], np.float32)))
    return NetView(config=config, layers=layers, scheme=scheme)


def float_net(view: NetView, config: NetConfig) -> FoldedNet:
    """The view's net in float (int8 layers dequantized): what a float inference graph of the
    same net runs on. ``config``: the net's (a quantized net's too)."""
    out: dict[str, np.ndarray] = {}
    for x in view.layers:
        key = "scale" if x.op == "affine" else "weight"
        out[f"{x.name}.{key}"] = x.weight
        out[f"{x.name}.bias"] = x.bias if x.bias is not None \
            else np.zeros(x.weight.shape[0], np.float32)
    return FoldedNet(replace(config, quantization={}), out)


def diff_view(view: NetView, ref: NetView) -> tuple[NetView, list[str]]:
    """``view`` minus ``ref``, layer by layer where both have the layer with the same kind and
    shape (in float), and a note for every layer that cannot be compared."""
    notes = []
    layers = []
    for x in view.layers:
        r = ref.layer(x.name)
        if r is None:
            notes.append(f"layer {x.name}: not in the reference, not compared")
        elif r.op != x.op or r.weight.shape != x.weight.shape:
            notes.append(f"layer {x.name}: {x.op} {x.shape} here, {r.op} {r.shape} in the "
                         "reference, not compared")
        else:
            bias = None
            if x.bias is not None and r.bias is not None and x.bias.shape == r.bias.shape:
                bias = x.bias - r.bias
            layers.append(LayerView(x.name, x.op, x.weight - r.weight, bias))
    mine = {x.name for x in view.layers}
    notes.extend(f"layer {r.name}: only in the reference, not compared" for r in ref.layers
                 if r.name not in mine)
    if not layers:
        notes.insert(0, "the reference shares no layer of the same shape: no difference "
                        f"plots ({view.config.arch} against {ref.config.arch})")
    return NetView(config=view.config, layers=layers), notes


# ---------------------------------------------------------------------------- drawing helpers
def _figure(w: float, h: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _cmap() -> Any:
    import matplotlib

    return matplotlib.colormaps[CMAP].with_extremes(bad="#d8d8d8")  # tile separators


def _limit(a: np.ndarray) -> float:
    """The colour scale's end: the 99.5th percentile of |a| (the max for small tensors), so
    that a few outliers do not wash out every other weight; the colour bar marks the clip."""
    m = np.abs(a[np.isfinite(a)])
    if m.size == 0:
        return 1.0
    top = float(np.percentile(m, 99.5)) if m.size >= 1000 else float(m.max())
    return top if top > 0 else (float(m.max()) or 1.0)


def tile_filters(w: np.ndarray) -> np.ndarray:
    """[O, I, k, k] -> an image of O x I tiles of k x k, one NaN pixel between tiles."""
    o, i, k, _ = w.shape
    img = np.full((o * (k + 1) - 1, i * (k + 1) - 1), np.nan, dtype=np.float32)
    for a in range(o):
        for b in range(i):
            img[a * (k + 1):a * (k + 1) + k, b * (k + 1):b * (k + 1) + k] = w[a, b]
    return img


def _image(fig: Any, ax: Any, img: np.ndarray, limit: float, label: str) -> None:
    im = ax.imshow(img, cmap=_cmap(), vmin=-limit, vmax=limit, interpolation="nearest",
                   aspect="auto")
    clipped = np.nanmax(np.abs(img)) > limit
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label=label,
                 extend="both" if clipped else "neither")


# ---------------------------------------------------------------------------- figures
def layer_figure(layer: LayerView, title_prefix: str = "", label: str = "weight") -> bytes:
    """A layer's weights as an image and its bias as bars (see the module docstring)."""
    if layer.op == "affine":
        return _affine_figure(layer, title_prefix)
    w = layer.weight
    kind = {"conv": "conv", "linear": "dense"}[layer.op]
    if layer.op == "conv" and w.shape[2] > 1:
        img = tile_filters(w)
        xlabel, ylabel = f"input channel (each tile {w.shape[2]}x{w.shape[3]})", "output channel"
        extent = (w.shape[1], w.shape[0])
    else:
        img = w.reshape(w.shape[0], -1)
        xlabel, ylabel, extent = "input", "output", (img.shape[1], img.shape[0])
    aspect = img.shape[0] / max(1, img.shape[1])
    width = 9.0
    height = min(9.0, max(2.6, width * aspect * 0.8)) + (1.6 if layer.bias is not None else 0)
    fig = _figure(width, height)
    grid = fig.add_gridspec(2 if layer.bias is not None else 1, 1,
                            height_ratios=[4, 1] if layer.bias is not None else [1])
    ax = fig.add_subplot(grid[0])
    _image(fig, ax, img, _limit(w), label)
    mode = f", {layer.mode}" if layer.mode == "int8" else ""
    ax.set_title(f"{title_prefix}{layer.name}: {kind} {list(w.shape)}{mode}", fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    step = max(1, extent[0] // 16)
    if layer.op == "conv" and w.shape[2] > 1:
        k = w.shape[2] + 1
        ax.set_xticks([t * k + k // 2 for t in range(0, w.shape[1], step)],
                      [str(t) for t in range(0, w.shape[1], step)])
        ax.set_yticks([t * k + k // 2 for t in range(0, w.shape[0], max(1, w.shape[0] // 16))],
                      [str(t) for t in range(0, w.shape[0], max(1, w.shape[0] // 16))])
    if layer.bias is not None:
        bx = fig.add_subplot(grid[1])
        _bars(bx, layer.bias.reshape(-1), "bias" if label == "weight" else "bias diff.")
        bx.set_xlabel("output channel")
    fig.tight_layout()
    return _png(fig)


def _bars(ax: Any, values: np.ndarray, ylabel: str) -> None:
    ax.bar(np.arange(values.size), values, width=1.0,
           color=np.where(values >= 0, "#b2182b", "#2166ac"))
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_xlim(-0.5, values.size - 0.5)
    ax.set_ylabel(ylabel)


def _affine_figure(layer: LayerView, title_prefix: str) -> bytes:
    """A per-channel affine (KataGo's folded pre-activation batch norms): scale and bias as
    bars, channel by channel."""
    fig = _figure(9.0, 3.6)
    ax = fig.add_subplot(2, 1, 1)
    _bars(ax, layer.weight.reshape(-1), "scale")
    ax.set_title(f"{title_prefix}{layer.name}: per-channel affine y = scale * x + bias "
                 f"[{layer.weight.size}]", fontsize=10)
    bx = fig.add_subplot(2, 1, 2, sharex=ax)
    if layer.bias is not None:
        _bars(bx, layer.bias.reshape(-1), "bias")
    bx.set_xlabel("channel")
    fig.tight_layout()
    return _png(fig)


def first_layer_figure(layer: LayerView, plane_names: tuple[str, ...]) -> bytes:
    """The first convolution's filters, one panel per input feature plane: each panel tiles
    that plane's k x k filter of every output channel."""
    w = layer.weight
    o, planes, k, _ = w.shape
    cols_out = math.ceil(math.sqrt(o))
    rows_out = math.ceil(o / cols_out)
    ncols = min(6, planes)
    nrows = math.ceil(planes / ncols)
    fig = _figure(2.3 * ncols + 1.2, 2.4 * nrows + 0.6)
    limit = _limit(w)
    im = None
    for p in range(planes):
        ax = fig.add_subplot(nrows, ncols, p + 1)
        img = np.full((rows_out * (k + 1) - 1, cols_out * (k + 1) - 1), np.nan, np.float32)
        for c in range(o):
            r, q = divmod(c, cols_out)
            img[r * (k + 1):r * (k + 1) + k, q * (k + 1):q * (k + 1) + k] = w[c, p]
        im = ax.imshow(img, cmap=_cmap(), vmin=-limit, vmax=limit, interpolation="nearest")
        name = plane_names[p] if p < len(plane_names) else f"plane {p}"
        ax.set_title(f"{p}: {name}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    if im is not None:
        fig.colorbar(im, ax=fig.axes, fraction=0.02, pad=0.01, label="weight")
    fig.suptitle(f"{layer.name}: filters by input plane, {o} output channels each "
                 f"({cols_out} per row), {k}x{k}", fontsize=10)
    return _png(fig)


def histogram_figure(view: NetView, title: str = "weight histograms") -> bytes:
    """Every layer's weight histogram (int8 layers on the integer grid, clip lines marked)."""
    layers = [x for x in view.layers if x.op != "affine"]
    ncols = 4
    nrows = max(1, math.ceil(len(layers) / ncols))
    fig = _figure(12, 2.1 * nrows + 0.6)
    wmax = view.scheme.weight_max if view.scheme is not None and view.scheme.bits == 8 else None
    for i, layer in enumerate(layers):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        if layer.qweight is not None and wmax:
            q = layer.qweight.reshape(-1).astype(np.int64)
            ax.hist(q, bins=np.arange(-wmax - 0.5, wmax + 1.5), color="#4d4d4d",
                    histtype="stepfilled")
            for x in (-wmax, wmax):
                ax.axvline(x, color="#b2182b", linestyle="--", linewidth=0.8)
            ax.set_xlabel(f"int8 value (clip at +-{wmax})", fontsize=7)
        else:
            ax.hist(layer.weight.reshape(-1), bins=80, color="#4d4d4d", histtype="stepfilled")
            ax.set_xlabel("weight", fontsize=7)
        ax.set_title(f"{layer.name} {layer.shape}", fontsize=7)
        ax.tick_params(labelsize=6)
        if layer.weight.size >= 1000:  # the tails of big layers on a log scale
            ax.set_yscale("log")
    fig.suptitle(title + (" (int8 layers: the integer grid; dashed: the "
                                        "clipping thresholds)" if wmax else ""), fontsize=10)
    fig.tight_layout()
    return _png(fig)


def scales_figure(view: NetView) -> bytes | None:
    """Per-output-channel weight scales of the int8 layers (None for a float net)."""
    layers = [x for x in view.layers if x.weight_scale is not None]
    if not layers:
        return None
    ncols = 4
    nrows = math.ceil(len(layers) / ncols)
    fig = _figure(12, 1.9 * nrows + 0.6)
    for i, layer in enumerate(layers):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        s = layer.weight_scale
        assert s is not None  # the layers above
        ax.bar(np.arange(s.size), s, width=1.0, color="#4393c3")
        ax.set_title(layer.name, fontsize=7)
        ax.set_xlabel("output channel", fontsize=6)
        ax.set_ylabel("scale", fontsize=6)
        ax.tick_params(labelsize=6)
    fig.suptitle("int8 weight scales per output channel (weight = int8 x scale)", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def activations_figure(stats: dict[str, Any], scheme: Any = None) -> bytes:
    """Each value's range over the calibration positions (min..max, the 99.99th percentile of
    the magnitudes) and, for a quantized net, the clipping range its scheme uses."""
    names = [n for n in stats if n not in ("planes", "globals")]
    fig = _figure(10, 0.22 * len(names) + 1.4)
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(names))
    lo = np.array([stats[n].lo for n in names])
    hi = np.array([stats[n].hi for n in names])
    p = np.array([float(np.percentile(stats[n].magnitudes(), 99.99)) for n in names])
    ax.barh(y, hi - lo, left=lo, color="#d1e5f0", edgecolor="#4393c3", label="min .. max")
    ax.scatter(p, y, marker="|", color="#2166ac", s=60, label="99.99th percentile |x|")
    if scheme is not None and getattr(scheme, "acts", None):
        labelled = False
        for i, n in enumerate(names):
            a = scheme.acts.get(n)
            if a is not None:
                top = (a.qmax - a.zero_point) * a.scale
                bottom = (a.qmin - a.zero_point) * a.scale
                ax.plot([bottom, top], [i, i], color="#b2182b", linewidth=2,
                        label=None if labelled else "int8 range of the scheme")
                labelled = True
    ax.set_yticks(y, names, fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1.0)  # heads' logits and scores dwarf the trunk's
    ax.set_xlabel("activation value (linear within +-1, logarithmic beyond)")
    ax.axvline(0, color="black", linewidth=0.5)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("activation ranges over the calibration positions", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def sensitivity_figure(rows: list[dict[str, Any]]) -> bytes | None:
    """The quantize report's per-layer sensitivity (None when the net has none)."""
    if not rows:
        return None
    names = [r["name"] for r in rows]
    sqnr = np.array([min(float(r["sqnr_db"]), 80.0) for r in rows])
    kept = [bool(r.get("kept_float")) for r in rows]
    fig = _figure(10, 0.22 * len(rows) + 1.4)
    ax = fig.add_subplot(1, 1, 1)
    ax.barh(np.arange(len(rows)), sqnr, color=["#b2182b" if k else "#4393c3" for k in kept])
    ax.set_yticks(np.arange(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("output SQNR with only this layer quantized (dB; capped at 80)")
    ax.set_title("quantization sensitivity per layer (red: kept in float)", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def zeroing_figure(rows: list[dict[str, Any]]) -> bytes:
    """The size-vs-agreement curve of ``quantize.zeroing``: the pack's bytes against the
    top-1 agreement (per board size) and the policy KL with the net as given, one point per
    threshold."""
    fig = _figure(10, 4.2)
    ax = fig.add_subplot(1, 2, 1)
    bx = fig.add_subplot(1, 2, 2)
    x = np.array([r["pack_bytes"] for r in rows]) / 1000.0
    boards = list(rows[0]["agreement"]) if rows else []
    # at most 3 boards
    for board, colour in zip(boards, ("#2166ac", "#b2182b", "#1b7837"), strict=False):
        ax.plot(x, [100 * r["agreement"][board]["top1"] for r in rows], "o-", color=colour,
                label=f"{board} top-1")
        bx.plot(x, [r["agreement"][board]["policy_kl"] for r in rows], "o-", color=colour,
                label=f"{board} policy KL")
    if boards:  # each point's threshold and share of zeros, beside the first board's KL
        for r, xi in zip(rows, x, strict=True):
            bx.annotate(f"T={r['threshold']} ({100 * r['zeroed']:.0f}%)",
                        (xi, r["agreement"][boards[0]]["policy_kl"]), fontsize=6,
                        xytext=(-4, 6), textcoords="offset points", ha="right")
    ax.set_xlabel("pack size (KB)")
    ax.set_ylabel("top-1 agreement with the net as given (%)")
    bx.set_xlabel("pack size (KB)")
    bx.set_ylabel("policy KL (nats)")
    for a in (ax, bx):
        a.invert_xaxis()  # smaller files to the right
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle("zeroing the int8 weights with |q| <= T (biases corrected): size against "
                 "agreement; T=k (share of weights zeroed)",
                 fontsize=10)
    fig.tight_layout()
    return _png(fig)
