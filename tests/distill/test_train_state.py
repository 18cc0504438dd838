"""The trainer's run state (kosumi.distill.train_state): file names of a run, the teacher check,
the student's board sizes and output weights, option checks, resume checks.

Oracles: teacher identities whose SHA-256 is computed here with hashlib, and option sets whose
verdicts are worked out by hand from the documented rules (the lz head is 19x19 only, a weight
needs targets, a resumed run keeps its settings).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from kosumi.distill.train_state import (
    DEFAULT_OWNERSHIP_WEIGHT,
    DEFAULT_SCORE_WEIGHT,
    DistillOptions,
    RunPaths,
    _output_weight,
    check_options,
    check_resume,
    check_teacher,
    load_init,
    new_settings,
    parse_size_weights,
    resolve_sizes,
    student_config,
)
from kosumi.errors import KosumiError


def test_run_paths():
    p = RunPaths.for_out("runs/b6c64.safetensors")
    assert p.checkpoint == Path("runs/b6c64.safetensors")
    assert p.state == Path("runs/b6c64.state.safetensors")
    assert p.metrics == Path("runs/b6c64.metrics.jsonl")
    assert p.curves == Path("runs/b6c64.curves.png")
    assert RunPaths.for_out("net").state == Path("net.state.safetensors")


def store(*teachers: dict) -> SimpleNamespace:
    return SimpleNamespace(path=Path("labels"), teachers=list(teachers))


def test_check_teacher(tmp_path):
    model = tmp_path / "teacher.bin"
    model.write_bytes(b"the teacher's bytes")
    sha = hashlib.sha256(b"the teacher's bytes").hexdigest()
    one = {"name": "teacher.bin", "format": "kosumi", "sha256": sha}
    other = {"name": "other.bin", "format": "katago", "sha256": "ab" * 32}
    assert check_teacher(None, store(one)) == (one, None)
    assert check_teacher(str(model), store(one)) == (one, None)
    assert check_teacher(sha[:12].upper(), store(one)) == (one, None)  # a hex prefix
    assert check_teacher(None, store(one, other)) == ({"mixed": [one, other]}, None)
    assert check_teacher(str(model), store(other, one)) == (one, 1)  # select its records
    with pytest.raises(KosumiError, match="teacher mismatch") as e:
        check_teacher(str(model), store(other))
    assert "other.bin (katago, sha256 abababababab...)" in str(e.value)
    with pytest.raises(KosumiError, match="no such file"):
        check_teacher(str(tmp_path / "nope.bin"), store(one))
    with pytest.raises(KosumiError, match="record no teacher"):
        check_teacher(None, store())


def test_a_model_set_teacher_is_any_of_its_nets(tmp_path):
    """``--teacher default`` (a set) accepts labels made by its 9x9 net (the SHA-256 of the
    file, by hand), and still refuses another teacher's."""
    from kosumi.models import DEFAULT_9_MODEL

    sha = hashlib.sha256(DEFAULT_9_MODEL.read_bytes()).hexdigest()
    nine = {"name": "default-9.safetensors", "format": "kosumi", "sha256": sha}
    other = {"name": "other.bin", "format": "katago", "sha256": "ab" * 32}
    assert check_teacher("default", store(nine)) == (nine, None)
    assert check_teacher("default", store(other, nine)) == (nine, 1)
    with pytest.raises(KosumiError, match=r"teacher mismatch: --teacher default \(a model set: "
                                          r"9x9 default-9.safetensors"):
        check_teacher("default", store(other))


def opts(**kw) -> DistillOptions:
    return DistillOptions(data="labels", out="out.safetensors", **kw)


def test_resolve_sizes():
    assert resolve_sizes(opts(), "conv", [9, 19], "d") == [9, 19]
    assert resolve_sizes(opts(board_sizes=[19, 9, 19]), "conv", [9, 13, 19], "d") == [9, 19]
    assert resolve_sizes(opts(), "lz", [9, 19], "d") == [19]
    cases = [
        (opts(), "conv", [], "holds no positions"),
        (opts(board_sizes=[13]), "conv", [9, 19], "no 13x13 positions (they have 9x9, 19x19)"),
        (opts(board_sizes=[9]), "lz", [9, 19], "the lz head is 19x19 only"),
        (opts(), "lz", [9], "plays 19x19 only, but the labels in d have board sizes 9x9"),
    ]
    for o, head, sizes, needle in cases:
        with pytest.raises(KosumiError) as e:
            resolve_sizes(o, head, sizes, "d")
        assert needle in str(e.value)


def test_output_weights():
    assert _output_weight(None, DEFAULT_SCORE_WEIGHT, True, "conv", "score", "d") == 0.1
    assert _output_weight(None, DEFAULT_OWNERSHIP_WEIGHT, False, "conv", "ownership", "d") == 0
    assert _output_weight(None, 0.5, True, "lz", "ownership", "d") == 0.0
    assert _output_weight(0, 0.5, True, "conv", "ownership", "d") == 0.0
    assert _output_weight(2.0, 0.5, True, "conv", "ownership", "d") == 2.0
    for given, available, head, needle in [(-1.0, True, "conv", "must be >= 0"),
                                           (1.0, True, "lz", "no score output"),
                                           (1.0, False, "conv", "have no score targets")]:
        with pytest.raises(KosumiError, match=needle):
            _output_weight(given, 0.1, available, head, "score", "d")


