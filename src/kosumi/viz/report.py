"""``kosumi viz MODEL --out DIR``: every picture of a net's weights in one self-contained page.

``build_report(model, ref=None, calib=None)`` reads any model with tensors (``nets.formats``:
a student, a quantized student, a pack, KataGo's or Leela Zero's teacher), draws the figures
of ``viz.weights`` and gathers the summary: the description (``nets.inspect``), the bytes of
the net as a safetensors checkpoint, as ONNX and as a kosumi pack, the codec x layout table of
``export.compressibility`` and, with calibration positions, the activation ranges and the
agreement (``runtime.agreement``) of the net with ``ref``, or, for a quantized net without
one, with its own weights run in float (the cost of quantizing the activations). With ``ref``
it also draws the difference of every layer the two nets share (same name and shape); layers
that cannot be compared are listed as warnings. With ``strength`` (a size-vs-strength table,
``engine.strength``) it draws strength against file size, this net among the others.

``ensure_writable(out)`` says, before anything is drawn, whether ``out`` can be written;
``write_report(report, out)`` then writes ``figures/*.png`` and ``report.html``: one file, the
images embedded as data URIs, no scripts or fonts fetched, a line of JavaScript that counts the
images that decoded and puts "loaded K/N images" in the page (what the test reads in headless
Chromium). Every file is written atomically.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write, output_errors

Progress = Callable[[str], None]


@dataclass
class Figure:
    section: str
    name: str  # file stem in figures/
    title: str
    png: bytes
    caption: str = ""


@dataclass
class Report:
    model: str
    description: dict[str, Any]
    figures: list[Figure] = field(default_factory=list)
    sizes: dict[str, int | str] = field(default_factory=dict)
    compress_summary: dict[str, Any] = field(default_factory=dict)
    compress_rows: list[Any] = field(default_factory=list)
    agreement: dict[str, Any] | None = None
    agreement_with: str = ""
    zeroing: list[dict[str, Any]] = field(default_factory=list)
    strength: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    ref: str | None = None


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise KosumiError("kosumi viz draws with matplotlib, which is not installed: "
                          "pip install 'kosumi[viz]'") from None


def ensure_writable(out: str | os.PathLike[str]) -> Path:
    """KosumiError unless ``out`` is a folder, or can become one, that this process may write
    in; creates nothing (``write_report`` does, once everything is drawn)."""
    out = Path(out)
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "--out" if probe == out else f"--out: {probe}"
        raise KosumiError(f"{out}: cannot write the report there ({what} is a file, not a "
                          "folder)")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise KosumiError(f"{out}: cannot write the report there ({probe} is not writable)")
    return out


def _read(path: str | os.PathLike[str]) -> Any:
    from kosumi.nets.formats import read_net

    ckpt = read_net(path, "plot")
    if not ckpt.tensors:
        raise KosumiError(f"{path}: the file holds no tensors to plot")
    return ckpt


# ---------------------------------------------------------------------------- the report
def build_report(model: str | os.PathLike[str], ref: str | os.PathLike[str] | None = None,
                 calib: str | os.PathLike[str] | None = None, positions: int = 256,
                 progress: Progress | None = None,
                 strength: str | os.PathLike[str] | None = None) -> Report:
    """Everything the page shows, in memory (see the module docstring)."""
    from kosumi.engine.strength import read_strength_table
    from kosumi.nets.features import get_feature_set
    from kosumi.nets.inspect import describe_model
    from kosumi.viz import weights as W

    _require_matplotlib()
    tick = progress or (lambda _msg: None)
    table = None if strength is None else read_strength_table(strength)  # fail before drawing
    ckpt = _read(model)
    cfg = ckpt.config
    view = W.net_view(cfg, ckpt.tensors)
    report = Report(model=str(model), description=describe_model(model),
                    ref=None if ref is None else str(ref))
    figs = report.figures

    # layers
    plane_names = get_feature_set(cfg.features).plane_names
    first = next((x for x in view.layers if x.first), None)
    for layer in view.layers:
        tick(f"drawing {layer.name}")
        figs.append(Figure("layers", _stem("layer", layer.name),
                           f"{layer.name} {layer.shape}", W.layer_figure(layer)))
        if layer is first and layer.op == "conv":
            figs.append(Figure("layers", _stem("first", layer.name),
                               f"{layer.name} by input plane",
                               W.first_layer_figure(layer, plane_names),
                               "What each input feature plane contributes to each channel."))
    tick("drawing histograms")
    figs.append(Figure("distributions", "histograms", "weight histograms",
                       W.histogram_figure(view)))
    scales = W.scales_figure(view)
    if scales is not None:
        figs.append(Figure("distributions", "scales", "int8 weight scales", scales))
    rows = view.scheme.info.get("sensitivity", []) if view.scheme is not None else []
    sens = W.sensitivity_figure(rows)
    if sens is not None:
        figs.append(Figure("distributions", "sensitivity", "quantization sensitivity", sens,
                           "Each layer quantized alone against the float net (the quantize "
                           "report's table)."))
    elif view.scheme is not None and view.scheme.bits == 8:
        report.warnings.append("no per-layer sensitivity in this file (a pack keeps only what "
                               "playing needs; plot the quantized checkpoint for it)")

    # the other net
    ref_view = None
    if ref is not None:
        tick("reading the reference")
        rck = _read(ref)
        ref_view = W.net_view(rck.config, rck.tensors)
        diff, notes = W.diff_view(view, ref_view)
        report.warnings.extend(notes)
        for layer in diff.layers:
            tick(f"drawing the difference of {layer.name}")
            figs.append(Figure("difference", _stem("diff", layer.name),
                               f"{layer.name}: model - ref",
                               W.layer_figure(layer, title_prefix="model - ref: ",
                                              label="model - ref")))
        if diff.layers:
            figs.append(Figure("difference", "diff-histograms", "histograms of the difference",
                               W.histogram_figure(diff, title="model - ref: weight differences")))

    if calib is not None:
        _with_positions(report, ckpt, view, model, ref, calib, positions, tick)
    if table is not None:
        import hashlib

        from kosumi.models import resolve_model_for_sizes
        from kosumi.viz.strength import strength_figure

        tick("the size-vs-strength curve")
        report.strength = table
        size = table.get("board_size")  # a model set: its net for the table's board
        mine = hashlib.sha256(resolve_model_for_sizes(model, [int(size)] if size else [])
                              .read_bytes()).hexdigest()
        figs.append(Figure("strength", "strength", "strength against size",
                           strength_figure(table, highlight=mine),
                           f"Each net's matches against {table.get('opponent')} "
                           f"({strength}); this net filled, where it is one of them."))
    _sizes(report, ckpt, tick)
    return report


def _with_positions(report: Report, ckpt: Any, view: Any, model: str | os.PathLike[str],
                    ref: str | os.PathLike[str] | None, calib: str | os.PathLike[str],
                    positions: int, tick: Progress) -> None:
    from kosumi.nets.features import get_feature_set
    from kosumi.quantize.calibration import check_sizes, collect_stats, read_calibration, spread
    from kosumi.runtime import NetEvaluator, load_evaluator
    from kosumi.runtime.agreement import agreement, evaluate_all
    from kosumi.runtime.numpy_backend import NumpyBackend
    from kosumi.viz import weights as W

    cfg = ckpt.config
    tick("reading the positions")
    states, dropped = check_sizes(read_calibration(calib, positions), cfg.board_sizes, str(calib))
    if dropped:
        report.warnings.append(f"{calib}: {dropped} positions of board sizes the net does not "
                               "play left out")
    int8 = cfg.own_precision == "int8"
    if int8:  # the same weights in float: every value unclipped
        float_weights = W.float_net(view, cfg)
        float_cfg, float_backend = float_weights.config, NumpyBackend.folded(float_weights)
    else:
        float_cfg, float_backend = cfg, NumpyBackend(cfg, ckpt.tensors)
    tick("activation ranges")
    stats = collect_stats(float_backend, get_feature_set(cfg.features), states)
    report.figures.append(Figure(
        "activations", "activations", "activation ranges",
        W.activations_figure(stats, view.scheme if int8 else None),
        f"Over {len(states)} positions of {calib}, the weights in float."))
    if int8:
        from kosumi.quantize.zeroing import zeroing_curve

        tick("the zeroing curve")
        report.zeroing = zeroing_curve(ckpt, spread(states, 128), progress=tick)
        report.figures.append(Figure(
            "zeroing", "zeroing", "size against agreement", W.zeroing_figure(report.zeroing),
            "kosumi quantize --zero T sets the int8 weights with |q| <= T to zero."))
    sizes = [s.size for s in states]
    got = load_evaluator(str(model), backend="numpy", cache=False)
    if ref is not None:
        tick("agreement with the reference")
        other = load_evaluator(str(ref), backend="numpy", cache=False)
        report.agreement_with = f"{ref} (the reference)"
    elif int8:
        tick("agreement with the float weights")
        other = NetEvaluator(float_backend, float_cfg, name="float")
        report.agreement_with = ("its own weights in float (what quantizing the activations "
                                 "costs)")
    else:
        return
    try:
        report.agreement = agreement(evaluate_all(other, states), evaluate_all(got, states),
                                     sizes)
    except KosumiError as e:
        report.warnings.append(f"agreement not measured: {e}")


def _sizes(report: Report, ckpt: Any, tick: Progress) -> None:
    from kosumi.export.compressibility import compressibility, summary, train_dictionary
    from kosumi.export.pack import pack_checkpoint

    cfg = ckpt.config
    try:
        from kosumi.nets.checkpoint import checkpoint_bytes

        report.sizes["safetensors"] = len(checkpoint_bytes(ckpt.tensors, cfg))
    except ImportError:
        report.sizes["safetensors"] = "needs safetensors (pip install 'kosumi[train]')"
    tick("exporting to ONNX")
    try:
        from kosumi.nets.onnx import onnx_bytes

        precision = cfg.own_precision or "fp32"
        report.sizes[f"onnx ({precision})"] = len(onnx_bytes(cfg, ckpt.tensors, precision,
                                                              check=False))
    except ImportError:
        report.sizes["onnx"] = "needs onnx (pip install 'kosumi[onnx]')"
    tick("the codec x layout table")
    tensors = {k: np.ascontiguousarray(v) for k, v in ckpt.tensors.items()}
    report.compress_rows = compressibility(tensors, dictionary=train_dictionary(tensors))
    tick("packing")
    data, info = pack_checkpoint(ckpt, report.compress_rows)
    report.sizes["kosumi pack"] = len(data)
    report.sizes["naive (tensors in file order, zstd -19)"] = info["naive_bytes"]
    report.sizes["entropy floor of the values"] = info["entropy_bytes"]
    report.compress_summary = summary(report.compress_rows)


def _stem(kind: str, name: str) -> str:
    return f"{kind}-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


# ---------------------------------------------------------------------------- writing
def write_report(report: Report, out: str | os.PathLike[str]) -> Path:
    """figures/*.png and report.html in ``out`` (see the module docstring); the page's path."""
    out = ensure_writable(out)
    with output_errors(out, "write the report"):
        (out / "figures").mkdir(parents=True, exist_ok=True)
        for fig in report.figures:
            atomic_write(out / "figures" / f"{fig.name}.png", fig.png)
        page = out / "report.html"
        atomic_write(page, render_html(report).encode("utf-8"))
    return page


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return html.escape(str(x))
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:.4g}"
    return html.escape(str(x))


def _table(header: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _summary_html(report: Report) -> str:
    d = report.description
    q = d.get("quantization") or {}
    rows: list[list[Any]] = [
        ["file", d.get("file")], ["format", d.get("format")], ["architecture", d.get("arch")],
        ["parameters", d.get("parameters")], ["file bytes", d.get("file_bytes")],
        ["input features", (d.get("input_features") or {}).get("name")],
        ["board sizes", ", ".join(map(str, d.get("board_sizes", [])))],
        ["heads", ", ".join(d.get("heads", {}))],
    ]
    if q:
        kept = q.get("kept_float", [])
        rows.append(["quantization", (f"{q.get('bits')} bits, {q.get('method', '')}, weights in "
                     f"+-{q.get('weight_range', '')}; kept in float: {', '.join(kept) or 'none'}")])
    if report.ref:
        rows.append(["reference (--ref)", report.ref])
    parts = ["<h2 id='summary'>Summary</h2>", _table(["", ""], rows, "kv")]
    parts.append("<h3>Bytes per format</h3>")
    parts.append(_table(["format", "bytes"], [[k, v] for k, v in report.sizes.items()], "kv"))
    if report.zeroing:
        parts.append("<h3>Zeroing small int8 weights (kosumi quantize --zero T)</h3>")
        boards = list(report.zeroing[0]["agreement"])
        parts.append(_table(
            ["T", "zeroed", "pack bytes", "vs naive", "weights entropy",
             *(f"{b} top-1" for b in boards), *(f"{b} KL" for b in boards)],
            [[r["threshold"], f"{100 * r['zeroed']:.1f}%", r["pack_bytes"], r["vs_naive"],
              r["weights_entropy"],
              *(f"{100 * r['agreement'][b]['top1']:.1f}%" for b in boards),
              *(r["agreement"][b]["policy_kl"] for b in boards)] for r in report.zeroing]))
    if report.strength:
        t = report.strength
        parts.append(f"<h3>Size against strength: matches against "
                     f"{html.escape(str(t.get('opponent')))}</h3>")
        parts.append(_table(
            ["net", "arch", "parameters", "file bytes", "games", "W-D-L", "as Black (W-L)",
             "as White (W-L)", "Elo", "95% interval"],
            [[r["name"], r.get("arch"), r.get("params"), r["bytes"], r["games"],
              f"{r['wins']}-{r['draws']}-{r['losses']}", "-".join(map(str, r.get("black", []))),
              "-".join(map(str, r.get("white", []))), f"{r['elo']:+.0f}",
              f"[{r['low']:+.0f}, {r['high']:+.0f}]"] for r in t["rows"]]))
    if report.agreement:
        parts.append(f"<h3>Agreement with {html.escape(report.agreement_with)}</h3>")
        parts.append(_table(
            ["board", "positions", "top-1", "top-1 (ties within 5%)", "policy KL", "value MAE"],
            [[k, v["positions"], f"{100 * v['top1']:.1f}%", f"{100 * v['top1_tie_aware']:.1f}%",
              v["policy_kl"], v["value_mae"]] for k, v in report.agreement.items()]))
    return "\n".join(parts)


def _compress_html(report: Report) -> str:
    s = report.compress_summary
    if not s:
        return ""
    codecs = list(s["stored"])
    rows = [[c, s["stored"][c], s["best_layout"][c],
             f"{s['best_layout'][c] / s['stored'][c]:.3f}"] for c in codecs]
    parts = ["<h2 id='compress'>Compressibility</h2>",
             (f"<p>{s['tensors']} tensors, {s['raw_bytes']:,} bytes raw; the entropy floor of "
             f"the values (order 0): {s['entropy_bytes']:,} bytes. Each tensor in its best "
             f"layout, in a zstd frame of its own: {s['pack_choice']:,} bytes (layouts: "
             f"{html.escape(str(s['layouts_chosen']))}). The pack stores these layouts, plus "
             "their parameters (value tables, orders) and its header, in the smallest of its "
             "frame plans: its size is under Bytes per format.</p>"),
             _table(["codec", "as stored", "best layout per tensor", "ratio"], rows)]
    per = []
    for r in report.compress_rows:
        label, codec, nbytes = r.best()
        stored = r.sizes["stored"].get("zstd-19", 0)
        per.append([r.name, r.dtype, "x".join(map(str, r.shape)), r.raw, round(r.entropy),
                    stored, f"{label} / {codec}", nbytes,
                    f"{nbytes / stored:.3f}" if stored else ""])
    parts.append("<details><summary>per tensor</summary>" + _table(
        ["tensor", "dtype", "shape", "raw", "entropy", "zstd-19 as stored", ("best (layout / "
         "codec)"), "bytes", "vs stored"], per, "small") + "</details>")
    return "\n".join(parts)


SECTIONS = (("strength", "Size against strength"), ("zeroing", "Size against agreement"),
            ("layers", "Layers"), ("distributions", "Distributions"),
            ("activations", "Activations"), ("difference", "Difference with the reference"))

STYLE = """
body { font-family: sans-serif; margin: 0 auto; max-width: 1200px; padding: 0 1em 3em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
table.kv td, td:first-child, th:first-child { text-align: left; }
table.small { font-size: 80%; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 90%; }
.warn { color: #8a4b00; }
#status { color: #777; font-size: 85%; }
"""

SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; }
  }
  var s = document.getElementById('status');
  s.textContent = 'loaded ' + ok + '/' + imgs.length + ' images';
  s.setAttribute('data-loaded', ok);
  s.setAttribute('data-total', imgs.length);
  document.title = document.title + ' (loaded ' + ok + '/' + imgs.length + ' images)';
});
"""


def render_html(report: Report) -> str:
    """The page (see the module docstring)."""
    name = html.escape(Path(report.model).name)
    present = [(k, t) for k, t in SECTIONS if any(f.section == k for f in report.figures)]
    nav = " ".join(f"<a href='#{k}'>{t}</a>" for k, t in
                   [("summary", "Summary"), ("compress", "Compressibility"), *present])
    body = [f"<h1>kosumi viz: {name}</h1>", f"<nav>{nav}</nav>",
            "<p id='status'>images not loaded yet</p>"]
    if report.warnings:
        body.append("<ul class='warn'>" + "".join(f"<li>{html.escape(w)}</li>"
                                                  for w in report.warnings) + "</ul>")
    body.append(_summary_html(report))
    body.append(_compress_html(report))
    for key, title in present:
        body.append(f"<h2 id='{key}'>{title}</h2>")
        for fig in (f for f in report.figures if f.section == key):
            data = base64.b64encode(fig.png).decode("ascii")
            cap = f"{html.escape(fig.title)}" + (f": {html.escape(fig.caption)}"
                                                  if fig.caption else "")
            body.append(f"<figure id='{fig.name}'><img alt='{html.escape(fig.title)}' "
                        f"src='data:image/png;base64,{data}'><figcaption>{cap}</figcaption>"
                        "</figure>")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>kosumi viz: {name}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + f"\n<script>{SCRIPT}</script></body></html>\n")
