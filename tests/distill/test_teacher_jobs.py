"""``distill.teacher_jobs``: the options a job checks, the teacher it refuses, and the property
that where the units run (this process, spawned processes) changes nothing: every unit's
result is the teacher's own evaluation of its positions, committed in unit order."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import random_net_file

from kosumi.distill.teacher_jobs import TeacherJobs, check_workers, open_teacher, uncached
from kosumi.errors import KosumiError
from kosumi.runtime.agreement import evaluate_all
from kosumi.runtime.bench import bench_states
from kosumi.runtime.evaluator import CachedEvaluator


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    return random_net_file(tmp_path_factory.mktemp("jobs") / "t.safetensors", arch="b1c8",
                           board_sizes=(9,), seed=5)


def test_workers_option():
    assert check_workers(None, None) == 1  # without Ray: this process
    assert check_workers(None, "local") is None  # with Ray: the cluster's CPUs
    assert check_workers(3, None) == 3
    with pytest.raises(KosumiError, match=r"^--workers must be at least 1, not 0$"):
        check_workers(0, None)


def test_a_board_size_the_teacher_does_not_play(teacher):
    with pytest.raises(KosumiError, match=r"^--size 13: the teacher t.safetensors does not play "
                                          r"13x13$"):
        TeacherJobs.open(teacher, sizes=[9, 13], where="--size 13", caller="test")
    ev = open_teacher(teacher)
    with pytest.raises(ValueError, match="an Evaluator object needs workers=1"):
        TeacherJobs.open(ev, sizes=[9], where="x", caller="test", workers=2)
    assert uncached(CachedEvaluator(CachedEvaluator(ev))) is ev
    ev.close()


def test_a_model_set_teaches_with_its_net_for_the_board_size():
    """The embedded ``default`` (a set: 9x9 -> default-9, 19x19 -> default-19): a job
    on one board size is taught by that size's net; a job on sizes with different nets is
    refused in one line."""
    with TeacherJobs.open("default", sizes=[19], where="x", caller="test") as jobs:
        assert jobs.identity["name"] == "default-19.safetensors"
    with TeacherJobs.open("default", sizes=[9], where="x", caller="test") as jobs:
        assert jobs.identity["name"] == "default-9.safetensors"
    with pytest.raises(KosumiError, match=r"^default: a model set with a net per board size "
                                          r"\(9x9 default-9.safetensors, 19x19 "
                                          r"default-19.safetensors, other sizes "
                                          r"default.safetensors\): run one board size at a time"):
        TeacherJobs.open("default", sizes=[9, 19], where="x", caller="test")


def test_units_give_the_same_results_here_and_in_spawned_processes(teacher):
    states = bench_states(9, 40, seed=3)
    units = [3, 0, 2, 1]  # a unit is a slice of 10 positions, in this (unsorted) order
    ev = open_teacher(teacher)
    expected = {u: evaluate_all(ev, states[10 * u: 10 * u + 10]) for u in units}
    ev.close()
    for workers in (1, 2):
        done: list = []
        with TeacherJobs.open(teacher, sizes=[9], where="x", caller="test",
                              workers=workers) as jobs:
            assert jobs.in_process == (workers == 1)
            assert (jobs.evaluator is not None) == (workers == 1)  # a pool opens its own
            jobs.run(units, lambda u: states[10 * u: 10 * u + 10], evaluate_all,
                     lambda u, r, done=done: done.append((u, r)))
        assert [u for u, _ in done] == units  # in unit order
        for u, got in done:
            for a, b in zip(expected[u], got, strict=True):
                np.testing.assert_allclose(a.policy, b.policy, atol=1e-6)
                assert abs(a.value - b.value) < 1e-6