def test_check_options():
    check_options(opts(), [9, 19])
    for kw, needle in [({"batch": 0}, "--batch must be at least 1, not 0"),
                       ({"lr": 0.0}, "--lr must be > 0"),
                       ({"policy_temperature": -1.0}, "--policy-temperature must be > 0"),
                       ({"weight_decay": -0.1}, "--weight-decay must be >= 0"),
                       ({"clip": -1.0}, "--clip must be >= 0"),
                       ({"student": "big"}, "student big:"),
                       ({"head": "lz"}, "student b6c64:")]:  # lz on 9x9 and 19x19
        with pytest.raises(KosumiError) as e:
            check_options(opts(**kw), [9, 19])
        assert needle in str(e.value), (kw, str(e.value))


def test_check_resume():
    saved = {"student": "b1c8", "board_sizes": [9, 19], "lr": 0.001, "augment": True}
    check_resume(opts(student=" B1C8 ", board_sizes=[19, 9, 9], lr=0.001), saved, Path("r"))
    check_resume(opts(), saved, Path("r"))  # nothing given: the saved run's settings
    with pytest.raises(KosumiError, match=r"--lr 0.002 differs from the run in r \(0.001\)"):
        check_resume(opts(lr=0.002), saved, Path("r"))
    with pytest.raises(KosumiError, match="--augment/--no-augment False differs"):
        check_resume(opts(augment=False), saved, Path("r"))


def test_parse_size_weights():
    assert parse_size_weights("19:3") == {"19": 3.0}
    assert parse_size_weights(" 19:2.5, 9:1 ,") == {"19": 2.5}  # a weight of 1 is the default
    assert list(parse_size_weights("19:2,9:0.5")) == ["9", "19"]
    for bad, needle in [("19", "'19' is not SIZE:WEIGHT"), ("19:0", "'19:0' is not"),
                        ("x:2", "'x:2' is not"), ("19:nan", "'19:nan'"), ("9:2,9:3", "twice")]:
        with pytest.raises(KosumiError, match=needle):
            parse_size_weights(bad)


def test_size_weights_setting():
    """A weight for a size that is not trained is refused; on --resume a run saved before the
    setting existed counts as having none."""
    data = SimpleNamespace(has_ownership=True, has_score=True)
    s = new_settings(opts(size_weights={"19": 3.0}), data, [9, 19])
    assert s["size_weights"] == {"19": 3.0}
    assert new_settings(opts(), data, [9])["size_weights"] == {}
    with pytest.raises(KosumiError, match="board size 13 is not trained"):
        new_settings(opts(size_weights={"13": 2.0}), data, [9, 19])
    old = {"student": "b1c8", "board_sizes": [9, 19]}
    check_resume(opts(size_weights={}), old, Path("r"))
    with pytest.raises(KosumiError, match="--size-weights"):
        check_resume(opts(size_weights={"19": 3.0}), old, Path("r"))


def test_init_widens_a_mean_max_value_head_to_the_size_pool():
    """Oracle: the init net itself. A "katago" value pool loaded from a "mean_max" net's
    weights (zero weights for the size term) gives that net's outputs exactly, on 9x9 and
    19x19, and says nothing is missing."""
    import torch
    from helpers import random_inputs, randomise_bn

    from kosumi.nets.config import NetConfig
    from kosumi.nets.resnet import KosumiNet

    old = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9, 19]), 1)
    randomise_bn(old, torch.Generator().manual_seed(2))
    new = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9, 19], value_pool="katago"), 3)
    notes: list[str] = []
    load_init(new, old, "old.safetensors", notes.append)
    assert notes == [] and new.value_fc1.in_features == 3 * old.value_fc1.in_features // 2
    old.eval(), new.eval()
    for size in (9, 19):
        inputs = random_inputs(old.config, size, batch=4)
        with torch.no_grad():
            a, b = old(*inputs), new(*inputs)
        for key in a:
            torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-6)


def test_init_widens_the_inputs_of_a_feature_set_that_extends_the_nets(monkeypatch):
    """Oracle: the init net itself. A set extending ``basic`` by a plane and a global (both
    new inputs last) gets zero weights on them: the widened net gives the old net's outputs
    exactly, whatever the new inputs hold."""
    import torch
    from helpers import random_inputs, randomise_bn

    from kosumi.nets.config import NetConfig
    from kosumi.nets.features import FEATURE_SETS, Basic
    from kosumi.nets.resnet import KosumiNet

    class Plus(Basic):
        name, extends, num_planes, num_globals = "basic_plus", "basic", 12, 5

    monkeypatch.setitem(FEATURE_SETS, "basic_plus", Plus())
    old = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9]), 1)
    randomise_bn(old, torch.Generator().manual_seed(2))
    new = KosumiNet.random(NetConfig(arch="b1c8", board_sizes=[9], features="basic_plus"), 3)
    notes: list[str] = []
    load_init(new, old, "old.safetensors", notes.append)
    assert notes == []
    old.eval(), new.eval()
    planes, glob = random_inputs(new.config, 9, batch=4)
    with torch.no_grad():
        a, b = old(planes[:, :11], glob[:, :4]), new(planes, glob)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-6)


def test_student_config():
    settings = {"student": "b1c8", "features": "basic", "head": "conv", "board_sizes": [9],
                "value": "wdl", "score_weight": 0.0, "ownership_weight": 0.5}
    c = student_config(settings, {"teacher": "t"})
    assert (c.blocks, c.channels, c.board_sizes) == (1, 8, [9])
    assert not c.score_lead and c.ownership and c.provenance == {"teacher": "t"}
