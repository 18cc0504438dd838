"""Export to Leela Zero text weights: ``export_leelaz(source, out)``.

``source`` is a kosumi checkpoint with an ``lz`` head (lz18 features, 19x19, tanh value), or
Leela Zero weights (re-written, e.g. to gzip them). The weights are written as version 1 (the
value from the side to move's view, which is what a kosumi net predicts); a version-2 source is
kept at version 2. Everything leelaz itself does not check is validated before writing (see
``kosumi.nets.leelaz``); the file is written atomically, gzipped when ``out`` ends in ``.gz``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kosumi.errors import KosumiError
from kosumi.nets.leelaz import LeelaZeroWeights, is_leelaz_file, read_leelaz, write_leelaz


def weights_for_export(source: str | os.PathLike) -> LeelaZeroWeights:
    """The Leela Zero weights of ``source`` (a kosumi lz-head checkpoint or Leela Zero weights)."""
    from kosumi.nets.checkpoint import read_checkpoint, sniff_checkpoint

    source = Path(source)
    if not source.exists():
        raise KosumiError(f"{source}: no such file")
    if sniff_checkpoint(source):
        ckpt = read_checkpoint(source)
        return LeelaZeroWeights.from_state_dict(ckpt.tensors, ckpt.config, version=1,
                                                source=str(source))
    if is_leelaz_file(source):
        return read_leelaz(source)
    raise KosumiError(f"{source}: not a kosumi checkpoint or Leela Zero weights; cannot export "
                      "it to Leela Zero format")


def export_leelaz(source: str | os.PathLike, out: str | os.PathLike) -> str:
    """Write ``source`` as Leela Zero weights to ``out``; return a one-line summary."""
    weights = weights_for_export(source)
    nbytes = write_leelaz(out, weights)
    gz = ", gzip" if str(out).lower().endswith(".gz") else ""
    return (f"wrote {out}: Leela Zero weights v{weights.version}{gz}, {weights.arch}, "
            f"{weights.num_parameters:,} parameters, {nbytes:,} bytes")
