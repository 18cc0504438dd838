"""The GTP engine's input and output (kosumi.engine.gtp_io): streamed replies, the serving loop
and the stdin reader.

Oracles: the GTP reply framing written out by hand (``=id``, the lines, one empty line), and
byte streams whose lines are known.
"""

from __future__ import annotations

import io
import os
import threading

from kosumi.engine.gtp_io import ReplyStream, read_lines, serve


def test_a_collected_stream_is_one_framed_reply():
    r = ReplyStream(None)
    r.start(7)
    assert r.started
    r.line("info  move D4\tvisits 3 ")  # whitespace folded to single spaces
    r.line("   ")  # an empty line would end the reply: dropped
    assert r.finish("play D4") == "=7\ninfo move D4 visits 3\nplay D4\n\n"
    r.start(None)
    assert r.finish() == "=\n\n"


def test_an_emitting_stream_sends_lines_as_they_come():
    sent: list[str] = []
    r = ReplyStream(sent.append)
    r.start(None)
    r.line("info a")
    r.line("info b")
    assert sent == ["=\n", "info a\n", "info b\n"]
    assert r.finish("play pass\n") == "play pass\n\n"  # the rest goes back to the caller


def echo(line: str, emit, stop: threading.Event) -> str:
    return f"= {line.strip()}\n\n" if line.strip() else ""


def test_serve_answers_each_line_in_order_until_the_input_ends():
    out = io.StringIO()
    serve(echo, io.StringIO("name\n\nversion\nquit"), out, log=lambda m: None,
          done=lambda: False)
    assert out.getvalue() == "= name\n\n= version\n\n= quit\n\n"


def test_serve_stops_when_done_after_a_command():
    out = io.StringIO()
    seen: list[str] = []

    def handle(line, emit, stop):
        seen.append(line.strip())
        return "=\n\n"

    serve(handle, io.StringIO("a\nquit\nb\nc\n"), out, log=lambda m: None,
          done=lambda: bool(seen) and seen[-1] == "quit")
    assert seen == ["a", "quit"] and out.getvalue() == "=\n\n=\n\n"


class Broken(io.StringIO):
    def write(self, text):
        raise OSError("broken pipe")


def test_a_broken_stdout_ends_the_loop_quietly():
    calls: list[str] = []

    def handle(line, emit, stop):
        calls.append(line)
        return "=\n\n"

    serve(handle, io.StringIO("a\nb\nc\n"), Broken(), log=lambda m: None, done=lambda: False)
    assert calls == ["a\n"]


def test_a_streaming_command_runs_until_the_next_line_arrives():
    """The reader sets the running command's stop event when the next line comes."""
    r, w = os.pipe()
    out = io.StringIO()
    stopped = threading.Event()

    def handle(line, emit, stop):
        if line.strip() == "analyze":
            emit("=\n")
            os.write(w, b"name\n")  # the next command arrives while this one streams
            assert stop.wait(10)
            stopped.set()
            return "\n"
        os.close(w)
        return "= kosumi\n\n"

    with os.fdopen(r, "rb") as stdin:
        os.write(w, b"analyze\n")
        serve(handle, stdin, out, log=lambda m: None, done=lambda: False)
    assert stopped.is_set() and out.getvalue() == "=\n\n= kosumi\n\n"


def test_read_lines_from_a_file_descriptor_and_from_a_text_stream():
    r, w = os.pipe()
    os.write(w, b"one\ntw")
    os.write(w, b"o\n\xff bad\nno newline at the end")
    os.close(w)
    with os.fdopen(r, "rb") as stream:
        assert list(read_lines(stream)) == ["one\n", "two\n", "\ufffd bad\n",
                                            "no newline at the end"]
    assert list(read_lines(io.StringIO("a\nb"))) == ["a\n", "b"]
    assert list(read_lines(io.BytesIO(b"x\n\xfe"))) == ["x\n", "\ufffd"]
