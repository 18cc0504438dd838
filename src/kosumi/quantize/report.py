"""The text ``kosumi quantize`` prints: the per-layer sensitivity table and the result."""

from __future__ import annotations

import os
from io import StringIO
from typing import Any

from kosumi.quantize.ptq import QuantizeReport


def format_report(report: QuantizeReport, out: str | os.PathLike[str], nbytes: int) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=110)
    scheme = report.scheme
    if report.sensitivity:
        table = Table(title="sensitivity: each layer quantized alone, against the float net "
                            "(SQNR: the worst of its outputs)")
        for col in ("layer", "parameters", "SQNR dB", "max policy err", "top-1", "kept"):
            table.add_column(col, justify="left" if col == "layer" else "right")
        for r in report.sensitivity:
            table.add_row(r.name, f"{r.parameters:,}", f"{r.sqnr_db:.1f}",
                          f"{r.max_policy_error:.4f}", f"{r.top1:.3f}",
                          "float" if r.kept_float else "int8")
        console.print(table)
    if scheme.bits == 8:
        kept = scheme.info.get("keep_float", [])
        a = report.agreement
        console.print(f"int8: {len(scheme.int_layers())} layers int8, {len(kept)} kept float "
                      f"({', '.join(kept) or 'none'}); weights in +-{scheme.weight_max}; "
                      f"activations by {scheme.info.get('method')}")
        console.print(f"kernels: {scheme.info.get('kernels')}")
        rounding = scheme.info.get("rounding")
        if isinstance(rounding, dict):
            tried = ", ".join(f"{m} {db:.1f} dB" for m, db in rounding.get("sqnr_db", {}).items())
            console.print(f"weight rounding: {rounding.get('chosen')} (asked "
                          f"{rounding.get('asked')}; worst output SQNR on the judged positions: "
                          f"{tried})")
        if "qat" in scheme.info:
            qat = scheme.info["qat"]
            console.print(f"QAT: {qat['steps']} steps against the {qat['target']} targets, "
                          f"lr {qat['lr']}, batch {qat['batch']}, {qat['positions']} positions")
            ptq = qat.get("ptq")
            if ptq and "sqnr_db" in qat:
                console.print(f"QAT: worst output SQNR on the judged positions {qat['sqnr_db']:.1f}"
                              f" dB, the PTQ net's ({ptq['rounding']}) {ptq['sqnr_db']:.1f} dB"
                              + ("; [bold]QAT made it worse[/bold]: try a lower --lr or more "
                                 "positions, or keep the PTQ net" if qat.get("worse_than_ptq")
                                 else ""))
        if "zeroed" in scheme.info:
            z = scheme.info["zeroed"]
            console.print(f"zeroed: {z['weights']:,} of {z['of']:,} int8 weights with |q| <= "
                          f"{z['threshold']} ({100 * z['weights'] / max(1, z['of']):.1f}%), "
                          f"biases {'corrected' if z['bias_corrected'] else 'as they were'}")
        console.print(f"whole net vs float on a sample of the calibration positions "
                      f"(raw logits): top-1 {a.get('top1', 0):.3f}, policy SQNR "
                      f"{a.get('sqnr_policy', 0):.1f} dB, worst output SQNR "
                      f"{a.get('sqnr_db', 0):.1f} dB, max policy error "
                      f"{a.get('max_policy_error', 0):.4f}")
        line = onnxruntime_line(report.onnxruntime)
        if line:
            console.print(line)
    else:
        console.print("fp16: every tensor float16")
    console.print(f"wrote {out}: {nbytes:,} bytes")
    return buf.getvalue().rstrip()


def onnxruntime_line(check: dict[str, Any] | None) -> str | None:
    """The line on ONNX Runtime's agreement with the integer reference on this CPU."""
    if check is None:
        return None
    from kosumi.nets.onnx_weights import FORM_NAMES

    held = FORM_NAMES.get(check["weights"], f"{check['weights']} weights")
    if "error" in check:
        return f"onnxruntime check ({held}): could not run ({check['error']})"
    if check["max_lsb"] <= 1:
        return (f"onnxruntime on this CPU ({held}): each int8 convolution equal to the integer "
                f"reference or 1 LSB apart ({check['layers']} layers checked)")
    return (f"warning: onnxruntime on this CPU ({held}) computes {check['worst']} up to "
            f"{check['max_lsb']} LSB off the integer reference: run this net on --backend "
            "numpy, or quantize with --weight-range 63")
