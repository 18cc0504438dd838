"""The inference graph of a net: a short list of named layers over the folded tensors.

``inference_graph(config)`` describes, for every net kosumi runs (heads ``conv``, ``lz`` and
``katago``), the computation from the feature arrays to the raw outputs of the backend contract
(``runtime.backend``) as a straight list of ``Node``s. Its layer names are the names of
``kosumi.nets.fold.fold_batchnorm``'s tensors (``NAME.weight``, ``NAME.bias``, ``NAME.scale``),
so the graph plus the folded tensors is the whole net. Everything that runs or rewrites a net
without torch reads it: the ONNX exporter, the numpy backend, and (next) quantization and the
weight plots, which key their per-layer data by these names.

Values are named strings; the inputs are ``planes`` [B, C, N, N] and ``globals`` [B, G] (absent
when the feature set has no globals). Ops (shapes for a batch of B boards of N x N):

    conv      x [B,I,N,N] -> [B,O,N,N]; NAME.weight [O,I,k,k], NAME.bias [O]; zero padding k//2
    linear    x [B,I] -> [B,O]; NAME.weight [O,I], NAME.bias [O]
    affine    x [B,C,N,N] -> x * NAME.scale + NAME.bias, per channel
    relu      x -> max(x, 0)
    silu      x -> x * sigmoid(x)
    mish      x -> x * tanh(softplus(x))
    mul       (a, b) -> a * b, same shapes
    rmsnorm   x [B,C,N,N] -> x / sqrt(mean(x^2) + eps), the mean over each point's channels, or
              (``spatial``) over the channels and the whole board; attrs eps, spatial
    attention (q [B,H*D,N,N], k [B,K*D,N,N], v [B,K*E,N,N]) -> [B,H*E,N,N]: the board's points
              as tokens (row-major), per head softmax(q.k / sqrt(D)) v, KV head h // (H/K);
              rotary position embedding on q and k first (attrs heads, kv_heads, q_dim, v_dim,
              rope "learned" with tensor NAME.rope_freqs [K, D/2, 2], "fixed" with rope_theta,
              or "none"; see ``kosumi.nets.katago_net.rope_angles``)
    add       (a, b) -> a + b, same shapes
    add_bias  (x [B,C,N,N], v [B,C]) -> x + v per channel
    mean_max  x [B,C,N,N] -> [B,2C]: mean, then max over the board
    area      planes -> [B,1]: the number of on-board points (sum of plane 0; KataGo)
    kata_gpool (x, area) -> [B,3C]: mean, mean*(sqrt(area)-14)/10, max
    kata_vpool (x, area) -> [B,3C]: mean, mean*(sqrt(area)-14)/10, mean*((sqrt(area)-14)^2/100-0.1)
    flatten   x [B,C,N,N] -> [B, C*N*N], channel-major
    concat    (a [B,p], b [B,q]) -> [B,p+q]
    squeeze   x [B,1] -> [B]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kosumi.nets.config import NetConfig
from kosumi.nets.features import get_feature_set
from kosumi.nets.katago_layout import activation, block_specs

#: ops that hold weights (``NAME.weight`` and ``NAME.bias``): the layers to quantize and plot
WEIGHTED_OPS = ("conv", "linear")


@dataclass(frozen=True)
class Node:
    """One layer: ``op`` applied to ``inputs`` (value names), giving ``output``."""

    op: str
    name: str
    inputs: tuple[str, ...]
    output: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Graph:
    """A net's inference graph: nodes in execution order and the raw outputs they give."""

    nodes: list[Node]
    outputs: dict[str, str]  # raw output name (backend contract) -> value name
    has_globals: bool
    num_planes: int
    num_globals: int
    fixed_size: int | None = None  # the one board size the graph runs (lz head), else None

    def weighted(self) -> list[Node]:
        """The nodes with weights, in order (convolutions and dense layers)."""
        return [n for n in self.nodes if n.op in WEIGHTED_OPS]


