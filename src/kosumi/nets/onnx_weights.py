"""How an int8 ONNX file stores its weights: the same integers in the form a CPU's kernels need.

kosumi's int8 export holds symmetric int8 weights (zero point 0), which ONNX Runtime runs in
its fastest kernels on most CPUs. ``recode_weights(model, form)`` rewrites them, the integers
unchanged (q' - z' = q - z), for two kinds of CPU (``runtime.onnxruntime_backend`` chooses):

- ``uint8`` (zero point 128): x86 without VNNI, where ONNX Runtime's uint8 x int8 kernels add
  product pairs in int16 and would saturate for weights beyond +-63;
- ``offset`` (int8 q - 1, zero point -1): CPUs with AMX_INT8 tiles, where ONNX Runtime's
  QGEMM runs on the tiles but its symmetric direct convolution does not.

The form is written in the file's metadata (``kosumi_int8_weights``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kosumi.errors import KosumiError
from kosumi.nets.config import NetConfig
from kosumi.nets.onnx_meta import META_CONFIG, META_INT8_WEIGHTS

INT8_WEIGHTS = ("int8", "uint8", "offset")  # how int8 weights are stored (recode_weights)
#: each form in words, for what kosumi prints
FORM_NAMES = {"int8": "int8 weights", "uint8": "uint8 weights",
              "offset": "int8 weights with zero point -1"}


def recoded(q: np.ndarray, form: str) -> np.ndarray:
    """int8 weight integers (or their zero points) as ``form`` stores them: "uint8" q + 128,
    "offset" q - 1 (int8; needs q >= -127, which symmetric weights are)."""
    if form == "uint8":
        return (q.astype(np.int16) + 128).astype(np.uint8)
    if form == "offset":
        return (q.astype(np.int16) - 1).astype(np.int8)
    raise ValueError(f"no weight form {form!r}")


def recode_weights(model: Any, form: str) -> int:
    """Rewrite an int8 Q/DQ model in place so that every int8 weight initializer read by a
    DequantizeLinear, and its zero point, are stored as ``form`` (``recoded``): the same
    integers (q' - z' = q - z), so the same arithmetic, on other kernels of ONNX Runtime.

    - "uint8" (zero point 128): its uint8 x uint8 kernels, which widen to int16 before
      multiplying and so never saturate on x86 CPUs without VNNI (its uint8 x int8 ones do for
      weights beyond +-63);
    - "offset" (int8, zero point -1): no longer symmetric, so its convolutions leave the direct
      ``ConvSym`` kernel for im2col + QGEMM, which MLAS runs on AMX_INT8 tiles where the CPU
      has them (``runtime.cpu.int8_tiles``). Only the convolutions at least as wide as the
      trunk (input and output channels, from the ``kosumi_config`` metadata) are recoded: the
      tiles pay off on wide layers, and the narrow stem and heads run faster in ``ConvSym``.

    Returns how many weights it rewrote; metadata ``kosumi_int8_weights`` says the form."""
    from onnx import TensorProto, numpy_helper

    if form not in INT8_WEIGHTS[1:]:
        raise ValueError(f"no weight form {form!r}")
    inits = {t.name: t for t in model.graph.initializer}
    done: dict[str, str] = {}
    width = _trunk_width(model) if form == "offset" else 0

    def stored(name: str) -> str:
        if name not in done:
            q = numpy_helper.to_array(inits[name])
            if form == "offset" and q.size and int(q.min()) < -127:
                raise KosumiError(f"{name}: an int8 weight of -128 has no offset form "
                                  "(symmetric weights are in +-127)")
            new = f"{name}.{form}"
            model.graph.initializer.append(numpy_helper.from_array(recoded(q, form), new))
            done[name] = new
        return done[name]

    count = 0
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear" or len(node.input) < 3:
            continue
        w, zp = inits.get(node.input[0]), inits.get(node.input[2])
        if w is None or zp is None or w.data_type != TensorProto.INT8 or len(w.dims) < 2:
            continue
        if form == "offset" and (len(w.dims) != 4 or min(w.dims[:2]) < width):
            continue
        node.input[0], node.input[2] = stored(node.input[0]), stored(node.input[2])
        count += 1
    used = {i for n in model.graph.node for i in n.input}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    props = {p.key: p.value for p in model.metadata_props}
    props[META_INT8_WEIGHTS] = form
    del model.metadata_props[:]
    for k, v in props.items():
        model.metadata_props.add(key=k, value=v)
    return count


def _trunk_width(model: Any) -> int:
    """The trunk's channels of a kosumi ONNX model, from its config metadata (0 without it)."""
    meta = {p.key: p.value for p in model.metadata_props}
    if META_CONFIG not in meta:
        return 0
    return NetConfig.from_json(meta[META_CONFIG], source=META_CONFIG).channels


def form_words(form: str) -> str:
    """What ``kosumi inspect`` adds to an int8 ONNX file's format for its weights' form."""
    return "" if form == "int8" else f", {FORM_NAMES.get(form, form)}"
