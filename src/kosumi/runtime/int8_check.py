"""ONNX Runtime's int8 run of a quantized net against the integer reference, value by value.

``lsb_apart(config, tensors, states)`` exports the net's explicit Q/DQ ONNX (``nets.onnx``),
exposes every quantized activation as an output, runs ONNX Runtime on the CPU and compares each
with the numpy integer backend's (``runtime.numpy_int8``) on the same inputs. Equal or 1 LSB
apart is the contract of the int8 export; more means ONNX Runtime's kernels do other
arithmetic on this CPU (int16 saturation of uint8 x int8 pairs on x86 without VNNI, for weights
beyond +-63: ``int8_weights="uint8"`` is the exact form there).
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
    exported graph's op types), "unsigned" (weights rewritten as uint8)} over ``states``,
    grouped by board size."""
    import onnx
    import onnxruntime as ort

    from kosumi.nets.graph import inference_graph
    from kosumi.nets.onnx import _QdqBuilder, onnx_model, unsigned_weights
    from kosumi.runtime.numpy_int8 import Int8NumpyBackend

    model = onnx_model(config, tensors)
    rewritten = unsigned_weights(model) if int8_weights == "uint8" else 0
    builder = _QdqBuilder(inference_graph(config), tensors, config)
    builder.run({"planes": "planes", "globals": "globals"})
    for name in builder.qvals.values():  # expose every quantized tensor
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
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
        for value, name in builder.qvals.items():
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
            "fused_ops": sorted({n.op_type for n in model.graph.node}), "unsigned": rewritten}
