"""The ``numpy`` backend: a net's inference graph run with numpy alone (no torch, no onnx).

It executes ``kosumi.nets.graph.inference_graph`` over ``kosumi.nets.fold.fold_batchnorm``'s
tensors, float32, activations channels-last ([B, N, N, C]) so that every convolution is one
matrix product of an im2col view. It is the runtime of a bare install (``pip install kosumi``)
and an oracle independent of torch and ONNX Runtime for the folded graph; the quantize issue
adds its integer-only mode here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.config import NetConfig
from kosumi.nets.fold import FoldedNet, fold_batchnorm
from kosumi.nets.graph import Graph, Node, inference_graph
from kosumi.nets.quant import check_quantized_tensors
from kosumi.runtime.backend import Backend
from kosumi.runtime.numpy_int8 import Int8NumpyBackend
from kosumi.runtime.numpy_ops import float_op, graph_inputs
from kosumi.runtime.options import LoadOptions


class NumpyBackend(Backend):
    """Runs a folded inference graph in numpy (see the module docstring)."""

    name = "numpy"

    def __init__(self, config: NetConfig, tensors: dict[str, np.ndarray]):
        """A net's own tensors: a float net's (folded here) or a 16-bit net's."""
        if config.quantized:  # a 16-bit net: its folded float16 tensors, computed in float32
            check_quantized_tensors(config, tensors, "fp16 net")
            self._start(config, inference_graph(config),
                        {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items()})
        else:
            self._start(config, inference_graph(config), fold_batchnorm(config, tensors))

    @classmethod
    def folded(cls, net: FoldedNet) -> NumpyBackend:
        """The float net of tensors already folded (quantization's float reference)."""
        net.check("folded net")
        backend = cls.__new__(cls)
        backend._start(net.config, net.graph,
                       {k: np.asarray(v, dtype=np.float32) for k, v in net.tensors.items()})
        return backend

    def _start(self, config: NetConfig, graph: Graph, tensors: dict[str, np.ndarray]) -> None:
        self.config = config
        self.graph = graph
        self.t = tensors
        # layouts for the hot path: dense weights transposed once
        self.dense = {n.name: np.ascontiguousarray(self.t[f"{n.name}.weight"].T)
                      for n in self.graph.nodes if n.op == "linear"}

    def forward(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        v = self.values(planes, globals)
        return {key: np.ascontiguousarray(v[name], dtype=np.float32)
                for key, name in self.graph.outputs.items()}

    def values(self, planes: np.ndarray, globals: np.ndarray | None) -> dict[str, np.ndarray]:
        """Every value of the graph (channels-last) for one batch: what calibration reads."""
        v = graph_inputs(self.graph, planes, globals)
        self.advance(v, 0, len(self.graph.nodes))
        return v

    def advance(self, v: dict[str, Any], start: int, stop: int) -> None:
        """Run the graph's nodes ``start`` to ``stop - 1`` on ``v`` (the values so far, from
        ``graph_inputs``) in place: a layer-by-layer walk (``quantize.refit``)."""
        for node in self.graph.nodes[start:stop]:
            v[node.output] = self._run(node, [v[name] for name in node.inputs])

    def _run(self, node: Node, xs: list[np.ndarray]) -> np.ndarray:
        return float_op(node, xs, self.t, self.dense)


def limit_blas_threads(threads: int) -> None:
    """numpy's BLAS (the numpy backend's matrix products) to ``threads`` threads, process-wide:
    its default, one per core, oversubscribes a machine that also runs the other engine of a
    match (measured: 20x slower)."""
    if not threads:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a core dependency; a bare copy may lack it
        return
    threadpool_limits(limits=int(threads), user_api="blas")


def open_numpy(config: NetConfig, source: dict[str, np.ndarray] | Path,
               options: LoadOptions) -> Backend:
    """The backend factory registered as ``numpy``: CPU only; float nets in float32, nets
    quantized to 8 bits in integers (``runtime.numpy_int8``)."""
    if isinstance(source, Path):
        raise KosumiError(f"{source}: the numpy backend runs kosumi, KataGo and Leela Zero "
                          "nets, not this file")
    if options.device not in (None, "cpu"):
        raise KosumiError(f"the numpy backend runs on the CPU only, not --device "
                          f"{options.device}")
    limit_blas_threads(options.threads)
    own = config.own_precision
    if own == "int8":
        if options.precision not in ("auto", "int8"):
            raise KosumiError(f"an int8 net runs in int8 (asked for {options.precision})")
        return Int8NumpyBackend(config, source)
    if options.precision not in ("auto", "fp32", "fp16" if own == "fp16" else "fp32"):
        raise KosumiError(f"the numpy backend runs this net in float (asked for "
                          f"{options.precision})")
    return NumpyBackend(config, source)
