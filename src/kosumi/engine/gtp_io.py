"""The GTP engine's input and output: the serving loop, the stdin reader and streamed replies.

``serve(handle, stdin, stdout, ...)`` is the loop a GUI or a match runner talks to: stdin is read
by a separate thread that queues lines and sets the current stop ``Event``, so a streaming command
(``lz-analyze``) runs until the next command line arrives; replies are written under a lock, and a
broken stdout ends the loop quietly.

``ReplyStream`` is the reply of a streaming command: ``=id``, one line per update, an empty line.
In the loop its lines go out as they come (through ``emit``); called without ``emit`` (tests,
scripts) they are collected and returned with the rest of the reply.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from kosumi.go import gtp

Emit = Callable[[str], None]
#: ``handle(line, emit, stop) -> reply``: executes one command line (``GTPEngine.handle``)
Handler = Callable[[str, Emit, threading.Event], str]


class ReplyStream:
    """The reply of a streaming command: forwards to ``emit`` (run loop) or collects (handle)."""

    def __init__(self, emit: Emit | None):
        self._emit = emit
        self._parts: list[str] = []
        self.started = False

    def write(self, text: str) -> None:
        if self._emit is None:
            self._parts.append(text)
        else:
            self._emit(text)

    def start(self, cid: int | None) -> None:
        self.started = True
        self.write(gtp.stream_header(cid))

    def line(self, text: str) -> None:
        """One streamed line; never empty (an empty line would end the reply)."""
        text = " ".join(text.split())
        if text:
            self.write(text + "\n")

    def finish(self, trailer: str = "") -> str:
        """The rest of the reply: what was collected, the trailer lines, the closing blank line."""
        if trailer:
            self._parts.append(trailer if trailer.endswith("\n") else trailer + "\n")
        self._parts.append("\n")
        out = "".join(self._parts)
        self._parts = []
        return out


def serve(handle: Handler, stdin: IO[Any], stdout: IO[str], *, log: Callable[[str], None],
          done: Callable[[], bool]) -> None:
    """Feed the lines of ``stdin`` to ``handle`` and write its replies to ``stdout``, until
    ``done()`` after a command, the end of ``stdin`` or a broken ``stdout``."""
    lines: queue.Queue[str | None] = queue.Queue()
    out_lock = threading.Lock()
    broken = threading.Event()
    stop_event: threading.Event | None = None  # the running command's; set by the reader

    def reader() -> None:
        try:
            for text in read_lines(stdin):
                lines.put(text)
                ev = stop_event
                if ev is not None:
                    ev.set()
        except (OSError, ValueError) as e:
            log(f"stdin closed: {e}")
        finally:
            lines.put(None)
            ev = stop_event
            if ev is not None:
                ev.set()

    def write(text: str) -> None:
        if broken.is_set():
            return
        with out_lock:
            try:
                stdout.write(text)
                stdout.flush()
            except (OSError, ValueError):
                broken.set()

    threading.Thread(target=reader, name="gtp-stdin", daemon=True).start()
    while not done() and not broken.is_set():
        line = lines.get()
        if line is None:
            break
        stop = threading.Event()
        stop_event = stop
        if not lines.empty():  # a line that arrived before the event was published
            stop.set()
        reply = handle(line, write, stop)
        stop_event = None
        if reply:
            write(reply)


def read_lines(stream: IO[Any]) -> Iterator[str]:
    """The lines of ``stream`` as text. A stream with a file descriptor is read with ``os.read``
    so that the reader thread never holds the lock of a buffered ``sys.stdin`` (a daemon thread
    blocked inside it aborts the interpreter at exit)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None:
        while True:
            raw = stream.readline()
            if not raw:
                return
            yield raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    pending = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            yield raw.decode("utf-8", "replace") + "\n"
    if pending:
        yield pending.decode("utf-8", "replace")
