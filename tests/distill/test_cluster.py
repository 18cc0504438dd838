"""``kosumi label --ray`` and ``kosumi selfplay --ray``: a local Ray cluster of two workers
writes the folder one process writes, byte for byte, also when one worker's process is killed
mid-run; bad input is one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import random_net_file

pytest.importorskip("ray", reason="the cluster extra (ray) is not installed")

from kosumi.distill.positions import Position, write_positions
from kosumi.runtime.bench import bench_states

ACTOR = "ray::TeacherActor"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A teacher, positions, and the label folder one process makes of them."""
    root = tmp_path_factory.mktemp("cluster")
    teacher = random_net_file(root / "teacher.safetensors", arch="b3c24", board_sizes=(9,),
                              seed=3)
    positions = root / "positions"
    write_positions(positions, [Position.from_state(s, f"t:{i}") for i, s in
                                enumerate(bench_states(9, 480, seed=11))])
    one = root / "one"
    r = label(teacher, positions, one)
    assert r.returncode == 0, r.stderr
    return teacher, positions, one


def label(teacher: Path, positions: Path, out: Path, *extra: str,
          background: bool = False) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [sys.executable, "-m", "kosumi", "label", "--teacher", str(teacher), "--positions",
           str(positions), "--out", str(out), "--shard-size", "16", "--batch", "16",
           "--backend", "numpy", "--symmetries", "8", *extra]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                          check=False)


def same_folder(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    assert len(names) > 20
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_two_ray_workers_write_the_single_process_folder(job, tmp_path):
    teacher, positions, one = job
    r = label(teacher, positions, tmp_path / "ray", "--ray", "local", "--workers", "2")
    assert r.returncode == 0, r.stderr
    same_folder(one, tmp_path / "ray")


def test_self_play_on_ray_gives_the_same_games(job, tmp_path):
    teacher, _, _ = job
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    for name, extra in (("one", ()), ("ray", ("--ray", "local", "--workers", "2"))):
        r = subprocess.run([sys.executable, "-m", "kosumi", "selfplay", "--model", str(teacher),
                            "--games", "6", "--size", "9", "--policy-temperature", "1",
                            "--random-opening", "2", "--seed", "4", "--out",
                            str(tmp_path / name), *extra], capture_output=True, text=True,
                           timeout=300, env=env, check=False)
        assert r.returncode == 0, r.stderr
    for a in sorted((tmp_path / "one").rglob("*")):
        b = tmp_path / "ray" / a.relative_to(tmp_path / "one")
        assert a.is_dir() or a.read_bytes() == b.read_bytes(), a.name
    assert len(list((tmp_path / "ray" / "sgf").glob("*.sgf"))) == 6


def test_joining_a_cluster_that_ray_start_made(job, tmp_path):
    """``ray start --head``, then ``--ray auto`` and ``--ray HOST:PORT`` join it (two actors:
    the cluster's CPUs) and write the single-process folder."""
    import re
    import socket

    teacher, positions, one = job
    ray_cli = Path(sys.executable).with_name("ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head = subprocess.run([str(ray_cli), "start", "--head", "--port", str(port), "--num-cpus",
                           "2", "--include-dashboard", "false"], capture_output=True, text=True,
                          timeout=120, env=env, check=False)
    try:
        assert head.returncode == 0, head.stderr[-2000:]
        address = re.search(r"ray start --address='([^']+)'", head.stdout + head.stderr)
        assert address, head.stdout[-2000:]
        for name, how in (("auto", "auto"), ("addr", address.group(1))):
            r = label(teacher, positions, tmp_path / name, "--ray", how)
            assert r.returncode == 0, r.stderr
            same_folder(one, tmp_path / name)
    finally:
        subprocess.run([str(ray_cli), "stop", "--force"], capture_output=True, timeout=120,
                       env=env, check=False)


def test_a_worker_killed_mid_run_loses_nothing(job, tmp_path):
    teacher, positions, one = job
    out = tmp_path / "ray"
    proc = label(teacher, positions, out, "--ray", "local", "--workers", "2", background=True)
    killed = None
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        manifest = out / "manifest.json"
        if manifest.exists() and manifest.read_text().count('"chunk"') >= 2:
            pids = subprocess.run(["pgrep", "-f", f"^{ACTOR}"], capture_output=True,
                                  text=True, check=False).stdout.split()
            if pids:
                killed = int(pids[0])
                os.kill(killed, signal.SIGKILL)
                break
        time.sleep(0.2)
    _, err = proc.communicate(timeout=300)
    assert killed is not None, "the run ended before a worker could be killed"
    assert proc.returncode == 0, err
    same_folder(one, out)