def float_tensors(node: Node) -> list[str]:
    """The tensors a node reads besides a weighted layer's weight and bias, always kept in float
    (also in a quantized net): an affine's scale and bias, an attention's learned rotary
    frequencies."""
    if node.op == "affine":
        return [f"{node.name}.scale", f"{node.name}.bias"]
    if node.op == "attention" and node.attrs.get("rope") == "learned":
        return [f"{node.name}.rope_freqs"]
    return []


def graph_tensors(graph: Graph) -> list[str]:
    """Every tensor a float run of the graph reads, in node order: each weighted layer's
    ``.weight`` and ``.bias``, and the others' float tensors (``float_tensors``)."""
    out: list[str] = []
    for n in graph.nodes:
        if n.op in WEIGHTED_OPS:
            out += [f"{n.name}.weight", f"{n.name}.bias"]
        out += float_tensors(n)
    return out


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def add(self, op: str, name: str, *inputs: str, **attrs: Any) -> str:
        out = name if op in WEIGHTED_OPS or op == "affine" else f"{name}:{op}"
        self.nodes.append(Node(op, name, tuple(inputs), out, dict(attrs)))
        return out


def inference_graph(config: NetConfig) -> Graph:
    """The graph of a net of this config (see the module docstring)."""
    fs = get_feature_set(config.features)
    b = _Builder()
    has_globals = fs.num_globals > 0
    outputs = _katago(b, config) if config.family == "katago" else _kosumi(b, config, has_globals)
    return Graph(nodes=b.nodes, outputs=outputs, has_globals=has_globals,
                 num_planes=fs.num_planes, num_globals=fs.num_globals,
                 fixed_size=19 if config.head == "lz" else None)


def _kosumi(b: _Builder, config: NetConfig, has_globals: bool) -> dict[str, str]:
    x = b.add("conv", "input_conv", "planes", kernel=3)
    if has_globals:
        g = b.add("linear", "global_linear", "globals")
        x = b.add("add_bias", "stem", x, g)
    x = b.add("relu", "stem", x)
    for i in range(config.blocks):
        p = f"blocks.{i}"
        y = b.add("relu", f"{p}.conv1", b.add("conv", f"{p}.conv1", x, kernel=3))
        y = b.add("conv", f"{p}.conv2", y, kernel=3)
        x = b.add("relu", p, b.add("add", p, x, y))
    pol = b.add("relu", "policy_conv", b.add("conv", "policy_conv", x, kernel=1))
    val = b.add("relu", "value_conv", b.add("conv", "value_conv", x, kernel=1))
    if config.head == "lz":
        logits = b.add("linear", "policy_fc", b.add("flatten", "policy_conv", pol))
        h = b.add("relu", "value_fc1",
                  b.add("linear", "value_fc1", b.add("flatten", "value_conv", val)))
        return {"policy": logits, "value": b.add("linear", "value_fc2", h)}
    points = b.add("flatten", "policy_point", b.add("conv", "policy_point", pol, kernel=1))
    passes = b.add("linear", "policy_pass", b.add("mean_max", "policy_pool", pol))
    outputs = {"policy": b.add("concat", "policy", points, passes)}
    if config.value_pool == "katago":  # plane 0 is the on-board mask (NetConfig checks it)
        pooled = b.add("kata_gpool", "value_pool", val, b.add("area", "area", "planes"))
    else:
        pooled = b.add("mean_max", "value_pool", val)
    h = b.add("relu", "value_fc1", b.add("linear", "value_fc1", pooled))
    outputs["value"] = b.add("linear", "value_fc2", h)
    if config.score_lead:
        outputs["score_lead"] = b.add("squeeze", "score_fc", b.add("linear", "score_fc", h))
    if config.ownership:
        outputs["ownership"] = b.add("flatten", "ownership_conv",
                                     b.add("conv", "ownership_conv", val, kernel=1))
    return outputs


def _act(b: _Builder, kind: str, name: str, x: str) -> str:
    return x if kind == "identity" else b.add(kind, name, x)


