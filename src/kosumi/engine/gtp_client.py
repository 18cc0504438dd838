"""A client for one GTP engine running as a child process.

``GTPProcess`` starts the engine with pipes on stdin/stdout/stderr. Two daemon threads read its
output: one turns stdout into a queue of lines (so ``send`` can wait with a timeout and never
hang), the other drains stderr into a bounded deque (engines such as Leela Zero write a lot to
stderr and block when nobody reads it; the last lines are kept for error messages).

``send(command, timeout)`` returns the text of a ``=`` response, raises ``GTPError`` for a ``?``
response, ``GTPTimeout`` when no full response arrives in time (the engine is then out of sync and
refuses further commands: close it and start a new one) and ``EngineCrashed`` when the process
has exited. ``close()`` sends ``quit``, waits a grace period and then kills the engine's whole
process group.

Leela Zero writes to ``~/.local/share/leela-zero`` at every start: callers should point ``HOME``
to a temporary folder through ``env`` (``play_match`` does this for commands naming ``leelaz``).
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

__all__ = [
    "EngineCrashed",
    "EngineError",
    "GTPError",
    "GTPProcess",
    "GTPTimeout",
    "split_command",
]


class EngineError(Exception):
    """Base class of the errors of a GTP engine process."""


class GTPError(EngineError):
    """The engine answered a command with ``?`` (a failure response)."""

    def __init__(self, command: str, message: str, name: str = "engine"):
        self.command = command
        self.message = message
        super().__init__(f"{name}: '{command}' failed: {message}")


class GTPTimeout(EngineError):
    """No complete response arrived in time."""


class EngineCrashed(EngineError):
    """The engine process exited (or closed its stdout / stdin)."""

    def __init__(self, message: str, returncode: int | None = None, stderr_tail: str = ""):
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        super().__init__(message)


def split_command(command: str | Sequence[str]) -> list[str]:
    """A command line (string, split like a POSIX shell) or argument list -> argument list."""
    args = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not args:
        raise ValueError("empty engine command")
    return args


_EOF = None  # queue sentinel: stdout closed


class GTPProcess:
    """One running GTP engine. Use as a context manager or call ``close()``.

    Raises ``OSError`` (e.g. ``FileNotFoundError``) if the program cannot be started.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        name: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stderr_lines: int = 200,
    ):
        self.args = split_command(command)
        self.name = name or os.path.basename(self.args[0])
        self._stderr: collections.deque[str] = collections.deque(maxlen=max(1, stderr_lines))
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._eof = False
        self._broken: str | None = None  # why the engine is out of sync, if it is
        self._closed = False
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            self.args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # its own process group, so kill() reaches wrapper children
        )
        self._threads = [
            threading.Thread(target=self._read_stdout, name=f"gtp-out-{self.name}", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"gtp-err-{self.name}", daemon=True),
        ]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ reader threads
    def _read_stdout(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        try:
            for raw in iter(stream.readline, b""):
                self._lines.put(raw.decode("utf-8", "replace"))
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(_EOF)

    def _read_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        try:
            for raw in iter(stream.readline, b""):
                self._stderr.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------ queries
    @property
    def alive(self) -> bool:
        """Is the process running (and not known to be out of sync)?"""
        return self.proc.poll() is None and not self._eof and self._broken is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def stderr_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines the engine wrote to stderr."""
        tail = list(self._stderr)[-lines:]
        return "\n".join(tail)

    def _crashed(self, doing: str) -> EngineCrashed:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:  # it has exited: let the reader drain what it wrote last
            self._threads[1].join(timeout=2.0)
        tail = self.stderr_tail(5)
        status = f"exit code {code}" if code is not None else "closed its output"
        msg = f"{self.name}: engine exited ({status}) {doing}"
        if tail:
            msg += f"; stderr: {tail.splitlines()[-1].strip()}"
        return EngineCrashed(msg, returncode=code, stderr_tail=tail)

    # ------------------------------------------------------------------ commands
    def send(self, command: str, timeout: float | None = None) -> str:
        """Send one GTP command and return the response text (without the ``=``).

        Raises GTPError for a ``?`` response, GTPTimeout after ``timeout`` seconds (None = wait
        forever), EngineCrashed if the engine exits before answering.
        """
        command = command.strip()
        if "\n" in command or not command:
            raise ValueError(f"invalid GTP command {command!r}")
        with self._lock:
            if self._closed:
                raise EngineCrashed(f"{self.name}: engine is closed")
            if self._broken is not None:
                raise GTPTimeout(f"{self.name}: engine is out of sync ({self._broken})")
            if self._eof or self.proc.poll() is not None:
                raise self._crashed(f"before '{command}'")
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(command.encode() + b"\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                raise self._crashed(f"while sending '{command}'") from None
            return self._read_response(command, timeout)

    def _read_response(self, command: str, timeout: float | None) -> str:
        deadline = None if timeout is None else time.monotonic() + timeout
        lines: list[str] = []
        status = ""
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                self._broken = f"no answer to '{command}' within {timeout:g} s"
                raise GTPTimeout(f"{self.name}: {self._broken}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue  # the deadline check above raises
            if line is _EOF:
                self._eof = True
                raise self._crashed(f"while answering '{command}'")
            line = line.replace("\r", "").rstrip("\n")
            if not status:
                stripped = line.strip()
                if not stripped or stripped[0] not in "=?":
                    continue  # noise before the response (blank lines, debug output)
                status = stripped[0]
                body = stripped[1:]
                # drop an optional numeric id right after the status character
                i = 0
                while i < len(body) and body[i].isdigit():
                    i += 1
                lines.append(body[i:].strip())
                continue
            if line.strip() == "":
                break
            lines.append(line)
        text = "\n".join(lines).strip()
        if status == "?":
            raise GTPError(command, text, self.name)
        return text

    # ------------------------------------------------------------------ shutdown
    def close(self, grace: float = 2.0) -> int | None:
        """Ask the engine to quit, wait up to ``grace`` seconds, then kill it. Idempotent.

        Returns the exit code (negative for a signal), or None if it could not be collected.
        """
        if self._closed:
            return self.proc.poll()
        if self.alive:
            with contextlib.suppress(EngineError):
                self.send("quit", timeout=grace)
        self._closed = True
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace)
        self.kill()
        return self.proc.poll()

    def kill(self) -> None:
        """Kill the engine's process group and release its pipes. The group is killed even when
        the engine itself has exited: children it left behind (a wrapper's) are still in it."""
        self._closed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        for t in self._threads:
            t.join(timeout=1.0)
        if any(t.is_alive() for t in self._threads):
            return  # a grandchild still holds the pipes; leave them to the daemon threads
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> GTPProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # best effort: never leave an engine behind
        try:
            if not self._closed and self.proc.poll() is None:
                self.kill()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"GTPProcess({shlex.join(self.args)!r}, pid={self.proc.pid})"