def test_bad_input_is_one_line(job, tmp_path):
    teacher, positions, _ = job
    cases = [
        (("--ray", "127.0.0.1:9"), "--ray 127.0.0.1:9: cannot reach the Ray cluster"),
        (("--ray", "nowhere"), "--ray nowhere: not an address"),
    ]
    import torch

    if not torch.cuda.is_available():  # this machine: a CUDA teacher has nowhere to run
        cases.append((("--ray", "local", "--device", "cuda"), "the cluster has no GPU"))
    for extra, needle in cases:
        r = label(teacher, positions, tmp_path / "x", *extra)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and lines and needle in lines[-1], r.stderr
        assert "Traceback" not in r.stderr
    # without the extra: a ray that cannot be imported
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no ray here')\n")
    r = subprocess.run([sys.executable, "-m", "kosumi", "label", "--teacher", str(teacher),
                        "--positions", str(positions), "--out", str(tmp_path / "z"), "--ray",
                        "local"], capture_output=True, text=True, timeout=120, check=False,
                       env={**os.environ, "PYTHONPATH": str(fake.parent)})
    assert r.returncode == 2 and "pip install 'kosumi[cluster]'" in r.stderr, r.stderr
    assert not (tmp_path / "z" / "manifest.json").exists() or '"chunk"' not in (
        tmp_path / "z" / "manifest.json").read_text()
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(teacher.read_bytes()[:100])
    r = label(broken, positions, tmp_path / "y", "--ray", "local", "--workers", "1")
    assert r.returncode == 2 and "broken.safetensors" in r.stderr and "Traceback" not in r.stderr


def test_a_worker_without_the_teacher_or_with_another_file_stops_the_run(job, tmp_path,
                                                                           monkeypatch):
    """The checks a worker makes before any unit (a real local Ray instance): the teacher fails
    to load there, its file is another one than the driver's, or it runs another kosumi version
    than the driver (the driver's version is changed in this process only: the workers import
    the installed kosumi); and results come back in unit order. (``int`` makes a worker's
    state 0 and ``max(0, x)`` is the work: builtins, so that the workers can unpickle them.)"""
    from kosumi.distill.cluster import run_in_order
    from kosumi.distill.teacher_jobs import open_teacher
    from kosumi.errors import KosumiError

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    teacher, _, _ = job
    done: list = []
    missing = str(tmp_path / "elsewhere" / "t.safetensors")
    with pytest.raises(KosumiError, match=r"^worker [^:]+:\d+: .*elsewhere/t.safetensors"):
        run_in_order("local", [1, 2], lambda u: u, open_teacher, (missing,), max,
                     lambda u, r: done.append(r), workers=1)
    with pytest.raises(KosumiError, match=r"^worker [^:]+:\d+: .*teacher.safetensors is another "
                                          r"file there"):
        run_in_order("local", [1, 2], lambda u: u, int, (), max, lambda u, r: done.append(r),
                     workers=1, teacher_file=str(teacher), teacher_sha256="0" * 64)
    import kosumi

    real = kosumi.__version__
    monkeypatch.setattr(kosumi, "__version__", "0.0.0+driver")
    with pytest.raises(KosumiError, match=rf"^worker [^:]+:\d+: kosumi {re.escape(real)}, but "
                                          r"the driver runs 0\.0\.0\+driver \(install the same "
                                          r"kosumi on every node\)$"):
        run_in_order("local", [1, 2], lambda u: u, int, (), max, lambda u, r: done.append(r),
                     workers=1)
    monkeypatch.setattr(kosumi, "__version__", real)
    assert done == []  # nothing committed
    run_in_order("local", [3, 1, 2, 5], lambda u: u * 10, int, (), max,
                 lambda u, r: done.append((u, r)), workers=2)
    assert done == [(3, 30), (1, 10), (2, 20), (5, 50)]  # in unit order
