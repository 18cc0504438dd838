"""``LoadOptions`` (kosumi.runtime.options): validation, device names, CUDA index.

Oracles: the accepted and refused values written out by hand from the module's documentation.
"""

from __future__ import annotations

import dataclasses

import pytest

from kosumi.errors import KosumiError
from kosumi.runtime.options import LoadOptions


def test_defaults():
    o = LoadOptions()
    assert (o.backend, o.threads, o.device, o.symmetries, o.precision) == (
        "auto", 1, None, 1, "auto")
    assert not o.cuda and o.device_name == "cpu" and o.device_index == 0


@pytest.mark.parametrize("device,stored,cuda,index", [
    (None, None, False, 0), ("cpu", None, False, 0), (" CPU ", None, False, 0),
    ("cuda", "cuda", True, 0), ("CUDA:3", "cuda:3", True, 3), ("cuda:12", "cuda:12", True, 12),
])
def test_devices_are_normalised(device, stored, cuda, index):
    o = LoadOptions(device=device)
    assert o.device == stored and o.cuda == cuda and o.device_index == index
    assert o.device_name == (stored or "cpu")


@pytest.mark.parametrize("kwargs,needle", [
    ({"symmetries": -1}, r"symmetries must be 0\.\.8"),
    ({"symmetries": 9}, r"symmetries must be 0\.\.8"),
    ({"symmetries": 2.0}, r"symmetries must be 0\.\.8"),
    ({"threads": -1}, "threads must be a non-negative integer"),
    ({"threads": "4"}, "threads must be a non-negative integer"),
    ({"precision": "int4"}, "unknown precision 'int4'"),
    ({"device": "gpu"}, "unknown device 'gpu'"),
    ({"device": "cuda:x"}, "unknown device 'cuda:x'"),
    ({"device": "cuda:"}, "unknown device 'cuda:'"),
])
def test_bad_values_are_one_line_errors(kwargs, needle):
    with pytest.raises(KosumiError, match=needle) as e:
        LoadOptions(**kwargs)
    assert "\n" not in str(e.value)


def test_every_documented_value_is_accepted_and_options_are_frozen():
    for s in range(1, 9):
        assert LoadOptions(symmetries=s).symmetries == s
    for p in ("auto", "fp32", "fp16", "int8"):
        assert LoadOptions(precision=p).precision == p
    assert LoadOptions(threads=0).threads == 0  # 0: the backend's own default
    with pytest.raises(dataclasses.FrozenInstanceError):
        LoadOptions().threads = 2  # type: ignore[misc]
