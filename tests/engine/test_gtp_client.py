"""The GTP client (kosumi.engine.gtp_client): answers, errors, crashes, timeouts, stderr and
cleanup, against the fake engines of tests/engines/fake_gtp.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_GTP, fake_gtp

from kosumi.engine.gtp_client import EngineCrashed, GTPError, GTPProcess, GTPTimeout


# ----------------------------------------------------------------------------- GTP client
def test_gtp_client_answers_errors_and_crash():
    with GTPProcess(fake_gtp("crash")) as eng:
        assert eng.send("name", timeout=10) == "fake-crash"
        with pytest.raises(GTPError, match="unknown command"):
            eng.send("frobnicate", timeout=10)
        with pytest.raises(EngineCrashed, match="exit code 3"):
            eng.send("genmove b", timeout=10)
        assert "segmentation fault" in eng.stderr_tail()
        with pytest.raises(EngineCrashed):
            eng.send("name", timeout=10)


def test_gtp_client_timeout_never_hangs():
    eng = GTPProcess(fake_gtp("hang"))
    try:
        eng.send("boardsize 9", timeout=10)
        t0 = time.monotonic()
        with pytest.raises(GTPTimeout):
            eng.send("genmove b", timeout=0.5)
        assert time.monotonic() - t0 < 3
        with pytest.raises(GTPTimeout, match="out of sync"):
            eng.send("name", timeout=5)
    finally:
        t0 = time.monotonic()
        eng.close(grace=0.5)
        assert time.monotonic() - t0 < 5
    assert eng.proc.poll() is not None  # killed


def test_gtp_client_drains_stderr():
    with GTPProcess(fake_gtp("noisy"), stderr_lines=50) as eng:
        for _ in range(3):
            assert eng.send("genmove b", timeout=20).lower() == "pass"
        assert len(eng.stderr_tail(1000).splitlines()) == 50  # bounded
    # the last line written before the third answer is among the kept ones
    assert "noise line 19999" in eng.stderr_tail(50)


def test_gtp_client_missing_program():
    with pytest.raises(FileNotFoundError):
        GTPProcess(["/nonexistent/engine", "--gtp"])


def _running(pid: int) -> bool:
    """Is ``pid`` a live process (not gone, not a zombie)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_close_kills_what_an_engine_left_in_its_process_group(tmp_path: Path):
    """A wrapper's child (here a background sleep) dies with the engine's group, even though
    the engine itself exited cleanly on 'quit'."""
    pidfile = tmp_path / "sleep.pid"
    script = f"sleep 600 & echo $! > {pidfile}; exec {sys.executable} {FAKE_GTP} resign"
    engine = GTPProcess(["sh", "-c", script])
    assert engine.send("name", timeout=20) == "fake-resign"
    pid = int(pidfile.read_text())
    assert _running(pid)
    engine.close()
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)