def _katago_block(b: _Builder, p: str, spec: dict[str, Any], x: str, area: str, act: str) -> str:
    kind = spec["kind"]
    if kind in ("ordinary", "gpool"):
        y = _act(b, act, f"{p}.pre", b.add("affine", f"{p}.pre", x))
        a = b.add("conv", f"{p}.conv1", y, kernel=3)
        if kind == "gpool":
            g = _act(b, act, f"{p}.gconv", b.add("conv", f"{p}.gconv", y, kernel=3))
            pooled = b.add("kata_gpool", f"{p}.gpool", g, area)
            a = b.add("add_bias", f"{p}.conv1", a, b.add("linear", f"{p}.gmul", pooled))
        a = _act(b, act, f"{p}.conv1", a)
        return b.add("add", p, x, b.add("conv", f"{p}.conv2", a, kernel=3))
    if kind == "nested":
        y = _act(b, act, f"{p}.pre", b.add("affine", f"{p}.pre", x))
        y = b.add("conv", f"{p}.conv_in", y, kernel=spec["kernel_in"])
        for j, inner in enumerate(spec["blocks"]):
            y = _katago_block(b, f"{p}.blocks.{j}", inner, y, area, act)
        y = _act(b, act, f"{p}.post", b.add("affine", f"{p}.post", y))
        return b.add("add", p, x, b.add("conv", f"{p}.conv_out", y, kernel=spec["kernel_out"]))
    # transformer blocks: the norm's weight is folded into the projections that read it
    y = b.add("rmsnorm", f"{p}.norm", x, eps=spec["eps"], spatial=False)
    if kind == "attention":
        qkv = [b.add("conv", f"{p}.{w}", y, kernel=1) for w in ("q", "k", "v")]
        o = b.add("attention", p, *qkv, heads=spec["heads"], kv_heads=spec["kv_heads"],
                  q_dim=spec["q_dim"], v_dim=spec["v_dim"], rope=spec["rope"],
                  rope_theta=spec.get("rope_theta", 0.0))
        return b.add("add", p, x, b.add("conv", f"{p}.out", o, kernel=1))
    h = b.add("conv", f"{p}.w1", y, kernel=1)
    if spec["gated"]:
        h = b.add("mul", f"{p}.gate", b.add("silu", f"{p}.w1", h),
                  b.add("conv", f"{p}.gate", y, kernel=1))
    else:
        h = _act(b, act, f"{p}.w1", h)
    return b.add("add", p, x, b.add("conv", f"{p}.w2", h, kernel=1))


def _katago(b: _Builder, config: NetConfig) -> dict[str, str]:
    lay = config.katago
    act = activation(lay)
    area = b.add("area", "area", "planes")
    x = b.add("conv", "conv1", "planes", kernel=int(lay["initial_kernel"]))
    x = b.add("add_bias", "stem", x, b.add("linear", "global_in", "globals"))
    for i, spec in enumerate(block_specs(lay)):
        x = _katago_block(b, f"blocks.{i}", spec, x, area, act)
    norm = lay.get("trunk_norm")
    if norm is not None:
        x = b.add("rmsnorm", "tip", x, eps=norm["eps"], spatial=norm["spatial"])
    x = _act(b, act, "tip", b.add("affine", "tip", x))
    g = _act(b, act, "g1", b.add("conv", "g1", x, kernel=1))
    gp = b.add("kata_gpool", "g1_pool", g, area)
    p1 = b.add("add_bias", "p1", b.add("conv", "p1", x, kernel=1),
               b.add("linear", "g1_bias", gp))
    points = b.add("flatten", "p2", b.add("conv", "p2", _act(b, act, "p1", p1), kernel=1))
    passes = b.add("linear", "g1_pass", gp)
    if lay.get("pass_hidden", 0):
        passes = b.add("linear", "pass2", _act(b, act, "g1_pass", passes))
    policy = b.add("concat", "policy", points, passes)
    v = _act(b, act, "v1", b.add("conv", "v1", x, kernel=1))
    h = _act(b, act, "v2", b.add("linear", "v2", b.add("kata_vpool", "v1_pool", v, area)))
    return {
        "policy": policy,
        "value": b.add("linear", "v3", h),
        "score": b.add("linear", "sv3", h),
        "ownership": b.add("flatten", "own", b.add("conv", "own", v, kernel=1)),
    }
