"""The ``kosumi`` commands that work on one model file: ``export``, ``inspect``, ``bench``,
``quantize`` and ``viz``. Plain functions; ``kosumi.cli`` registers them on the app."""

from __future__ import annotations

from pathlib import Path

import typer

from kosumi.cli_options import device_option, fail, precision_option, threads_option
from kosumi.errors import KosumiError


# ----------------------------------------------------------------------------- export / inspect
def export_command(
    model: Path = typer.Argument(..., help="Model to export: any format kosumi reads, or "
                                 "'default' or 'tiny'."),
    fmt: str = typer.Option(..., "--format", help="kosumi, leelaz, onnx, tensorrt or pack."),
    out: Path = typer.Option(..., "--out", help="File to write (NET.safetensors, NET.txt[.gz], "
                             "NET.onnx, NET.plan, NET.kpk)."),
    precision: str | None = typer.Option(None, "--precision", help="onnx: fp32 (default), fp16, "
                                         "or int8 (a quantized net's own); tensorrt: fp16 "
                                         "(default), fp32 or int8."),
    batch: str = typer.Option("1,16,64", "--batch", help="tensorrt: min, opt, max batch of the "
                              "optimisation profiles."),
    sizes: str | None = typer.Option(None, "--size", help="tensorrt: board sizes to build "
                                     "profiles for (default: the net's, at most 9,13,19)."),
    device: str = typer.Option("cuda", "--device", help="tensorrt: the GPU to build for."),
    int8_weights: str = typer.Option("int8", "--int8-weights", help="onnx, int8 nets: int8 "
                                     "(symmetric), uint8 (zero point 128: exact in ONNX "
                                     "Runtime on x86 CPUs without VNNI) or offset (zero point "
                                     "-1: ONNX Runtime's AMX kernels). The onnxruntime backend "
                                     "recodes int8 files as its CPU needs."),
) -> None:
    """Export a model: kosumi checkpoint, Leela Zero weights, ONNX, TensorRT engine, kosumi
    pack."""
    from kosumi.export import export_model

    options: dict[str, object] = {
        "precision": precision or ("fp16" if fmt == "tensorrt" else "fp32")}
    if fmt == "tensorrt":
        options.update(batch=batch, sizes=sizes, device=device)
    if int8_weights not in ("int8", "uint8", "offset"):
        fail(f"--int8-weights {int8_weights}: use int8, uint8 or offset")
    if int8_weights != "int8":
        if fmt != "onnx":
            fail("--int8-weights applies to --format onnx")
        options["int8_weights"] = int8_weights
    try:
        typer.echo(export_model(model, fmt, out, **options))
    except KosumiError as e:
        fail(str(e))


def inspect_command(
    model: Path = typer.Argument(..., help="Model file: kosumi checkpoint, KataGo, Leela Zero, "
                                 "ONNX, TensorRT plan, 'default' or 'tiny'."),
    as_json: bool = typer.Option(False, "--json", help="Print the description as JSON."),
) -> None:
    """Describe a model file: format, version, size, parameters, inputs, heads, board sizes."""
    import json

    from kosumi.nets.inspect import describe_model, format_description
    from kosumi.runtime.cpu import cpu_capabilities, cpu_line

    try:
        info = describe_model(model)
    except KosumiError as e:
        fail(str(e))
    if as_json:
        typer.echo(json.dumps({**info, "cpu": cpu_capabilities()}, indent=2))
    else:
        typer.echo(format_description(info))
        typer.echo(f"{'this cpu:':<16} {cpu_line()}")


