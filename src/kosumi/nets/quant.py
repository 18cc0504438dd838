"""The quantization scheme of a net: one object every reader of a quantized net shares.

A quantized kosumi net is a checkpoint whose config has a ``quantization`` entry (this
module's ``QuantScheme`` as JSON) and whose tensors are those of its inference graph
(``nets.graph``), already folded (``nets.fold``). ``kosumi quantize`` writes it; the numpy
integer backend, the int8 ONNX exporter, ``kosumi inspect`` and the weight plots read the same
scheme, and none of them recomputes a scale.

Scheme (``bits`` 8):

- per layer (a ``conv`` or ``linear`` node of the graph): ``mode`` ``int8`` or ``float`` (kept
  in float32: the layers ``--keep-float`` names or ``auto`` picks);
- per int8 layer, tensors ``NAME.weight`` int8 (symmetric, per output channel, range
  [-``weight_max``, ``weight_max``]), ``NAME.weight_scale`` float32 [O], ``NAME.bias`` int32 [O]
  (bias / (input scale * weight scale), rounded), and the fixed-point requantisation of its
  output where it has one: ``NAME.multiplier`` int32 [O] and ``NAME.shift`` int32 [O];
- per quantized activation (a value of the graph; a flatten's output shares its input's):
  ``scale``, ``dtype`` and ``zero_point``. ``activations`` ``uint8`` (the default: ONNX
  Runtime's fast CPU kernels take uint8 activations, and its integer ops one type for all their
  activations): zero point 0 for values never negative (every ReLU output: the clamp at 0 *is*
  the ReLU, so a ReLU after a quantized op costs nothing), 128 for signed ones. ``activations``
  ``int8`` (TensorRT, which takes symmetric int8 only): int8, zero point 0, everywhere;
- per integer add (residual adds, and the stem's and KataGo's per-channel biases): the two
  input rescales as fixed-point multipliers with one shift (``adds``).

``bits`` 16: every tensor float16, no activation quantization.

Integer arithmetic (the contract the numpy backend implements and ONNX Runtime's int8 run is
checked against, to 1 LSB per activation):

- a layer: acc = sum(q_w * (q_x - z_x)) + q_b in int32 (int8 weights; the input's zero point
  z_x is also the value of the zero padding);
- requantisation: y = clamp((acc * M0 + 2^(S-1)) >> S + z_y) with S = 31 + shift (a fused ReLU
  clamps at z_y from below: with uint8 and z_y = 0 that is the clamp anyway): the multiplier
  s_x * s_w / s_y as M0 in [2^30, 2^31) times 2^-shift, rounded half up (towards +inf), computed
  in int64 (``requantize``);
- an add: y = clamp(((a - z_a) * Ma + (b - z_b) * Mb + 2^(S-1)) >> S + z_y), Ma ~ s_a / s_y *
  2^S, Mb ~ s_b / s_y * 2^S with one S (``add_multipliers``);
- quantize-in (a float value entering the integer graph): q = clamp(round_half_even(x / s) +
  z); dequantize-out: x = (q - z) * s, or for a layer whose output leaves the integer graph,
  acc * s_x * s_w (no requantisation).

``integer_plan(graph, scheme)`` turns the graph and the layer modes into the executable plan:
which values are quantized, which ReLUs are fused into the op before them, which adds run in
integers. Needs numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.graph import WEIGHTED_OPS, Graph, Node, float_tensors, graph_tensors

SCHEME_VERSION = 1
INT32_MAX = 2**31 - 1
INT_OPS = ("add", "add_bias")  # ops that run in integers when both inputs are quantized
DTYPE_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


# ---------------------------------------------------------------------------- the scheme
@dataclass
class ActQuant:
    """How one activation (a graph value) is quantized: x = (q - zero_point) * scale."""

    scale: float
    dtype: str  # "uint8" | "int8"
    zero_point: int = 0  # 0, or 128 for a signed value stored as uint8

    @property
    def qmin(self) -> int:
        return DTYPE_RANGES[self.dtype][0]

    @property
    def qmax(self) -> int:
        return DTYPE_RANGES[self.dtype][1]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"scale": self.scale, "dtype": self.dtype}
        if self.zero_point:
            d["zero_point"] = self.zero_point
        return d


@dataclass
class QuantScheme:
    """See the module docstring. ``layers``: layer name -> "int8" | "float"; ``acts``: value
    name -> ``ActQuant``; ``adds``: add node name -> {"ma", "mb", "shift"}; ``info``: how it was
    made (method, calibration positions, CPU, sensitivity), never read by the arithmetic."""

    bits: int = 8
    layers: dict[str, str] = field(default_factory=dict)
    acts: dict[str, ActQuant] = field(default_factory=dict)
    adds: dict[str, dict[str, int]] = field(default_factory=dict)
    weight_max: int = 127
    activations: str = "uint8"  # "uint8" (zero point 128 for signed values) | "int8"
    info: dict[str, Any] = field(default_factory=dict)

    def int_layers(self) -> list[str]:
        return [n for n, mode in self.layers.items() if mode == "int8"]

    def to_dict(self) -> dict[str, Any]:
        """The scheme as JSON, activations and adds in name order: the same net gives the
        same bytes whatever order its sets were built in (Python's hash seed)."""
        return {"version": SCHEME_VERSION, "bits": self.bits, "weight_max": self.weight_max,
                "activations": self.activations,
                "layers": dict(self.layers),
                "acts": {k: self.acts[k].to_dict() for k in sorted(self.acts)},
                "adds": {k: dict(self.adds[k]) for k in sorted(self.adds)}, "info": self.info}

    @classmethod
    def from_dict(cls, d: Any, source: str = "quantization") -> QuantScheme:
        if not isinstance(d, dict):
            raise KosumiError(f"{source}: the quantization scheme is not a JSON object")
        if d.get("version") != SCHEME_VERSION:
            raise KosumiError(f"{source}: quantization scheme version {d.get('version')!r} is "
                              f"not supported (this kosumi reads {SCHEME_VERSION})")
        try:
            bits = int(d["bits"])
            acts = {k: ActQuant(float(v["scale"]), str(v["dtype"]), int(v.get("zero_point", 0)))
                    for k, v in d.get("acts", {}).items()}
            scheme = cls(bits=bits, layers=dict(d.get("layers", {})), acts=acts,
                         adds={k: {kk: int(vv) for kk, vv in v.items()}
                               for k, v in d.get("adds", {}).items()},
                         weight_max=int(d.get("weight_max", 127)),
                         activations=str(d.get("activations", "uint8")),
                         info=dict(d.get("info", {})))
        except (KeyError, TypeError, ValueError) as e:
            raise KosumiError(f"{source}: malformed quantization scheme ({e})") from None
        if bits not in (8, 16):
            raise KosumiError(f"{source}: quantization bits {bits} (kosumi makes 8 or 16)")
        for name, a in acts.items():
            if a.dtype not in DTYPE_RANGES or not (a.scale > 0 and math.isfinite(a.scale)) \
                    or not a.qmin <= a.zero_point <= a.qmax:
                raise KosumiError(f"{source}: activation {name!r}: bad scale, dtype or zero "
                                  "point")
        for name, mode in scheme.layers.items():
            if mode not in ("int8", "float"):
                raise KosumiError(f"{source}: layer {name!r}: mode {mode!r} is not int8/float")
        return scheme


def scheme_of(config: Any) -> QuantScheme | None:
    """The scheme of a net's config, or None for a float net."""
    q = getattr(config, "quantization", None)
    return QuantScheme.from_dict(q) if q else None


# ---------------------------------------------------------------------------- fixed point
def quantize_multiplier(m: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Real multipliers m > 0 as (M0 int32 in [2^30, 2^31), shift int32) with
    m ~ M0 * 2^-(31 + shift) (shift may be negative for m >= 1)."""
    m = np.atleast_1d(np.asarray(m, dtype=np.float64))
    if not (m > 0).all() or not np.isfinite(m).all():
        raise ValueError("requantisation multipliers must be positive and finite")
    mant, exp = np.frexp(m)  # m = mant * 2^exp, mant in [0.5, 1)
    m0 = np.round(mant * 2.0**31).astype(np.int64)
    carry = m0 == 2**31  # mant rounded up to 1.0
    m0[carry] //= 2
    exp = exp + carry
    return m0.astype(np.int32), (-exp).astype(np.int32)


def requantize(acc: np.ndarray, m0: np.ndarray, shift: np.ndarray, act: ActQuant,
               axis: int = -1, relu: bool = False) -> np.ndarray:
    """int32 accumulators -> the output act's clamped values (see the module docstring: round
    half up, then the zero point). ``m0``/``shift`` broadcast along ``axis`` (channels)."""
    shape = [1] * acc.ndim
    shape[axis] = -1
    m = m0.astype(np.int64).reshape(shape)
    s = (31 + shift.astype(np.int64)).reshape(shape)
    prod = acc.astype(np.int64, copy=False) * m
    y = ((prod + (np.int64(1) << (s - 1))) >> s) + act.zero_point
    return np.clip(y, act.zero_point if relu else act.qmin, act.qmax)


def add_multipliers(ma: float, mb: float) -> dict[str, int]:
    """Two rescales of an integer add with one shift S: {"ma", "mb", "shift"} (S <= 62)."""
    big = max(ma, mb)
    shift = 30 - math.ceil(math.log2(big)) if big > 0 else 30
    shift = max(0, min(shift, 40))
    return {"ma": round(ma * 2.0**shift), "mb": round(mb * 2.0**shift), "shift": shift}


def integer_add(a: np.ndarray, b: np.ndarray, p: dict[str, int], act_a: ActQuant,
                act_b: ActQuant, out: ActQuant, relu: bool = False) -> np.ndarray:
    """y = clamp(((a - za) * Ma + (b - zb) * Mb + 2^(S-1)) >> S + zy), in int64 (see the module
    docstring)."""
    s = p["shift"]
    y = (a.astype(np.int64) - act_a.zero_point) * p["ma"] \
        + (b.astype(np.int64) - act_b.zero_point) * p["mb"]
    if s > 0:
        y = (y + (1 << (s - 1))) >> s
    return np.clip(y + out.zero_point, out.zero_point if relu else out.qmin, out.qmax)


def quantize_values(x: np.ndarray, act: ActQuant) -> np.ndarray:
    """Quantize-in: clamp(round_half_even(x / scale) + zero_point) as int32 values."""
    q = np.rint(np.asarray(x, dtype=np.float64) / act.scale) + act.zero_point
    return np.clip(q, act.qmin, act.qmax).astype(np.int32)


# ---------------------------------------------------------------------------- the plan
@dataclass
class PlanStep:
    """One node as the integer backend (and the QDQ exporter) runs it."""

    node: Node
    integer: bool  # runs in integers (all inputs quantized)
    output: str  # the value it produces (a fused ReLU's output when ``fused``)
    fused: Node | None = None  # the ReLU after this op (its clamp when the output is uint8)
    quant_inputs: tuple[str, ...] = ()  # float inputs this step quantizes first (quantize-in)
    requant: bool = False  # its output is quantized (else a float result)


@dataclass
class IntegerPlan:
    steps: list[PlanStep]
    quantized: set[str]  # the values that exist quantized at run time
    shared: dict[str, str] = field(default_factory=dict)  # flatten output -> its input (same act)


def integer_plan(graph: Graph, layers: dict[str, str],
                 requant: Collection[str] = ()) -> IntegerPlan:
    """Which ops run in integers, which values are quantized, which ReLUs are fused, for a graph
    whose weighted layers are in ``layers`` modes (see the module docstring). The acts the
    scheme must hold are exactly ``plan.quantized``. ``requant``: outputs of integer weighted
    layers to requantize even though only float ops read them (a scheme passes its ``acts``:
    it holds a scale exactly for the values that exist quantized), so that a backend runs the
    layer as one integer op (ONNX Runtime fuses DQ-Conv-Q into QLinearConv, not DQ-Conv)."""
    steps = _integer_steps(graph, {name for name, mode in layers.items() if mode == "int8"})
    # pass 2, backwards (every consumer before its producer): which values must exist
    # quantized. A weighted integer layer needs its inputs quantized; an add or a flatten stays
    # integer only when its result is needed quantized, else it runs in float.
    needed: set[str] = set()
    for st in reversed(steps):
        if not st.integer:
            continue
        if st.node.op not in WEIGHTED_OPS and st.output not in needed:
            st.integer = False
            continue
        needed.update(st.node.inputs)
    produced: set[str] = set()  # values integer steps produce quantized
    for st in steps:  # (a fused ReLU of a step that ended up float is applied in float)
        if st.integer:
            st.quant_inputs = tuple(v for v in st.node.inputs if v not in produced)
            st.requant = st.output in needed or (st.node.op in WEIGHTED_OPS
                                                 and st.output in requant)
            if st.requant:
                produced.add(st.output)
    quantized = set(needed) | produced
    shared = {st.output: st.node.inputs[0] for st in steps
              if st.node.op == "flatten" and st.integer}
    return IntegerPlan(steps=steps, quantized=quantized, shared=shared)


def _integer_steps(graph: Graph, int_layers: set[str]) -> list[PlanStep]:
    """Pass 1, in order: which ops are integer (an add is integer when an input comes from an
    integer op), with the ReLU each integer op absorbs."""
    consumers: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for v in n.inputs:
            consumers.setdefault(v, []).append(n)
    fusible = set(WEIGHTED_OPS) | set(INT_OPS)

    def fused_relu(n: Node) -> Node | None:
        cons = consumers.get(n.output, [])
        return cons[0] if len(cons) == 1 and cons[0].op == "relu" and n.op in fusible else None

    integer_values: set[str] = set()  # values produced by integer ops (before quantization)
    steps: list[PlanStep] = []
    skip: set[int] = set()
    for n in graph.nodes:
        if id(n) in skip:
            continue
        relu = fused_relu(n)
        out = relu.output if relu is not None else n.output
        if n.op in WEIGHTED_OPS:
            integer = n.name in int_layers
        elif n.op in INT_OPS:  # the other input, if float, is quantized on the way in
            integer = any(v in integer_values for v in n.inputs)
        elif n.op == "flatten":  # a reshape: a quantized value stays quantized, same act
            integer = n.inputs[0] in integer_values
        else:  # pools, concat, affine, a ReLU not fused into the op before it: float
            integer = False
        if relu is not None and integer:
            skip.add(id(relu))
        elif relu is not None:
            relu, out = None, n.output
        steps.append(PlanStep(node=n, integer=integer, output=out, fused=relu))
        if integer:
            integer_values.add(out)
    return steps

def check_int32(name: str, values: np.ndarray, what: str) -> np.ndarray:
    """``values`` as int32, or KosumiError naming the layer when one does not fit."""
    v = np.asarray(values)
    big = np.abs(v).max() if v.size else 0
    if not np.isfinite(v).all() or big > INT32_MAX:
        raise KosumiError(f"layer {name}: its {what} overflows int32 (|value| up to {big:.3g}; "
                          "a scale too small for its bias -- recalibrate or keep the layer in "
                          "float with --keep-float)")
    return np.rint(v).astype(np.int32)


def describe_scheme(config: Any, tensors: dict[str, np.ndarray]) -> dict[str, Any]:
    """What ``kosumi inspect`` shows of a quantized net: bits, how it was made, and one line per
    layer (mode, weight scale range, input and output quantization)."""
    from kosumi.nets.graph import inference_graph

    scheme = scheme_of(config)
    assert scheme is not None
    info = scheme.info
    out: dict[str, Any] = {"bits": scheme.bits}
    if scheme.bits == 16:
        return out
    out.update(method=info.get("method"), weight_range=scheme.weight_max,
               calibration_positions=info.get("calibration_positions"),
               kept_float=info.get("keep_float", []))
    rounding = info.get("rounding")
    out["weight_rounding"] = (rounding.get("chosen") if isinstance(rounding, dict)
                              else rounding or "nearest")
    graph = inference_graph(config)
    plan = integer_plan(graph, scheme.layers, scheme.acts)
    acts = dict(scheme.acts)
    layers = {}
    for st in plan.steps:
        n = st.node
        if n.op not in WEIGHTED_OPS:
            continue
        if not st.integer:
            layers[n.name] = "float32"
            continue
        sw = tensors.get(f"{n.name}.weight_scale")
        a_in = acts.get(n.inputs[0])
        text = "int8"
        if sw is not None and sw.size:
            text += f" w-scale {float(sw.min()):.3g}..{float(sw.max()):.3g}"
        def act_text(a: ActQuant) -> str:
            return f"{a.dtype} x{a.scale:.3g}" + (f" zp {a.zero_point}" if a.zero_point else "")

        if a_in is not None:
            text += f", in {act_text(a_in)}"
        a_out = acts.get(st.output) if st.requant else None
        text += f", out {act_text(a_out)}" if a_out else ", out float"
        layers[n.name] = text
    out["layers"] = layers
    return out


def check_quantized_tensors(config: Any, tensors: dict[str, np.ndarray], source: str) -> None:
    """A quantized net's tensors against its scheme: every tensor the plan needs is there, with
    its type; KosumiError naming the first problem (a damaged or hand-edited file)."""
    from kosumi.nets.graph import inference_graph

    scheme = scheme_of(config)
    if scheme is None:
        raise KosumiError(f"{source}: not a quantized net")
    graph = inference_graph(config)
    expected = (_fp16_tensors(graph) if scheme.bits == 16
                else _int8_tensors(integer_plan(graph, scheme.layers, scheme.acts), scheme, source))
    for name, kind in expected.items():
        t = tensors.get(name)
        if t is None:
            raise KosumiError(f"{source}: tensor {name!r} is missing (the quantization scheme "
                              "needs it)")
        ok = t.dtype.kind == "f" if kind == "f" else t.dtype == np.dtype(kind)
        if not ok:
            raise KosumiError(f"{source}: tensor {name!r} is {t.dtype}, the scheme needs {kind}")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise KosumiError(f"{source}: unexpected tensor {extra[0]!r} (not in the quantized net)")


def _fp16_tensors(graph: Graph) -> dict[str, str]:
    """The tensors (name -> dtype kind) of a 16-bit net: every weight and bias in float."""
    return dict.fromkeys(graph_tensors(graph), "f")


def _int8_tensors(plan: IntegerPlan, scheme: QuantScheme, source: str) -> dict[str, str]:
    """The tensors (name -> dtype) of an 8-bit net's plan; KosumiError when the scheme lacks
    an activation scale or an add's rescales the plan needs."""
    expected: dict[str, str] = {}
    for st in plan.steps:
        n = st.node
        expected.update(dict.fromkeys(float_tensors(n), "f"))
        if n.op not in WEIGHTED_OPS:
            continue
        if not st.integer:
            expected[f"{n.name}.weight"] = expected[f"{n.name}.bias"] = "f"
            continue
        expected.update({f"{n.name}.weight": "int8", f"{n.name}.bias": "int32",
                         f"{n.name}.weight_scale": "f"})
        if st.requant:
            expected[f"{n.name}.multiplier"] = expected[f"{n.name}.shift"] = "int32"
    for v in plan.quantized:
        if v not in scheme.acts and plan.shared.get(v) not in scheme.acts:
            raise KosumiError(f"{source}: quantization scheme: activation {v!r} has no scale")
    for st in plan.steps:
        if st.integer and st.node.op in INT_OPS and st.node.name not in scheme.adds:
            raise KosumiError(f"{source}: quantization scheme: add {st.node.name!r} has no "
                              "rescales")
    return expected
