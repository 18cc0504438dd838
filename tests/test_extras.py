"""kosumi.extras: a missing optional package is one line naming the extra that installs it.

Oracles: pyproject.toml's own extras (each mapped package is in the extra named for it), and
the CLI run with a package made unimportable."""

from __future__ import annotations

import sys
import tomllib

import pytest
from helpers import ROOT

from kosumi import cli
from kosumi.extras import EXTRA_OF, missing_extra


def test_each_package_is_in_the_extra_named_for_it():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for module, extra in EXTRA_OF.items():
        assert any(req.split(">")[0].split("=")[0].split("<")[0].strip() == module
                   for req in extras[extra]), (module, extra)


def test_the_line_names_the_package_and_the_extra():
    assert missing_extra(ModuleNotFoundError("x", name="onnx.helper")) == (
        "this needs onnx, which is not installed: pip install 'kosumi[onnx]'")
    assert missing_extra(ModuleNotFoundError("x", name="no_such_package")) is None


def test_a_command_without_its_extra_exits_2_with_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx -> ModuleNotFoundError
    monkeypatch.setattr(sys, "argv", ["kosumi", "export", "tiny", "--format", "onnx",
                                      "--out", str(tmp_path / "t.onnx")])
    with pytest.raises(SystemExit) as e:
        cli.main()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kosumi: error: this needs onnx, which is not installed: "
                   "pip install 'kosumi[onnx]'"]
    assert not (tmp_path / "t.onnx").exists()