def bench_command(
    models: list[str] = typer.Argument(..., help="Models to time (any format, 'default', 'tiny')."),
    backends: str = typer.Option("auto", "--backend", help="Comma-separated backends (auto, "
                                 "torch, onnxruntime, tensorrt, numpy), each optionally "
                                 ":fp16 or :fp32 (e.g. onnxruntime:fp16)."),
    batches: str = typer.Option("1,16", "--batch", help="Comma-separated batch sizes."),
    sizes: str = typer.Option("9,19", "--size", help="Comma-separated board sizes."),
    threads: int = threads_option(),
    device: str = device_option(),
    precision: str = precision_option(),
    seconds: float = typer.Option(0.5, "--seconds", min=0.01, help="Timed seconds per cell and "
                                  "round."),
    rounds: int = typer.Option(5, "--rounds", min=1, help="Rounds; the cells are interleaved "
                               "in each."),
    memory: bool = typer.Option(True, "--memory/--no-memory", help="Measure the peak memory of "
                                "each model x backend in a fresh process."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    katago: Path | None = typer.Option(None, "--katago", help="KataGo engine: also time the "
                                       "KataGo models with its own benchmark, in this run."),
    katago_config: Path | None = typer.Option(None, "--katago-config", help="Its GTP config "
                                              "(default: katago-gtp.cfg beside it)."),
) -> None:
    """Time models x backends x batch sizes x board sizes in one run: evals/s, latency p50/p99,
    peak memory."""
    import json

    from kosumi.runtime.bench import BenchPlan, format_bench, run_bench

    try:
        plan = BenchPlan.parse(models, backends, batches, sizes, threads=threads,
                               device=None if device == "cpu" else device, precision=precision,
                               seconds=seconds, rounds=rounds, memory=memory,
                               katago=None if katago is None else str(katago),
                               katago_config=None if katago_config is None else str(katago_config))
        report = run_bench(plan, progress=not as_json)
    except KosumiError as e:
        fail(str(e))
    typer.echo(json.dumps(report, indent=2) if as_json else format_bench(report))


# ----------------------------------------------------------------------------- quantize
def _check_quantize_flags(rounding: str, quantize_outputs: str, weight_range: int | None,
                          qat_without_data: bool, qat_scales: str, qat_scale_lr: float) -> None:
    """``kosumi quantize``'s flags that typer cannot check: one line and exit 2 for the first
    bad one."""
    from kosumi.quantize.ptq import ROUNDINGS

    if rounding not in ROUNDINGS:
        fail(f"--rounding {rounding}: use {' or '.join(ROUNDINGS)}")
    if quantize_outputs not in ("on", "off"):
        fail(f"--quantize-outputs {quantize_outputs}: use on or off")
    if weight_range is not None and not 1 <= weight_range <= 127:
        fail(f"--weight-range {weight_range}: use 1..127")
    if qat_without_data:
        fail("--qat needs --data LABELS (a label folder)")
    if qat_scales not in ("learn", "fixed"):
        fail(f"--qat-scales {qat_scales}: use learn or fixed")
    if not qat_scale_lr > 0:
        fail(f"--qat-scale-lr {qat_scale_lr}: give a positive share of --lr")


def quantize_command(
    model: Path = typer.Argument(..., help="Float net to quantize (any format kosumi reads, or "
                                 "'default')."),
    out: Path = typer.Option(..., "--out", help="Quantized checkpoint to write (.safetensors)."),
    bits: int = typer.Option(8, "--bits", help="8 (int8 weights and activations) or 16 (fp16)."),
    calib: Path | None = typer.Option(None, "--calib", help="Calibration positions: a positions "
                                      "or label folder, or a JSON Lines file (any board sizes)."),
    calib_size: int = typer.Option(512, "--calib-size", min=1, help="Positions to calibrate on "
                                   "(spread over the set)."),
    method: str = typer.Option("mse", "--method", help="Activation ranges: minmax, percentile "
                               "or mse."),
    keep_float: str = typer.Option("auto", "--keep-float", help="auto (sensitive stem, "
                                   "heads; trunk within --float-budget), none, or LAYER,..."),
    float_budget: float = typer.Option(0.05, "--float-budget", min=0.0, max=1.0,
                                       help="auto: the parameter share for float trunk layers."),
    weight_range: int | None = typer.Option(None, "--weight-range", help="Largest int8 weight "
                                            "(127; 63 avoids saturation on x86 without VNNI; "
                                            "default: by this CPU)."),
    activations: str = typer.Option("uint8", "--activations", help="uint8 (ONNX Runtime on "
                                    "CPUs) or int8 (symmetric: TensorRT)."),
    rounding: str = typer.Option("refit", "--rounding", help="int8 weights: refit (each "
                                 "layer refit to the quantized net's own inputs, then gptq), "
                                 "gptq (each layer's rounding error passed on to its other "
                                 "inputs) or nearest; each tries those after it too and keeps "
                                 "the net that agrees best on --calib."),
    quantize_outputs: str = typer.Option("off", "--quantize-outputs", help="on: requantize "
                                         "every int8 layer's output, also where only float ops "
                                         "read it, so that ONNX Runtime runs it as one int8 op "
                                         "(KataGo's nets: 3.2x faster, less exact), or off."),
    qat: bool = typer.Option(False, "--qat", help="Fine-tune through the quantization (QAT)."),
    data: Path | None = typer.Option(None, "--data", help="QAT: a label folder (kosumi label), "
                                     "or a positions folder with --qat-target float."),
    steps: int = typer.Option(500, "--steps", min=1, help="QAT: optimizer steps."),
    qat_target: str = typer.Option("float", "--qat-target", help="QAT: learn the float net's "
                                   "own outputs (float; --data may be a positions folder), or "
                                   "the labels' teacher targets (teacher)."),
    qat_batch: int = typer.Option(128, "--qat-batch", min=1, help="QAT: positions per step."),
    lr: float = typer.Option(2e-5, "--lr", help="QAT: peak learning rate (cosine decay; "
                             "higher rates drift a trained net away from its float self)."),
    qat_scales: str = typer.Option("learn", "--qat-scales", help="QAT: learn the activation "
                                   "scales with the weights (learn: LSQ) or keep calibration's "
                                   "(fixed)."),
    qat_scale_lr: float = typer.Option(0.1, "--qat-scale-lr", help="QAT: the learned scales' "
                                       "learning rate, as a share of --lr."),
    seed: int = typer.Option(0, "--seed", help="QAT: seed of the batch order."),
    threads: int | None = typer.Option(None, "--threads", min=1, help="QAT: torch threads."),
    resume: bool = typer.Option(False, "--resume", help="QAT: continue the run saved beside "
                                "--out (OUT.qat-state)."),
    stop_after: int | None = typer.Option(None, "--stop-after", min=1, help="QAT: stop this "
                                          "invocation after K steps (then --resume)."),
    zero: int = typer.Option(0, "--zero", min=0, help="Lossy, for a smaller pack: set int8 "
                             "weights with |q| <= T to zero (biases corrected on --calib; "
                             "kosumi viz --calib shows the size-vs-agreement curve)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Quantize a net to int8 (PTQ, or QAT with --qat) or fp16, with a per-layer sensitivity
    table."""
    import json

    from kosumi.quantize import QatStop, QuantizeOptions, quantize_model

    keep: str | list[str] = keep_float if keep_float in ("auto", "none") else [
        k.strip() for k in keep_float.split(",") if k.strip()]
    options = QuantizeOptions(bits=bits, method=method, keep_float=keep,
                              float_budget=float_budget, weight_max=weight_range,
                              activations=activations, quantize_outputs=quantize_outputs,
                              rounding=rounding)
    _check_quantize_flags(rounding=rounding, quantize_outputs=quantize_outputs,
                          weight_range=weight_range, qat_without_data=qat and data is None,
                          qat_scales=qat_scales, qat_scale_lr=qat_scale_lr)
    qat_options = None
    if qat:
        from kosumi.quantize.qat import QatOptions

        qat_options = QatOptions(steps=steps, batch=qat_batch, lr=lr, target=qat_target,
                                 seed=seed, threads=threads, stop_after=stop_after,
                                 learn_scales=qat_scales == "learn", scale_lr=qat_scale_lr)
    try:
        result = quantize_model(model, out, options, calib=calib, calib_limit=calib_size,
                                progress=lambda m: typer.echo(m, err=True),
                                qat_data=data if qat else None, qat_options=qat_options,
                                resume=resume, progress_bar=not as_json, zero=zero)
    except KosumiError as e:
        fail(str(e))
    if isinstance(result, QatStop):
        typer.echo(f"{result.message()}; nothing written to {out} yet")
        return
    report, nbytes = result
    if as_json:
        typer.echo(json.dumps({"out": str(out), "bytes": nbytes,
                               "scheme": report.scheme.to_dict(),
                               "onnxruntime_check": report.onnxruntime}, indent=2))
        return
    from kosumi.quantize.report import format_report

    typer.echo(format_report(report, out, nbytes))


# ----------------------------------------------------------------------------- viz
def viz_command(
    model: Path = typer.Argument(..., help="Model to picture: any format with tensors (kosumi "
                                 "checkpoint, quantized or not, pack, KataGo, Leela Zero), or "
                                 "'default' or 'tiny'."),
    out: Path = typer.Option(..., "--out", help="Folder for report.html and figures/*.png."),
    ref: Path | None = typer.Option(None, "--ref", help="Another model: also plot the "
                                    "difference of every layer both have (int8 vs float, "
                                    "before vs after QAT, student vs student)."),
    calib: Path | None = typer.Option(None, "--calib", help="Positions (a positions or label "
                                      "folder, or JSON Lines): activation ranges and the "
                                      "agreement figures."),
    positions: int = typer.Option(256, "--positions", min=1, help="Positions of --calib to "
                                  "use (spread over the set)."),
    strength: Path | None = typer.Option(None, "--strength", help="A size-vs-strength table "
                                         "(benchmarks/size_vs_strength.py): draw strength "
                                         "against file size."),
    open_page: bool = typer.Option(False, "--open", help="Open the report in a browser."),
) -> None:
    """Weight plots, histograms, scales, activation ranges, sensitivity, sizes per format and
    the codec x layout table, in one self-contained report.html."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from kosumi.viz.report import build_report, ensure_writable, write_report

    try:
        ensure_writable(out)
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      transient=True) as bar:
            task = bar.add_task("reading the model")
            report = build_report(model, ref=ref, calib=calib, positions=positions,
                                  progress=lambda m: bar.update(task, description=m),
                                  strength=strength)
        page = write_report(report, out)
    except KosumiError as e:
        fail(str(e))
    for w in report.warnings:
        typer.echo(f"kosumi: warning: {w}", err=True)
    mb = page.stat().st_size / 1e6
    typer.echo(f"wrote {page}: {len(report.figures)} figures ({mb:.1f} MB, images embedded; "
               f"the PNGs in {out / 'figures'})")
    if open_page:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())
