"""load_evaluator (kosumi.runtime.loader): caching, options and one-line errors."""

from __future__ import annotations

import pytest
import torch

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.runtime import (
    CachedEvaluator,
    NetEvaluator,
    load_evaluator,
)

torch.set_num_threads(1)


@pytest.fixture
def model_file(plain_b1c8):
    return plain_b1c8


# ----------------------------------------------------------------------------- loading
def test_load_evaluator_options_and_errors(tmp_path, model_file):
    ev = load_evaluator(model_file)
    assert isinstance(ev, CachedEvaluator) and isinstance(ev.inner, NetEvaluator)
    assert ev.name == "b1c8.kosumi"
    s = GameState(9)
    a = ev.evaluate_one(s)
    assert ev.evaluate_one(s) is a and ev.hits == 1
    bad = tmp_path / "net.bin.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(KosumiError, match="unsupported model format") as e:
        load_evaluator(bad)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(KosumiError, match="cannot read"):
        load_evaluator(tmp_path / "nope.kosumi")
    with pytest.raises(KosumiError, match="unknown backend 'tpu'"):
        load_evaluator(model_file, backend="tpu")
    with pytest.raises(KosumiError, match="symmetries"):
        load_evaluator(model_file, symmetries=9)
