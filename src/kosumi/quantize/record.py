"""How a quantized net was made: the typed results of the quantization's stages.

Each stage of ``quantize.ptq`` (calibration and equalisation, the float layers, the rounding,
QAT, zeroing) gives one of these; ``QuantRecord`` gathers them and ``QuantRecord.to_dict`` is
the scheme's ``info`` (``nets.quant.QuantScheme``): what ``kosumi inspect`` shows and the report
prints, never read by the arithmetic. The dict keeps the keys and their order of the files
written before these types existed, so the same command writes the same bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kosumi.nets.fold import FoldedNet
from kosumi.nets.quant import ActQuant

# a QAT net this much below its PTQ net (worst-output SQNR on the judged positions) is flagged;
# within it is the sample's noise: a b2c16 0.1 dB below had a 17% lower policy KL on 2,751
# other positions (benchmarks/RESULTS.md, Quantization: QAT)
QAT_NOISE_DB = 1.0


@dataclass
class LayerSensitivity:
    """One layer quantized alone, the others float, against the float net."""

    name: str
    parameters: int
    sqnr_db: float  # of the net's outputs (the worst of them) with only this layer quantized
    max_policy_error: float
    top1: float  # agreement with the float net, only this layer quantized
    kept_float: bool = False


@dataclass
class Equalized:
    """Cross-layer equalisation (``quantize.equalize``): per block the ratio of its widest to
    its narrowest channel range before, and the stream's (when balanced)."""

    blocks: dict[str, float]
    stream: float | None = None


@dataclass
class RoundingChoice:
    """The nets built with each rounding and the one kept (``quantize.ptq``)."""

    asked: str
    chosen: str
    sqnr_db: dict[str, float]  # per rounding tried: the worst output's SQNR on the judged set
    refit_layers: int | None = None  # layers refit (``--rounding refit``)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"asked": self.asked, "chosen": self.chosen,
                             "sqnr_db": dict(self.sqnr_db)}
        if self.refit_layers is not None:
            d["refit_layers"] = self.refit_layers
        return d


@dataclass
class QatRecord:
    """A QAT run (``quantize.qat``) and, once judged, the trained net beside the PTQ net."""

    steps: int
    target: str
    lr: float
    batch: int
    positions: int
    final_loss_terms: dict[str, float]
    scales_learned: int | None = None
    largest_scale_change: float | None = None
    data: str = ""
    ptq_rounding: str | None = None  # the PTQ net of the same choices: its rounding, its SQNR
    ptq_sqnr_db: float | None = None
    sqnr_db: float | None = None  # the trained net's
    worse_than_ptq: bool | None = None

    def judged(self, qat_db: float, ptq: RoundingChoice) -> None:
        """Set the trained net's worst-output SQNR beside the PTQ net's, flagged when it is
        more than ``QAT_NOISE_DB`` below."""
        self.ptq_rounding = ptq.chosen
        self.ptq_sqnr_db = ptq.sqnr_db[ptq.chosen]
        self.sqnr_db = round(qat_db, 2)
        self.worse_than_ptq = qat_db < self.ptq_sqnr_db - QAT_NOISE_DB

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"steps": self.steps, "target": self.target, "lr": self.lr,
                             "batch": self.batch, "positions": self.positions,
                             "final_loss_terms": dict(self.final_loss_terms)}
        if self.scales_learned is not None:
            d["scales_learned"] = self.scales_learned
            d["largest_scale_change"] = self.largest_scale_change
        d["data"] = self.data
        if self.sqnr_db is not None:
            d.update(ptq={"rounding": self.ptq_rounding, "sqnr_db": self.ptq_sqnr_db},
                     sqnr_db=self.sqnr_db, worse_than_ptq=self.worse_than_ptq)
        return d


@dataclass
class Zeroed:
    """``--zero``: int8 weights with ``|q| <= threshold`` set to zero (``quantize.zeroing``)."""

    threshold: int
    weights: int
    of: int
    bias_corrected: bool


@dataclass
class QuantRecord:
    """How the net was made (see the module docstring); the int8 stages' fields stay None for
    a 16-bit net."""

    source: str
    method: str
    kernels: str | None = None
    equalized: Equalized | None = None
    quantize_outputs: bool | None = None
    calibration_positions: int | None = None
    calibration_sizes: list[int] | None = None
    weight_max: int | None = None
    keep_float: list[str] = field(default_factory=list)
    sensitivity: list[LayerSensitivity] = field(default_factory=list)
    qat: QatRecord | None = None
    rounding: RoundingChoice | None = None
    agreement_on_calibration: dict[str, float] | None = None
    zeroed: Zeroed | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source, "method": self.method}
        if self.kernels is None:  # a 16-bit net
            return d
        d["kernels"] = self.kernels
        if self.equalized is not None and self.equalized.blocks:
            d["equalized_blocks"] = {k: round(v, 1) for k, v in self.equalized.blocks.items()}
            if self.equalized.stream is not None:
                d["equalized_stream"] = round(self.equalized.stream, 1)
        d.update(quantize_outputs=self.quantize_outputs,
                 calibration_positions=self.calibration_positions,
                 calibration_sizes=self.calibration_sizes, weight_max=self.weight_max,
                 keep_float=list(self.keep_float),
                 sensitivity=[asdict(r) for r in self.sensitivity])
        if self.qat is not None:
            d["qat"] = self.qat.to_dict()
        if self.rounding is not None:
            d["rounding"] = self.rounding.to_dict()
        if self.agreement_on_calibration is not None:
            d["agreement_on_calibration"] = self.agreement_on_calibration
        if self.zeroed is not None:
            d["zeroed"] = asdict(self.zeroed)
        return d


@dataclass
class QatOutcome:
    """What a finished QAT run gives the quantizer: the trained net, the learned activation
    quantizers (empty when the scales were fixed) and its record."""

    net: FoldedNet
    learned: dict[str, ActQuant]  # by value name
    record: QatRecord


@dataclass
class QatStop:
    """QAT stopped on purpose (``--stop-after``) at ``step``; its state is in ``state``."""

    step: int
    state: str

    def message(self) -> str:
        return f"QAT stopped at step {self.step}; its state is in {self.state} (--resume)"
