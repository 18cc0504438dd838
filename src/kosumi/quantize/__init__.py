"""``kosumi quantize``: a float net -> an int8 (or fp16) net that plays like it.

``quantize_model(source, out, options, calib=...)`` reads any net kosumi reads (students of
both heads, KataGo's teacher), calibrates on positions, quantizes (``quantize.ptq``: BN folded,
int8 weights per output channel, uint8/int8 activations per tensor, int32 biases, fixed-point
requantisation; the most sensitive layers kept in float with ``--keep-float auto``) and writes
a kosumi checkpoint whose config carries the one ``QuantScheme`` (``nets.quant``) that the numpy
integer backend, the int8 ONNX export and ``kosumi inspect`` all read. The file is written
atomically: a failure leaves nothing half-written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kosumi.errors import KosumiError
from kosumi.nets.checkpoint import Checkpoint
from kosumi.nets.fold import FoldedNet
from kosumi.nets.quant import ActQuant, QuantScheme
from kosumi.quantize.ptq import QatStage, QuantizeOptions, QuantizeReport, quantize_net
from kosumi.quantize.record import QatOutcome, QatStop

if TYPE_CHECKING:
    from kosumi.go.board import GameState
    from kosumi.quantize.qat import QatOptions

__all__ = ["QatStop", "QuantizeOptions", "QuantizeReport", "onnxruntime_check",
           "quantize_model"]


def quantize_model(source: str | os.PathLike[str], out: str | os.PathLike[str],
                   options: QuantizeOptions, calib: str | os.PathLike[str] | None = None,
                   calib_limit: int = 512,
                   progress: Any = None, qat_data: str | os.PathLike[str] | None = None,
                   qat_options: QatOptions | None = None, resume: bool = False,
                   progress_bar: bool = False, zero: int = 0
                   ) -> tuple[QuantizeReport, int] | QatStop:
    """Quantize ``source`` into ``out`` (see the module docstring): (report, bytes written).
    ``qat_data``: a label folder to fine-tune on (``quantize.qat``, with ``qat_options``),
    resumable from ``OUT.qat-state`` with ``resume``; a QAT run stopped by its ``stop_after``
    writes nothing and gives where it stopped. ``zero``: then set the int8 weights with
    ``|q| <= zero`` to zero, biases corrected on the calibration positions
    (``quantize.zeroing``); the agreement is measured again after it."""
    from kosumi.fileio import output_errors
    from kosumi.nets.checkpoint import save_checkpoint
    from kosumi.nets.formats import read_net
    from kosumi.quantize.calibration import read_calibration_for

    ckpt = read_net(source, what="quantize")
    states: list[GameState] = []
    if qat_data is not None and calib is None:
        calib = qat_data  # a label folder is a calibration set too
    if options.bits == 8:
        if calib is None:
            raise KosumiError("--bits 8 needs --calib POSITIONS (a positions or label folder, "
                              "or a JSON Lines file)")
        states, skipped = read_calibration_for(calib, ckpt.config.board_sizes, calib_limit)
        if skipped and progress:
            progress(f"{calib}: {skipped} positions of board sizes the net does not play left "
                     "out")
    qat: QatStage | None = None
    if qat_data is not None:
        if options.bits != 8:
            raise KosumiError("--qat trains an int8 net: give --bits 8")
        from kosumi.quantize.qat import QatOptions, read_qat_data, run_qat

        qopts = qat_options or QatOptions()
        data = read_qat_data(qat_data, ckpt.config.board_sizes,
                             need_labels=qopts.target == "teacher")
        state = Path(str(out) + ".qat-state")

        def qat(net: FoldedNet, layers: dict[str, str], acts: dict[str, ActQuant],
                weight_max: int) -> QatOutcome | QatStop:
            if progress:
                progress(f"QAT: {qopts.steps} steps on {data.count} positions of {qat_data} "
                         f"(target: {qopts.target}); state in {state}")
            result = run_qat(net, layers, acts, weight_max, data, qopts, state, resume=resume,
                             progress=progress_bar, say=progress)
            if isinstance(result, QatOutcome):
                result.record.data = str(qat_data)
            return result
    elif resume:
        raise KosumiError("--resume continues a QAT run: give --qat --data LABELS")
    if zero and options.bits != 8:
        raise KosumiError("--zero works on int8 weights: give --bits 8")
    result = quantize_net(ckpt, states, options, source=str(source), progress=progress,
                          qat=qat)
    if isinstance(result, QatStop):
        return result
    qnet, report = result
    if zero:
        qnet, report = _zero(qnet, report, ckpt, states, zero, progress)
    if options.bits == 8:
        report.onnxruntime = onnxruntime_check(qnet, states)
    prov = dict(qnet.config.provenance)
    prov["quantized_from"] = {"path": str(source), "bits": options.bits,
                              **({"calibration": str(calib)} if calib else {})}
    qnet.config.provenance = prov
    out = Path(out)
    with output_errors(out):
        nbytes = save_checkpoint(out, qnet.tensors, qnet.config)
    return report, nbytes


def onnxruntime_check(qnet: Any, states: list[Any], per_size: int = 4) -> dict[str, Any] | None:
    """ONNX Runtime's int8 convolutions of the new net on this CPU against the integer
    reference, layer by layer (``runtime.int8_check.layer_lsb_apart``), on ``per_size``
    calibration positions of each board size, with the weights held as the onnxruntime backend
    would hold them here: {"weights", "max_lsb", "layers", "worst"}, {"weights", "error"} if
    ONNX Runtime failed, None without it."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return None
    from kosumi.runtime.int8_check import layer_lsb_apart
    from kosumi.runtime.onnxruntime_backend import int8_weight_type

    sample = [s for n in sorted({s.size for s in states})
              for s in [x for x in states if x.size == n][:per_size]]
    weights = int8_weight_type(qnet.config)
    try:
        r = layer_lsb_apart(qnet.config, qnet.tensors, sample, weights)
    except Exception as e:  # a check that cannot run must not lose the quantized net
        return {"weights": weights, "error": (str(e).splitlines() or [type(e).__name__])[0]}
    return {"weights": weights, **r}


def _zero(qnet: Checkpoint, report: QuantizeReport, float_net: Checkpoint,
          states: list[GameState], threshold: int, progress: Any
          ) -> tuple[Checkpoint, QuantizeReport]:
    """``--zero``: small int8 weights zeroed, biases corrected, agreement measured again."""
    from kosumi.nets.features import get_feature_set
    from kosumi.quantize.judging import agreement_with_float, judge_batches
    from kosumi.quantize.ptq import with_record
    from kosumi.quantize.zeroing import input_means, zero_small_weights

    record = report.record
    assert record is not None  # quantize_net's int8 report has its record
    judge, _ = judge_batches(get_feature_set(qnet.config.features), states, 128)
    means = input_means(qnet, judge)
    zeroed, record.zeroed = zero_small_weights(qnet, threshold, means)
    n, total = record.zeroed.weights, record.zeroed.of
    if progress:
        progress(f"--zero {threshold}: {n:,} of {total:,} int8 weights set to zero "
                 f"({100 * n / max(1, total):.1f}%), biases corrected on {len(judge)} positions")
    record.agreement_on_calibration = agreement_with_float(float_net, zeroed, states)
    zeroed = with_record(zeroed, record)
    return zeroed, QuantizeReport(scheme=QuantScheme.from_dict(zeroed.config.quantization),
                                  sensitivity=report.sensitivity,
                                  agreement=record.agreement_on_calibration, record=record)
