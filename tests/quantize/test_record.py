"""``quantize.record``: the typed stage results written as the scheme's ``info``, key for key and
in the order of the files written before the types existed (so the same command keeps writing
the same bytes), and QAT's verdict against the PTQ net at the noise bound."""

from __future__ import annotations

import json

from kosumi.quantize.record import (
    QAT_NOISE_DB,
    Equalized,
    LayerSensitivity,
    QatRecord,
    QuantRecord,
    RoundingChoice,
    Zeroed,
)

# the info of an int8 QAT net with --zero in the layout kosumi wrote before these types (36e7e49:
# the key order of its `quantize --qat` and `quantize --zero` files, read back from them; the
# values made up by hand, fewer of them)
WRITTEN_BEFORE = """{"source":"net.safetensors","method":"mse","kernels":"weights in +-127",
"equalized_blocks":{"blocks.0":3.2},"quantize_outputs":false,"calibration_positions":64,
"calibration_sizes":[9],"weight_max":127,"keep_float":["input_conv"],"sensitivity":[{"name":
"input_conv","parameters":100,"sqnr_db":30.5,"max_policy_error":0.01,"top1":0.99,"kept_float":
true}],"qat":{"steps":20,"target":"float","lr":2e-05,"batch":128,"positions":500,
"final_loss_terms":{"policy_kl":0.1},"scales_learned":7,"largest_scale_change":1.2,"data":
"calib","ptq":{"rounding":"refit","sqnr_db":25.0},"sqnr_db":24.5,"worse_than_ptq":false},
"rounding":{"asked":"nearest (QAT)","chosen":"nearest","sqnr_db":{"nearest":24.5}},
"agreement_on_calibration":{"sqnr_db":24.5,"top1":0.98},"zeroed":{"threshold":2,"weights":10,
"of":100,"bias_corrected":true}}"""


def test_the_record_writes_the_info_kosumi_wrote_before_key_for_key():
    qat = QatRecord(steps=20, target="float", lr=2e-05, batch=128, positions=500,
                    final_loss_terms={"policy_kl": 0.1}, scales_learned=7,
                    largest_scale_change=1.2, data="calib")
    ptq = RoundingChoice(asked="refit", chosen="refit", sqnr_db={"refit": 25.0, "nearest": 20.0},
                         refit_layers=4)
    qat.judged(24.5, ptq)
    record = QuantRecord(
        source="net.safetensors", method="mse", kernels="weights in +-127",
        equalized=Equalized(blocks={"blocks.0": 3.21}), quantize_outputs=False,
        calibration_positions=64, calibration_sizes=[9], weight_max=127,
        keep_float=["input_conv"],
        sensitivity=[LayerSensitivity("input_conv", 100, 30.5, 0.01, 0.99, kept_float=True)],
        qat=qat, rounding=RoundingChoice("nearest (QAT)", "nearest", {"nearest": 24.5}),
        agreement_on_calibration={"sqnr_db": 24.5, "top1": 0.98},
        zeroed=Zeroed(threshold=2, weights=10, of=100, bias_corrected=True))
    got = json.dumps(record.to_dict(), separators=(",", ":"))
    assert got == "".join(WRITTEN_BEFORE.splitlines())


def test_a_16_bit_net_records_its_source_and_method_only():
    assert QuantRecord(source="m", method="mse").to_dict() == {"source": "m", "method": "mse"}


def test_refit_layers_and_the_stream_appear_only_when_there():
    assert "refit_layers" not in RoundingChoice("gptq", "gptq", {"gptq": 1.0}).to_dict()
    assert RoundingChoice("refit", "gptq", {}, refit_layers=3).to_dict()["refit_layers"] == 3
    d = QuantRecord("m", "mse", kernels="k", equalized=Equalized({"blocks.0": 2.04}, 5.55)
                    ).to_dict()
    assert d["equalized_blocks"] == {"blocks.0": 2.0} and d["equalized_stream"] == 5.5
    assert "equalized_blocks" not in QuantRecord("m", "mse", kernels="k",
                                                 equalized=Equalized({})).to_dict()


def test_qat_is_flagged_only_beyond_the_noise_bound():
    ptq = RoundingChoice("refit", "gptq", {"refit": 20.0, "gptq": 30.0})
    for qat_db, worse in ((30.0 - QAT_NOISE_DB + 0.01, False), (30.0 - QAT_NOISE_DB - 0.01, True)):
        r = QatRecord(1, "float", 1e-5, 8, 10, {})
        r.judged(qat_db, ptq)
        assert r.worse_than_ptq is worse
        assert r.to_dict()["ptq"] == {"rounding": "gptq", "sqnr_db": 30.0}
