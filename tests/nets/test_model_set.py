"""nets.model_set: the manifest that puts one net per board size behind one name. Hand-written
manifests, good and bad; every refusal names the file and the field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kosumi.errors import KosumiError
from kosumi.models import resolve_model
from kosumi.nets.model_set import is_model_set, read_model_set


@pytest.fixture
def members(tmp_path):
    for name in ("both.safetensors", "big.safetensors"):
        (tmp_path / name).write_bytes(b"not read by the manifest parser")
    return tmp_path


def write(folder, doc, name="set.json"):
    path = folder / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def good(**over):
    doc = {"format": "kosumi-model-set", "version": 1, "base": "both.safetensors",
           "nets": {"19": "big.safetensors"}}
    doc.update(over)
    return doc


def test_a_set_names_a_net_for_each_size(members):
    path = write(members, good(about="two nets"))
    assert is_model_set(path)
    s = read_model_set(path)
    assert s.net_for(19) == members / "big.safetensors"
    assert s.net_for(9) == s.net_for(13) == members / "both.safetensors"
    assert s.about == "two nets"
    assert s.describe() == "19x19 big.safetensors, other sizes both.safetensors"
    assert resolve_model(path) == members / "both.safetensors"  # one net wanted: the base


def test_json_that_is_not_a_set_is_not_one(members):
    assert not is_model_set(write(members, {"format": "something else"}, "other.json"))
    assert not is_model_set(write(members, "[1, 2", "broken.json"))
    assert not is_model_set(members / "both.safetensors")
    assert not is_model_set(members / "absent.json")


@pytest.mark.parametrize("doc, field", [
    (good(version=2), "field 'version'"),
    (good(base=None), "field 'base'"),
    (good(base="absent.safetensors"), "field 'base': no such file"),
    (good(nets={"19": "absent.safetensors"}), "field 'nets.19': no such file"),
    (good(nets={"nineteen": "big.safetensors"}), "field 'nets': 'nineteen' is not a board size"),
    (good(nets={"1": "big.safetensors"}), "field 'nets': '1' is not a board size"),
    (good(nets={"25": "big.safetensors"}), "field 'nets': '25' is not a board size (2-19)"),
    (good(nets={"19": "set.json"}), "field 'nets.19': a member must be a net"),
    (good(nets=["big.safetensors"]), "field 'nets': expected an object"),
    (good(about=3), "field 'about'"),
    (good(extra=1), "unknown field 'extra'"),
    ({"format": "kosumi-model-set"} | {"version": "1"}, "field 'version'"),
])
def test_bad_manifests_name_the_file_and_field(members, doc, field):
    path = write(members, doc)
    with pytest.raises(KosumiError) as e:
        read_model_set(path)
    assert str(e.value).startswith(f"{path}: ") and field in str(e.value), str(e.value)


def test_a_bad_manifest_is_one_line_on_the_command_line(members):
    path = write(members, good(nets={"19": "absent.safetensors"}))
    r = subprocess.run([sys.executable, "-m", "kosumi", "inspect", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "field 'nets.19'" in r.stderr, r.stderr
