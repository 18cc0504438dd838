"""ONNX Runtime's int8 run of a quantized net against the integer reference, value by value.

``lsb_apart(config, tensors, states)`` exports the net's explicit Q/DQ ONNX (``nets.onnx``),
exposes every quantized activation as an output, runs ONNX Runtime on the CPU and compares each
with the numpy integer backend's (``runtime.numpy_int8``) on the same inputs. Equal or 1 LSB
apart is the contract of the int8 export; more means ONNX Runtime's kernels do other
arithmetic on this CPU (int16 saturation of uint8 x int8 pairs on x86 without VNNI, for weights
beyond +-63: ``int8_weights="uint8"`` is the exact form there; "offset", for CPUs with AMX
tiles, must be exact everywhere those kernels do not saturate). End to end, a 1-LSB rounding
early on can reach 2 LSB a few layers later; ``layer_lsb_apart`` runs each int8 convolution
alone on the reference's own input, where anything past 1 LSB is the kernels' arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kosumi.go.board import GameState
from kosumi.nets.config import NetConfig
from kosumi.nets.features import get_feature_set


def lsb_apart(config: NetConfig, tensors: dict[str, np.ndarray], states: list[GameState],
              int8_weights: str = "int8") -> dict[str, Any]:
    """{"max_lsb", "share_over_1_lsb", "values" (how many tensors compared), "fused_ops" (the
    exported graph's op types), "recoded" (weights rewritten in the form ``int8_weights``)}
    over ``states``, grouped by board size."""
    import onnxruntime as ort

    from kosumi.nets.onnx import int8_model_with_values
    from kosumi.nets.onnx_weights import recode_weights
    from kosumi.runtime.numpy_int8 import Int8NumpyBackend

    model, qvals = int8_model_with_values(config, tensors)
    rewritten = recode_weights(model, int8_weights) if int8_weights != "int8" else 0
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    feeds_wanted = {i.name for i in sess.get_inputs()}
    ref = Int8NumpyBackend(config, tensors)
    fs = get_feature_set(config.features)
    worst, over, total, compared = 0, 0, 0, 0
    for size in sorted({s.size for s in states}):
        planes, glob = fs.encode([s for s in states if s.size == size])
        feeds = {"planes": planes, "globals": glob}
        outs = dict(zip(names, sess.run(None, {k: v for k, v in feeds.items()
                                              if k in feeds_wanted}), strict=True))
        values = ref._run(planes, glob)
        for value, name in qvals.items():
            mine = values.get(value)
            if not isinstance(mine, tuple):
                continue
            qa = mine[0] if mine[0].ndim != 4 else mine[0].transpose(0, 3, 1, 2)
            diff = np.abs(qa.astype(np.int64) - outs[name].astype(np.int64))
            worst = max(worst, int(diff.max()))
            over += int((diff > 1).sum())
            total += diff.size
            compared += 1
    return {"max_lsb": worst, "share_over_1_lsb": over / max(1, total), "values": compared,
            "fused_ops": sorted({n.op_type for n in model.graph.node}), "recoded": rewritten}


def layer_lsb_apart(config: NetConfig, tensors: dict[str, np.ndarray], states: list[GameState],
                    int8_weights: str = "int8") -> dict[str, Any]:
    """Each requantized int8 convolution alone: ONNX Runtime's own ``QLinearConv`` on the
    integer reference's input of that layer, against the reference's output. Nothing is
    carried from layer to layer, so the contract is equal or 1 LSB apart for every value;
    saturating kernels show as more. {"max_lsb", "layers" (how many compared), "worst" (the
    layer furthest off)}; ``states`` grouped by board size."""
    import onnxruntime as ort

    from kosumi.nets.onnx import one_conv_model
    from kosumi.nets.onnx_weights import recoded
    from kosumi.runtime.numpy_int8 import Int8NumpyBackend

    ref = Int8NumpyBackend(config, tensors)
    fs = get_feature_set(config.features)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    worst, worst_layer, layers = 0, "", set()
    for size in sorted({s.size for s in states}):
        planes, glob = fs.encode([s for s in states if s.size == size])
        values = ref._run(planes, glob)
        for st in ref.plan.steps:
            n = st.node
            if not (st.integer and n.op == "conv" and st.requant):
                continue
            x_act, y_act = ref.acts[n.inputs[0]], ref.acts[st.output]
            xt = np.uint8 if x_act.dtype == "uint8" else np.int8
            yt = np.uint8 if y_act.dtype == "uint8" else np.int8
            xq = ref._quant(values, n.inputs[0]).transpose(0, 3, 1, 2).astype(xt)
            w: np.ndarray = tensors[f"{n.name}.weight"]
            wz: np.ndarray = np.zeros(w.shape[0], np.int8)
            if int8_weights != "int8":
                w, wz = recoded(w, int8_weights), recoded(wz, int8_weights)
            model = one_conv_model(xq.shape, (x_act.scale, xt(x_act.zero_point)), w,
                                   tensors[f"{n.name}.weight_scale"], wz,
                                   (y_act.scale, yt(y_act.zero_point)), tensors[f"{n.name}.bias"])
            y = ort.InferenceSession(model, so,
                                     providers=["CPUExecutionProvider"]).run(None, {"x": xq})[0]
            if st.fused is not None:  # QLinearConv has no fused ReLU: clamp its output too
                y = np.maximum(y, np.array(y_act.zero_point, yt))
            mine = values[st.output][0].transpose(0, 3, 1, 2)
            diff = int(np.abs(mine.astype(np.int64) - y.astype(np.int64)).max())
            layers.add(n.name)
            if diff > worst:
                worst, worst_layer = diff, n.name
    return {"max_lsb": worst, "layers": len(layers), "worst": worst_layer}
