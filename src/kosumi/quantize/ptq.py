"""Post-training quantization: a float net + calibration positions -> a quantized net.

``quantize_net(checkpoint, states, options)`` returns the quantized ``Checkpoint`` (config with
its ``QuantScheme``, the folded graph's tensors: int8 weights, int32 biases, scales and
fixed-point multipliers) and a report (the per-layer sensitivity table, what was kept in float).

Steps (``bits`` 8), each a function from typed inputs to a typed result, the results gathered in
a ``record.QuantRecord`` that the scheme's ``info`` is written from:

1. ``float_net``: fold the batch norms (``nets.fold``): a ``FoldedNet``;
2. ``calibrate``: run the float graph over the calibration positions and keep every value's
   range (``quantize.calibration``; equalised first, ``quantize.equalize``): a ``Calibration``;
   ``plan_activations``: the quantizer of every value: an ``ActivationPlan``;
3. ``choose_layers``: the layers kept in float: ``none``; a list of layer names; or ``auto``:
   quantize one layer at a time (``sensitivity``) and keep the sensitive ones at the net's ends
   (stem, global inputs, heads) in float, and the most sensitive trunk layers while their
   weights stay within ``float_budget`` of the net's parameters: a ``LayerChoice``;
4. quantize (``gptq_weights``, ``refit``, ``candidates``, ``build_quantized``): weights
   symmetric per output channel to [-weight_max, weight_max] (127, or 63 on x86 CPUs without
   VNNI, where ONNX Runtime's uint8 x int8 kernels can saturate), activations per tensor from
   the calibrated ranges (uint8; zero point 0 where never negative, else 128), biases to int32,
   every requantisation to an int32 multiplier and a shift. Any integer that does not fit int32
   is an error naming the layer. ``rounding`` "gptq": the weights are rounded by GPTQ
   (``quantize.rounding``) on the same scales; "refit" (the default): each int8 layer is first
   refit to the quantized net's own inputs (``quantize.refit``), then rounded by GPTQ. The net
   is built with the rounding asked and each simpler one (refit, gptq, nearest); the one whose
   worst output agrees best with the float net on the judged calibration positions (SQNR) is
   kept, and the record's ``RoundingChoice`` says which. Refit and GPTQ learn from the other
   calibration positions, so that this choice is made on positions they have not seen. With a
   QAT stage (``quantize.qat``) the trained weights are quantized (round to nearest, as trained)
   and that net is written; the PTQ net of the same choices is built too, and the ``QatRecord``
   holds both nets' SQNR, so that a run that made the net worse (too high a learning rate, too
   few positions) says so.

``bits`` 16: the folded tensors in float16, no calibration.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.features import FeatureSet, get_feature_set
from kosumi.nets.fold import FoldedNet, fold
from kosumi.nets.graph import WEIGHTED_OPS, Node, float_tensors
from kosumi.nets.quant import (
    ActQuant,
    QuantScheme,
    add_multipliers,
    check_int32,
    integer_plan,
    quantize_multiplier,
)
from kosumi.quantize.calibration import ValueStats, activation_range, collect_stats
from kosumi.quantize.equalize import equalize_blocks, equalize_stream, weight_bias_correction
from kosumi.quantize.judging import compare_outputs, judge_batches, net_outputs
from kosumi.quantize.record import (
    Equalized,
    LayerSensitivity,
    QatOutcome,
    QatStop,
    QuantRecord,
    RoundingChoice,
)
from kosumi.quantize.refit import Refit
from kosumi.quantize.rounding import quantize_weights
from kosumi.runtime.numpy_backend import NumpyBackend
from kosumi.runtime.numpy_int8 import Int8NumpyBackend

KEEP_FLOAT_AUTO = "auto"
ROUNDINGS = ("refit", "gptq", "nearest")  # each tries those after it too
Batches = list[tuple[np.ndarray, np.ndarray | None]]
Say = Callable[[str], None]
# the QAT stage (``quantize.qat``): the float net, the layer modes, the activation quantizers
# of the integer plan and the weight range -> the trained net, or where it stopped on purpose
QatStage = Callable[[FoldedNet, dict[str, str], dict[str, ActQuant], int], QatOutcome | QatStop]


@dataclass
class QuantizeOptions:
    """How to quantize (see the module docstring)."""

    bits: int = 8
    method: str = "mse"
    percentile: float = 99.99
    keep_float: str | list[str] = KEEP_FLOAT_AUTO  # "auto" | "none" | layer names
    float_budget: float = 0.05  # auto: the trunk layers kept float, a share of the parameters
    weight_max: int | None = None  # None: by this CPU (127 with VNNI or on ARM, else 63)
    activations: str = "uint8"  # "uint8" (ONNX Runtime on CPUs) | "int8" (TensorRT)
    eval_positions: int = 128  # sensitivity: positions of the calibration set to judge on
    sensitivity: bool = True  # measure the per-layer table (auto needs it)
    equalize: bool = True  # cross-layer equalization inside residual blocks
    rounding: str = "refit"  # int8 weights: "refit" (quantize.refit), "gptq"
    #                          (quantize.rounding) or "nearest"
    rounding_positions: int = 256  # refit, gptq: calibration positions (none of those judged)
    #                                their input statistics come from
    bias_correction: bool = True  # remove the mean shift weight rounding causes
    empirical_bias: bool = False  # ... and, layer by layer, the shift all rounding causes
    stream_balance: float | None = None  # equalize_stream's b (None: off; it did not help
    #                                      the default net, benchmarks/RESULTS.md)
    quantize_outputs: str = "off"  # "on": every int8 layer's output is requantized, also when
    #   only float ops read it (KataGo's pre-activation blocks: conv2 -> float residual add),
    #   so that ONNX Runtime runs it as QLinearConv: g170 2.7x faster, KL to KataGo 3x higher


@dataclass
class QuantizeReport:
    scheme: QuantScheme
    sensitivity: list[LayerSensitivity] = field(default_factory=list)
    agreement: dict[str, float] = field(default_factory=dict)  # the whole net vs float
    onnxruntime: dict[str, Any] | None = None  # quantize.onnxruntime_check on this CPU
    record: QuantRecord | None = None  # how it was made (the scheme's info, typed)


def default_weight_max() -> tuple[int, str]:
    """(127, why) where uint8 x int8 dot products do not saturate (VNNI on x86, or ARM), else
    (63, why): without VNNI, ONNX Runtime's x86 kernels add pairs of uint8 x int8 products in
    int16, which 255 * 127 * 2 overflows and 255 * 63 * 2 does not."""
    from kosumi.runtime.cpu import cpu_line, int8_pairs_saturate

    if int8_pairs_saturate():
        return 63, (f"weights in +-63: no VNNI on this CPU ({cpu_line()}), where uint8 x int8 "
                    "pairs would saturate int16")
    return 127, f"weights in +-127, uint8 activations: this CPU ({cpu_line()})"


# ---------------------------------------------------------------------------- building blocks
def float_net(ckpt: Checkpoint, source: str) -> FoldedNet:
    """The net to quantize, folded; a quantized net or a NaN is an error naming ``source``."""
    if ckpt.config.quantized:
        raise KosumiError(f"{source}: already quantized ({ckpt.config.quantization.get('bits')}"
                          " bits); quantize the float net it came from")
    for name, t in ckpt.tensors.items():
        if t.dtype.kind == "f" and not np.isfinite(t).all():
            raise KosumiError(f"{source}: tensor {name!r} holds NaN or infinite values")
    return fold(ckpt.config, ckpt.tensors)


def make_acts(net: FoldedNet, stats: dict[str, ValueStats], names: set[str], method: str,
              percentile: float, activations: str = "uint8") -> dict[str, ActQuant]:
    """Per value: uint8 (zero point 0) when never negative, else uint8 with zero point 128;
    ``activations`` "int8": int8 with zero point 0 everywhere (TensorRT's symmetric int8)."""
    if activations not in ("uint8", "int8"):
        raise KosumiError(f"--activations {activations!r}: use uint8 or int8")
    acts = {}
    for name in sorted(names):
        st = stats[name]
        c = activation_range(name, st, method, percentile)
        if activations == "int8":
            acts[name] = ActQuant(scale=c / 127.0, dtype="int8")
        elif st.nonnegative:
            acts[name] = ActQuant(scale=c / 255.0, dtype="uint8")
        else:
            acts[name] = ActQuant(scale=c / 127.0, dtype="uint8", zero_point=128)
    return acts


def _weighted_layer(tensors: dict[str, np.ndarray], n: Node, acts: dict[str, ActQuant],
                    weight_max: int, input_means: dict[str, np.ndarray] | None,
                    rounded: dict[str, np.ndarray] | None, w: np.ndarray, b: np.ndarray,
                    requant_output: str | None) -> None:
    """An int8 layer's tensors: int8 weights and their scales, the int32 bias (bias-corrected
    by the layer's mean input when given) and, where its output is requantized, the
    fixed-point multiplier."""
    qw, sw = quantize_weights(w, weight_max)
    if rounded is not None and n.name in rounded:
        qw = rounded[n.name]
    sx = acts[n.inputs[0]].scale
    mean_in = (input_means or {}).get(n.name)
    if mean_in is not None and mean_in.shape[0] == w.shape[1]:
        wq_float = qw.astype(np.float64) * sw.astype(np.float64).reshape(
            (-1,) + (1,) * (w.ndim - 1))
        b = b.astype(np.float64) - weight_bias_correction(w, wq_float, mean_in)
    tensors[f"{n.name}.weight"] = qw
    tensors[f"{n.name}.weight_scale"] = sw
    tensors[f"{n.name}.bias"] = check_int32(n.name, b.astype(np.float64)
                                            / (sx * sw.astype(np.float64)), "bias")
    if requant_output is not None:
        m = sx * sw.astype(np.float64) / acts[requant_output].scale
        m0, shift = quantize_multiplier(m)
        if (31 + shift.astype(np.int64) > 62).any() or (31 + shift < 1).any():
            raise KosumiError(f"layer {n.name}: its requantisation multiplier is out "
                              "of int32 fixed-point range (recalibrate)")
        tensors[f"{n.name}.multiplier"] = m0
        tensors[f"{n.name}.shift"] = shift


def build_quantized(net: FoldedNet, layers: dict[str, str], acts_all: dict[str, ActQuant],
                    weight_max: int, info: dict[str, Any] | None = None,
                    input_means: dict[str, np.ndarray] | None = None,
                    requant: Collection[str] = (),
                    rounded: dict[str, np.ndarray] | None = None) -> Checkpoint:
    """The quantized net for given layer modes and activation quantizers (``acts_all``: every
    value that may be needed). ``input_means``: per layer, the calibrated mean of its input
    channels, for bias correction (None: no correction). ``requant``: see ``integer_plan``.
    ``rounded``: per layer, int8 weights rounded otherwise than to nearest (on the same
    scales: ``quantize.rounding``)."""
    folded = net.tensors
    plan = integer_plan(net.graph, layers, requant)
    acts: dict[str, ActQuant] = {}
    for v in plan.quantized:
        src = plan.shared.get(v, v)
        acts[v] = acts_all[src]
    for out, src in plan.shared.items():  # a flatten's output shares its input's act
        acts[out] = acts[src]
    tensors: dict[str, np.ndarray] = {}
    adds: dict[str, dict[str, int]] = {}
    for st in plan.steps:
        n = st.node
        if n.op in WEIGHTED_OPS:
            w, b = folded[f"{n.name}.weight"], folded[f"{n.name}.bias"]
            if not st.integer:
                tensors[f"{n.name}.weight"] = w.astype(np.float32)
                tensors[f"{n.name}.bias"] = b.astype(np.float32)
                continue
            _weighted_layer(tensors, n, acts, weight_max, input_means, rounded, w, b,
                            st.output if st.requant else None)
        elif st.integer and n.op in ("add", "add_bias"):
            sa, sb = (acts[x].scale for x in n.inputs)
            sy = acts[st.output].scale
            adds[n.name] = add_multipliers(sa / sy, sb / sy)
            if max(abs(adds[n.name]["ma"]), abs(adds[n.name]["mb"])) > 2**31:
                raise KosumiError(f"layer {n.name}: its add rescale overflows int32")
        for name in float_tensors(n):  # affine scales and biases, rotary frequencies
            tensors[name] = folded[name].astype(np.float32)
    kinds = {a.dtype for a in acts.values()}
    scheme = QuantScheme(bits=8, layers=dict(layers), acts=acts, adds=adds,
                         weight_max=weight_max, info=dict(info or {}),
                         activations="int8" if kinds == {"int8"} else "uint8")
    qconfig = replace(net.config, quantization=scheme.to_dict(), extra_tensors=[])
    return Checkpoint(config=qconfig, tensors=tensors, metadata={})


def with_record(q: Checkpoint, record: QuantRecord) -> Checkpoint:
    """The quantized net with its scheme's ``info`` written from ``record``."""
    return Checkpoint(config=replace(q.config, quantization={**q.config.quantization,
                                                             "info": record.to_dict()}),
                      tensors=q.tensors, metadata=q.metadata)


def fp16_net(net: FoldedNet, record: QuantRecord) -> Checkpoint:
    """``--bits 16``: the folded tensors as float16."""
    scheme = QuantScheme(bits=16, info=record.to_dict())
    big = [k for k, v in net.tensors.items() if np.abs(v).max() > 65504]
    if big:
        raise KosumiError(f"tensor {big[0]!r} has values beyond float16's range")
    keep = {name for n in net.graph.nodes if n.op == "attention"
            for name in float_tensors(n)}  # rotary frequencies: float32 (angles up to 18x)
    tensors = {k: v.astype(np.float32 if k in keep else np.float16)
               for k, v in net.tensors.items()}
    return Checkpoint(config=replace(net.config, quantization=scheme.to_dict(), extra_tensors=[]),
                      tensors=tensors, metadata={})


def sensitivity(net: FoldedNet, acts_all: dict[str, ActQuant], weight_max: int,
                batches: Batches, input_means: dict[str, np.ndarray] | None = None
                ) -> list[LayerSensitivity]:
    """Quantize one layer at a time (the others float): the policy's SQNR, largest error and
    top-1 agreement with the float net."""
    ref = net_outputs(NumpyBackend.folded(net), batches)
    names = [n.name for n in net.graph.weighted()]
    rows = []
    for name in names:
        layers = {m: ("int8" if m == name else "float") for m in names}
        q = build_quantized(net, layers, acts_all, weight_max, input_means=input_means)
        c = compare_outputs(ref, net_outputs(Int8NumpyBackend(q.config, q.tensors), batches))
        rows.append(LayerSensitivity(name=name, parameters=int(net.weight(name).size),
                                     sqnr_db=c["sqnr_db"], max_policy_error=c["max_policy_error"],
                                     top1=c["top1"]))
    return rows


def in_trunk(layer: str) -> bool:
    """A layer of the residual trunk (``blocks.K.*``), not the stem, global inputs or heads."""
    return layer.startswith("blocks.")


def choose_float_layers(rows: list[LayerSensitivity], budget: float,
                        threshold_db: float = 45.0) -> list[str]:
    """``auto``: a layer is sensitive below ``threshold_db`` (output SQNR when quantized alone)
    or when alone it changes a top move. The sensitive layers at the net's ends (the stem, the
    global inputs, the heads) are kept in float: they are where int8 costs most, reading binary
    planes or writing the outputs, their size is set by the net's inputs and outputs rather than
    its depth, and float there costs ONNX Runtime no requantisation inside the integer trunk
    (the b2c16's stem is 14% of its parameters; in float it cut the policy KL by 58%). Trunk
    layers follow, most sensitive first (lowest SQNR, then top-1), while they stay within
    ``budget`` of the net's parameters."""
    allowed = budget * sum(r.parameters for r in rows)
    keep, used = [], 0
    for r in sorted(rows, key=lambda r: (in_trunk(r.name), r.sqnr_db, r.top1)):
        if r.sqnr_db >= threshold_db and r.top1 >= 0.999:
            continue
        if in_trunk(r.name):
            if used + r.parameters > allowed:
                continue
            used += r.parameters
        keep.append(r.name)
    return keep


def empirical_bias_correction(net: FoldedNet, layers: dict[str, str],
                              acts_all: dict[str, ActQuant], weight_max: int, batches: Batches,
                              input_means: dict[str, np.ndarray] | None,
                              rounded: dict[str, np.ndarray] | None = None) -> FoldedNet:
    """Layer by layer, in order: quantize the net, measure the mean per-channel shift of the
    layer's output against the float net on the batches (where the float value is positive, for
    an output through a ReLU), and take it out of the layer's float bias. Returns the net with
    the corrected biases."""
    ref = [NumpyBackend.folded(net).values(p, g) for p, g in batches]
    out = net
    plan = integer_plan(net.graph, layers)
    for st in plan.steps:
        n = st.node
        if not (st.integer and n.op in WEIGHTED_OPS):
            continue
        q = build_quantized(out, layers, acts_all, weight_max, input_means=input_means,
                            rounded=rounded)
        backend = Int8NumpyBackend(q.config, q.tensors)
        total: np.ndarray | None = None  # summed shift per channel, and its weight
        count: np.ndarray | None = None
        for (p, g), fv in zip(batches, ref, strict=True):
            qv = backend.values(p, g)[st.output]
            f = fv[st.output]
            if qv.shape != f.shape:
                continue
            d = (qv - f).reshape(-1, f.shape[-1]).astype(np.float64)
            w = (f > 0).reshape(-1, f.shape[-1]) if st.fused is not None else np.ones_like(d)
            total = (d * w).sum(axis=0) + (0 if total is None else total)
            count = w.sum(axis=0) + (0 if count is None else count)
        if total is None or count is None:  # (set together)
            continue
        shift = np.where(count > 0, total / np.maximum(count, 1), 0.0)
        out = out.with_tensors({f"{n.name}.bias": (out.bias(n.name).astype(np.float64)
                                                   - shift).astype(np.float32)})
    return out


# ---------------------------------------------------------------------------- the stages
@dataclass
class Calibration:
    """The calibration stage: the net (equalised when asked), every value's statistics on the
    calibration positions, and what equalisation did."""

    net: FoldedNet
    stats: dict[str, ValueStats]
    equalized: Equalized | None = None


@dataclass
class ActivationPlan:
    """The activation stage: a quantizer for every value the integer plan may need, the layer
    outputs requantized (``--quantize-outputs on``), and per layer the mean of its input
    channels for bias correction (None: no correction)."""

    acts: dict[str, ActQuant]
    requant: set[str]
    means: dict[str, np.ndarray] | None


@dataclass
class LayerChoice:
    """The float-layer stage: each layer's mode, those kept float, the sensitivity table."""

    layers: dict[str, str]
    keep: list[str]
    rows: list[LayerSensitivity]


@dataclass
class Candidate:
    """A net to build and judge for one rounding: its float tensors, the bias-correction means
    and the int8 weights not rounded to nearest."""

    net: FoldedNet
    means: dict[str, np.ndarray] | None
    rounded: dict[str, np.ndarray] | None


def calibrate(net: FoldedNet, fs: FeatureSet, states: list[GameState],
              options: QuantizeOptions, say: Say) -> Calibration:
    """Activation statistics of the float net on ``states``; with ``--equalize``, the blocks
    (and the stream) rescaled first and the statistics collected again."""
    say(f"calibrating on {len(states)} positions")
    stats = collect_stats(NumpyBackend.folded(net), fs, states)
    if not options.equalize:
        return Calibration(net, stats)
    eq_net, spread = equalize_blocks(net, stats)
    stream_spread = None
    if options.stream_balance is not None:
        eq_net, stream_spread = equalize_stream(eq_net, stats, options.stream_balance)
    if not spread:
        return Calibration(eq_net, stats, None)
    say(f"equalized {len(spread)} blocks; calibrating again")
    return Calibration(eq_net, collect_stats(NumpyBackend.folded(eq_net), fs, states),
                       Equalized(blocks=spread, stream=stream_spread))


def plan_activations(cal: Calibration, options: QuantizeOptions) -> ActivationPlan:
    """The activation quantizers from the calibrated ranges (``make_acts``)."""
    net, stats = cal.net, cal.stats
    graph = net.graph
    means = None
    if options.bias_correction:
        means = {n.name: stats[n.inputs[0]].chan_mean for n in graph.weighted()
                 if n.inputs[0] in stats and stats[n.inputs[0]].chan_sum is not None}
    mode = options.quantize_outputs
    if mode not in ("on", "off"):
        raise KosumiError(f"--quantize-outputs {mode}: use on or off")
    all_int = {n.name: "int8" for n in graph.weighted()}
    requant: set[str] = set() if mode == "off" else {
        st.output for st in integer_plan(graph, all_int).steps if st.node.op in WEIGHTED_OPS}
    wanted = (integer_plan(graph, all_int).quantized | {n.inputs[0] for n in graph.weighted()}
              | requant)
    acts = make_acts(net, stats, {v for v in wanted if v in stats}, options.method,
                     options.percentile, options.activations)
    return ActivationPlan(acts, requant, means)


def choose_layers(net: FoldedNet, plan: ActivationPlan, weight_max: int, batches: Batches,
                  judged: int, options: QuantizeOptions, say: Say) -> LayerChoice:
    """The layers kept in float: chosen by sensitivity (auto), none, or those named."""
    names = [n.name for n in net.graph.weighted()]
    rows: list[LayerSensitivity] = []
    if options.keep_float == KEEP_FLOAT_AUTO or options.sensitivity:
        say(f"sensitivity: {len(names)} layers, one at a time, on {judged} positions")
        rows = sensitivity(net, plan.acts, weight_max, batches, plan.means)
    if options.keep_float == KEEP_FLOAT_AUTO:
        keep = choose_float_layers(rows, options.float_budget)
    elif options.keep_float in ("none", None, []):
        keep = []
    else:
        given = options.keep_float
        keep = [k for k in given.split(",") if k] if isinstance(given, str) else list(given)
        unknown = [k for k in keep if k not in names]
        if unknown:
            raise KosumiError(f"--keep-float: no layer {unknown[0]!r} (layers: "
                              f"{', '.join(names)})")
    for r in rows:
        r.kept_float = r.name in keep
    return LayerChoice({n: ("float" if n in keep else "int8") for n in names}, keep, rows)


def gptq_weights(net: FoldedNet, fs: FeatureSet, states: list[GameState], weight_max: int,
                 options: QuantizeOptions, say: Say) -> dict[str, np.ndarray] | None:
    """``--rounding gptq`` (and refit, which tries it too): the int8 weights GPTQ rounded on
    the float net's inputs (``quantize.rounding``); ``nearest``: None."""
    if options.rounding == "nearest":
        return None
    from kosumi.quantize.calibration import spread
    from kosumi.quantize.rounding import gptq_round, input_hessians

    backend = NumpyBackend.folded(net)
    names = {n.name for n in backend.graph.weighted()}
    sample = spread(states, options.rounding_positions)
    say(f"GPTQ rounding: input statistics of {len(names)} layers on {len(sample)} positions")
    hessians = input_hessians(backend, fs, sample, names)
    out = {}
    for name, h in hessians.items():
        w = net.weight(name)
        _, scale = quantize_weights(w, weight_max)
        out[name] = gptq_round(w, scale, h, weight_max)
    return out


def refit(net: FoldedNet, choice: LayerChoice, plan: ActivationPlan, weight_max: int,
          fs: FeatureSet, states: list[GameState], options: QuantizeOptions,
          say: Say) -> Refit | None:
    """``--rounding refit``: ``quantize.refit`` on the chosen layers; other roundings: None."""
    if options.rounding != "refit":
        return None
    from kosumi.quantize.calibration import spread
    from kosumi.quantize.refit import refit_layers
    from kosumi.runtime.evaluator import same_size_chunks

    sample = spread(states, options.rounding_positions)
    batches = [fs.encode([sample[i] for i in chunk]) for chunk in same_size_chunks(sample, 32)]

    def build(tensors: FoldedNet, rounded: dict[str, np.ndarray]) -> Checkpoint:
        return build_quantized(tensors, choice.layers, plan.acts, weight_max, None,
                               {k: v for k, v in (plan.means or {}).items() if k not in rounded},
                               plan.requant, rounded)

    say(f"refit: each int8 layer on the quantized net's inputs, {len(sample)} positions")
    return refit_layers(net, build, batches, weight_max)


def _not_judged(states: list[GameState], judge: list[GameState]) -> list[GameState]:
    """The calibration positions refit and GPTQ learn from: those not judged, if any."""
    seen = {id(s) for s in judge}
    return [s for s in states if id(s) not in seen] or states


def candidates(net: FoldedNet, means: dict[str, np.ndarray] | None,
               rounded: dict[str, np.ndarray] | None, refitted: Refit | None
               ) -> dict[str, Candidate]:
    """The nets to build and judge, by rounding, the most elaborate first."""
    out: dict[str, Candidate] = {}
    if refitted is not None:  # its layers' rounding shift is already out of their biases
        out["refit"] = Candidate(refitted.net, {k: v for k, v in (means or {}).items()
                                                if k not in refitted.rounded}, refitted.rounded)
    if rounded is not None:
        out["gptq"] = Candidate(net, means, rounded)
    out["nearest"] = Candidate(net, means, None)
    return out


def _weight_range(options: QuantizeOptions) -> tuple[int, str]:
    """The int8 weights' range and why (``--weight-range``, or by this CPU)."""
    if not options.weight_max:
        return default_weight_max()
    weight_max, why = options.weight_max, f"weights in +-{options.weight_max} (--weight-range)"
    if weight_max > 63:
        from kosumi.runtime.cpu import int8_pairs_saturate

        if int8_pairs_saturate():
            why += ("; ONNX Runtime on this CPU (no VNNI) will hold them as uint8, exact but "
                    "slower than +-63")
    return weight_max, why


# ---------------------------------------------------------------------------- the whole run
def quantize_net(ckpt: Checkpoint, states: list[GameState], options: QuantizeOptions,
                 source: str = "model", progress: Say | None = None,
                 qat: QatStage | None = None) -> tuple[Checkpoint, QuantizeReport] | QatStop:
    """See the module docstring. ``progress(message)`` is called between steps. ``qat``: the
    QAT stage (``quantize.qat``), run after the layers and activation scales are chosen; where
    it stopped on purpose (``--stop-after``) that is returned and no net is built."""
    say = progress or (lambda message: None)
    net = float_net(ckpt, source)
    record = QuantRecord(source=source, method=options.method)
    if options.bits == 16:
        return fp16_net(net, record), QuantizeReport(QuantScheme(bits=16, info=record.to_dict()),
                                                     record=record)
    if options.bits != 8:
        raise KosumiError(f"--bits {options.bits}: kosumi quantizes to 8 or 16 bits")
    if not states:
        raise KosumiError("the calibration set is empty")
    weight_max, record.kernels = _weight_range(options)
    say(f"{record.kernels}; activations {options.activations}")
    fs = get_feature_set(net.config.features)
    cal = calibrate(net, fs, states, options, say)
    net, record.equalized = cal.net, cal.equalized
    plan = plan_activations(cal, options)
    record.quantize_outputs = bool(plan.requant)
    record.calibration_positions = len(states)
    record.calibration_sizes = sorted({s.size for s in states})
    record.weight_max = weight_max
    if options.rounding not in ROUNDINGS:
        raise KosumiError(f"--rounding {options.rounding!r}: use {' or '.join(ROUNDINGS)}")
    judge, batches = judge_batches(fs, states, options.eval_positions)
    fit = _not_judged(states, judge)
    rounded = gptq_weights(net, fs, fit, weight_max, options, say)
    choice = choose_layers(net, plan, weight_max, batches, len(judge), options, say)
    if options.empirical_bias:
        say("bias correction, layer by layer")
        net = empirical_bias_correction(net, choice.layers, plan.acts, weight_max, batches,
                                        plan.means, rounded)
    record.keep_float, record.sensitivity = choice.keep, choice.rows
    refitted = refit(net, choice, plan, weight_max, fs, fit, options, say)
    trained: QatOutcome | None = None
    if qat is not None:
        plan_acts = {v: plan.acts[v] for v in integer_plan(net.graph, choice.layers,
                                                           plan.requant).quantized
                     if v in plan.acts}
        outcome = qat(net, choice.layers, plan_acts, weight_max)
        if isinstance(outcome, QatStop):
            return outcome
        trained, record.qat = outcome, outcome.record
    ref = net_outputs(NumpyBackend.folded(net), batches)  # the float net as given

    def judged(c: Candidate, acts: dict[str, ActQuant]) -> tuple[Checkpoint, dict[str, float]]:
        q = build_quantized(c.net, choice.layers, acts, weight_max, None, c.means,
                            plan.requant, c.rounded)
        return q, compare_outputs(ref, net_outputs(Int8NumpyBackend(q.config, q.tensors),
                                                   batches))

    tried = {m: judged(c, plan.acts)
             for m, c in candidates(net, plan.means, rounded, refitted).items()}
    # refit and GPTQ make each layer's own output error smaller, which is not always the whole
    # net's: the net with the higher worst-output SQNR on the judged positions is kept
    chosen = max(tried, key=lambda m: tried[m][1]["sqnr_db"])
    q, agreement = tried[chosen]
    record.rounding = RoundingChoice(
        asked=options.rounding, chosen=chosen,
        sqnr_db={m: round(a["sqnr_db"], 2) for m, (_, a) in tried.items()},
        refit_layers=None if refitted is None else len(refitted.rounded))
    if trained is not None:  # the trained weights answer for their own rounding: no bias means
        q, agreement = judged(Candidate(trained.net, None, None), {**plan.acts, **trained.learned})
        trained.record.judged(agreement["sqnr_db"], record.rounding)
        record.rounding = RoundingChoice(asked="nearest (QAT)", chosen="nearest",
                                         sqnr_db={"nearest": round(agreement["sqnr_db"], 2)})
    record.agreement_on_calibration = agreement
    q = with_record(q, record)
    return q, QuantizeReport(scheme=QuantScheme.from_dict(q.config.quantization),
                             sensitivity=choice.rows, agreement=agreement, record=record)
