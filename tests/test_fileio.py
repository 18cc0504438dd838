"""Paths a user can share (kosumi.fileio.shareable_path) and the shipped net's provenance."""

from __future__ import annotations

from pathlib import Path

from kosumi.fileio import shareable_path
from kosumi.nets.formats import read_model


def _strings(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)
    elif isinstance(x, str):
        yield x


def test_provenance_holds_no_absolute_path_of_the_machine():
    _, ckpt = read_model("default")
    prov = ckpt.config.provenance
    assert prov["data"]["path"] == "runs/s31/lab-v6" and prov["data"]["content_hash"]
    assert not [s for s in _strings(prov) if s.startswith("/")]


def test_shareable_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shareable_path(tmp_path / "runs" / "labels") == str(Path("runs") / "labels")
    assert shareable_path("runs/labels") == "runs/labels"
    assert shareable_path("../shared/x") == "../shared/x"
    assert shareable_path("/elsewhere/labels") == "/elsewhere/labels"  # as the user gave it
