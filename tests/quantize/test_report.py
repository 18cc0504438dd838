"""The text ``kosumi quantize`` prints (kosumi.quantize.report): the sensitivity table and the
summary lines.

Oracles: sensitivity rows written by hand and looked for cell by cell in the table, the number of
int8 layers counted from the checkpoint's own int8 weight tensors, and the byte count given.
"""

from __future__ import annotations

import numpy as np

from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.quant import scheme_of
from kosumi.quantize.ptq import LayerSensitivity, QuantizeReport
from kosumi.quantize.report import format_report

ROWS = [LayerSensitivity("blocks.0.conv1", 2304, 35.25, 0.00123, 0.9921),
        LayerSensitivity("policy_pass", 66, 12.04, 0.25, 0.5, kept_float=True)]


def cells(text: str, first: str) -> list[str]:
    line = next(x for x in text.splitlines() if f" {first} " in x)
    return [c.strip() for c in line.strip().strip("│").split("│")]


def test_int8_report(int8_net_b2c16):
    ck = read_checkpoint(int8_net_b2c16)
    scheme = scheme_of(ck.config)
    agreement = {"top1": 0.96875, "sqnr_policy": 31.44, "sqnr_db": 22.06,
                 "max_policy_error": 0.01234}
    text = format_report(QuantizeReport(scheme, ROWS, agreement), "q.safetensors", 123_456)
    assert cells(text, "blocks.0.conv1") == ["blocks.0.conv1", "2,304", "35.2", "0.0012",
                                             "0.992", "int8"]
    assert cells(text, "policy_pass") == ["policy_pass", "66", "12.0", "0.2500", "0.500",
                                          "float"]
    int8_layers = sum(1 for k, t in ck.tensors.items()
                      if k.endswith(".weight") and t.dtype == np.int8)
    kept = scheme.info.get("keep_float", [])
    flat = " ".join(text.split())  # rich wraps long lines at 110 columns
    assert f"int8: {int8_layers} layers int8, {len(kept)} kept float" in flat
    assert ("top-1 0.969, policy SQNR 31.4 dB, worst output SQNR 22.1 dB, max policy error "
            "0.0123") in flat
    assert text.splitlines()[-1] == "wrote q.safetensors: 123,456 bytes"


def test_without_sensitivity_there_is_no_table(int8_net_b2c16):
    scheme = scheme_of(read_checkpoint(int8_net_b2c16).config)
    text = format_report(QuantizeReport(scheme), "q", 10)
    assert "sensitivity" not in text and "│" not in text
    assert "top-1 0.000" in text  # no agreement measured: zeros, not an error


def test_onnxruntime_line_by_case():
    from kosumi.quantize.report import onnxruntime_line

    assert onnxruntime_line(None) is None
    ok = onnxruntime_line({"weights": "int8", "max_lsb": 1, "layers": 16, "worst": "stem"})
    assert ok == ("onnxruntime on this CPU (int8 weights): each int8 convolution equal to the "
                  "integer reference or 1 LSB apart (16 layers checked)")
    bad = onnxruntime_line({"weights": "int8", "max_lsb": 12, "layers": 16,
                            "worst": "blocks.1.conv2"})
    assert bad == ("warning: onnxruntime on this CPU (int8 weights) computes blocks.1.conv2 up "
                   "to 12 LSB off the integer reference: run this net on --backend numpy, or "
                   "quantize with --weight-range 63")
    err = onnxruntime_line({"weights": "uint8", "error": "no kernel"})
    assert err == "onnxruntime check (uint8 weights): could not run (no kernel)"
