"""``kosumi export MODEL --format tensorrt --precision fp16 --batch 1,16,64 --out NET.plan``.

Builds a TensorRT engine from kosumi's own ONNX export of the net (``nets.onnx``) and writes it
in a kosumi plan container (``nets.trt_plan``: the config, the TensorRT version, the GPU it was
built for, the optimisation profiles). It works with the TensorRT 10 and 11 Python APIs:

- the network is built *strongly typed* where the API has the flag (TensorRT >= 9; TensorRT 11
  removed the builder's FP16/INT8 flags, so precision comes from the network's own types): an
  fp16 engine is built from the fp16 ONNX, an fp32 engine from the fp32 one, an int8 engine from
  the explicit Q/DQ ONNX of a net quantized with ``--activations int8`` (TensorRT takes
  symmetric int8 only; kosumi's own scales, no TensorRT calibration). Without the flag (older
  10.x builds) the fp32 ONNX is built with ``BuilderFlag.FP16``, the Q/DQ one with ``INT8``;
- one optimisation profile per board size (``--size``, default the config's sizes, at most the
  usual 9, 13 and 19 for nets that play every size), each over the batch range ``--batch``
  (min, opt, max); the backend picks the profile of the batch's board size;
- a timing cache (``$KOSUMI_TRT_CACHE_DIR``, else ``~/.cache/kosumi/tensorrt/timing.cache``)
  is loaded and saved again, so rebuilding a net (or a similar one) on the same GPU is quick.

GPU only: without TensorRT or a CUDA device this is a one-line error naming what to install.
"""

from __future__ import annotations

import os
from typing import Any

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write, output_errors, user_cache_dir
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.graph import inference_graph
from kosumi.nets.onnx import onnx_bytes
from kosumi.nets.trt_plan import gpu_identity, plan_bytes

CACHE_ENV = "KOSUMI_TRT_CACHE_DIR"
DEFAULT_SIZES = (9, 13, 19)


def _import_trt() -> Any:
    try:
        import tensorrt as trt
    except ImportError:
        raise KosumiError("TensorRT export needs the tensorrt package and an NVIDIA GPU (pip "
                          "install 'kosumi[tensorrt]')") from None
    return trt


def _batches(text: str | list[int]) -> tuple[int, int, int]:
    try:
        values = [int(x) for x in text.split(",")] if isinstance(text, str) else list(text)
    except ValueError:
        raise KosumiError(f"--batch: {text!r} is not a list of integers like 1,16,64") from None
    if not values or any(v < 1 for v in values):
        raise KosumiError(f"--batch: {text!r}: batches are positive")
    values = sorted(values)
    lo, hi = values[0], values[-1]
    opt = values[len(values) // 2] if len(values) > 2 else hi
    return lo, opt, hi


def profile_sizes(board_sizes: list[int], sizes: str | None = None) -> list[int]:
    """The board sizes to build profiles for: ``sizes`` if given, else the config's (the usual
    9, 13, 19 among them for a net that plays every size)."""
    if sizes:
        try:
            wanted = sorted({int(s) for s in str(sizes).split(",")})
        except ValueError:
            raise KosumiError(f"--size: {sizes!r} is not a list of board sizes") from None
        bad = [s for s in wanted if s not in board_sizes]
        if bad:
            raise KosumiError(f"--size: the net does not play {bad[0]}x{bad[0]}")
        return wanted
    if len(board_sizes) <= len(DEFAULT_SIZES):
        return list(board_sizes)
    return [s for s in DEFAULT_SIZES if s in board_sizes] or list(board_sizes[-1:])


def build_engine(checkpoint: Checkpoint, precision: str = "fp16", batch: str = "1,16,64",
                 sizes: str | None = None, device_index: int = 0) -> tuple[bytes, dict[str, Any]]:
    """(serialized engine, plan header) for a net (see the module docstring)."""
    config = checkpoint.config
    if config.own_precision is not None:
        precision = config.own_precision
        if precision == "int8" and config.quantization.get("activations") != "int8":
            raise KosumiError("TensorRT runs symmetric int8 activations only: quantize the net "
                              "with --activations int8 for TensorRT")
    elif precision not in ("fp16", "fp32"):
        raise KosumiError(f"TensorRT precision {precision!r}: use fp16 or fp32 (an int8 engine "
                          "comes from a net quantized with kosumi quantize --activations int8)")
    trt = _import_trt()
    gpu = gpu_identity(device_index)
    graph = inference_graph(config)
    built_sizes = profile_sizes(config.board_sizes, sizes)
    flag_enum = trt.NetworkDefinitionCreationFlag
    strongly = hasattr(flag_enum, "STRONGLY_TYPED")
    onnx_precision = precision if strongly or precision == "int8" else "fp32"
    model = onnx_bytes(config, checkpoint.tensors, onnx_precision, pad_channels=False)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 1 << int(flag_enum.STRONGLY_TYPED) if strongly else 0
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise KosumiError(f"TensorRT cannot parse kosumi's ONNX export: {errors}")
    bconfig = builder.create_builder_config()
    bconfig.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
    if not strongly and precision == "fp16":
        bconfig.set_flag(trt.BuilderFlag.FP16)
    if not strongly and precision == "int8":  # explicit Q/DQ, TensorRT 10 without typing
        bconfig.set_flag(trt.BuilderFlag.INT8)
    cache_path = user_cache_dir("tensorrt", CACHE_ENV) / "timing.cache"
    try:
        cached = cache_path.read_bytes()
    except OSError:
        cached = b""
    timing = bconfig.create_timing_cache(cached)
    bconfig.set_timing_cache(timing, ignore_mismatch=True)
    lo, opt, hi = _batches(batch)
    profiles = []
    for size in built_sizes:
        profile = builder.create_optimization_profile()
        c = graph.num_planes
        profile.set_shape("planes", (lo, c, size, size), (opt, c, size, size), (hi, c, size, size))
        if graph.has_globals:
            g = graph.num_globals
            profile.set_shape("globals", (lo, g), (opt, g), (hi, g))
        bconfig.add_optimization_profile(profile)
        profiles.append({"size": size, "batch": [lo, opt, hi]})
    serialized = builder.build_serialized_network(network, bconfig)
    if serialized is None:
        raise KosumiError("TensorRT could not build an engine for this net (see its log above)")
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache_path, bytes(bconfig.get_timing_cache().serialize()))
    except OSError:
        pass  # the cache only saves time
    plan_config = config.to_dict()
    plan_config["board_sizes"] = built_sizes
    plan_config.pop("version", None)
    header = {"config": plan_config, "precision": precision, "tensorrt": trt.__version__,
              "strongly_typed": strongly, "profiles": profiles, **gpu}
    return bytes(serialized), header


def write_plan_model(checkpoint: Checkpoint, out: str | os.PathLike[str], precision: str = "fp16",
                     batch: str = "1,16,64", sizes: str | None = None,
                     device: str = "cuda", **_: Any) -> str:
    """``kosumi export --format tensorrt``: build and write a kosumi plan; a summary line."""
    index = int(device.split(":")[1]) if ":" in str(device) else 0
    engine, header = build_engine(checkpoint, precision, batch, sizes, index)
    data = plan_bytes(header, engine)
    with output_errors(out):
        atomic_write(out, data)
    sizes_text = ",".join(str(p["size"]) for p in header["profiles"])
    lo, opt, hi = header["profiles"][0]["batch"]
    return (f"wrote {out}: TensorRT {header['tensorrt']} engine, {precision}, for "
            f"{header['gpu']} (sm {header['compute_capability']}), sizes {sizes_text}, batch "
            f"{lo}..{hi} (opt {opt}), {len(data):,} bytes")
