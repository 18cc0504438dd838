"""The Go Text Protocol (GTP v2) at the protocol level: pure functions, no engine.

What the GTP v2 specification (Gunnar Farnebäck, draft 2, sections 2.2-2.7 and 4) asks of a
command line and a response, and nothing else:

* ``preprocess`` a raw line: remove every control character except HT and LF, turn HT into a
  space, drop everything from ``#`` on, and strip; an empty result means "skip this line".
* ``parse_command`` splits a preprocessed line into an optional numeric id (``int``: digits only),
  a command name and its arguments.
* ``format_success`` / ``format_failure`` build ``=id response\\n\\n`` and ``?id message\\n\\n``.
  A response never contains an empty line (that would end it early), so empty lines inside a
  multi-line response are dropped.
* ``GTPCommandError`` is raised by a command handler to answer ``? message``; the standard
  messages are the constants below.
* Argument helpers (``parse_color``, ``parse_vertex``, ``parse_int``, ...) turn tokens into
  values and raise ``GTPCommandError`` with the standard message when they cannot.
* ``fixed_handicap_points``: the handicap layout of the spec (section 4.1.1).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from kosumi.go import coords
from kosumi.go.coords import PASS

# Standard failure messages (GTP v2, section 6.3 and the command list).
UNKNOWN_COMMAND = "unknown command"
SYNTAX_ERROR = "syntax error"
ILLEGAL_MOVE = "illegal move"
UNACCEPTABLE_SIZE = "unacceptable size"
CANNOT_UNDO = "cannot undo"
BOARD_NOT_EMPTY = "board not empty"
INVALID_NUMBER_OF_STONES = "invalid number of stones"
BAD_VERTEX_LIST = "bad vertex list"
CANNOT_LOAD_FILE = "cannot load file"

#: the largest ``int`` GTP defines (the spec's ``int`` is 0 <= x <= 2**31 - 1)
MAX_INT = 2**31 - 1
#: a longer run of digits is not taken as an id (it becomes an unknown command name)
MAX_ID_DIGITS = 100

# every C0 control character and DEL, except HT (\t) and LF (\n)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class GTPCommandError(Exception):
    """A command failed: the engine answers ``? message`` (one line) and carries on."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = _one_line(message)


@dataclass(frozen=True)
class Command:
    """One parsed command line."""

    id: int | None
    name: str
    args: list[str] = field(default_factory=list)


def preprocess(line: str) -> str:
    """Apply the spec's preprocessing (section 2.5) to one line; '' means an empty line.

    Control characters other than HT and LF are removed (CR included), HT becomes a space,
    everything from the first ``#`` is a comment, and surrounding whitespace goes.
    """
    line = _CONTROL.sub("", line)
    line = line.replace("\t", " ")
    hash_at = line.find("#")
    if hash_at >= 0:
        line = line[:hash_at]
    return line.strip()


def parse_command(line: str) -> Command | None:
    """Preprocess and split one line; None for a line to skip (empty or comment only).

    A first token made only of ASCII digits (at most ``MAX_ID_DIGITS``) is the id. A line with an
    id and no command name yields a command with the empty name (the engine answers ``unknown
    command``).
    """
    text = preprocess(line)
    if not text:
        return None
    tokens = text.split()
    cid: int | None = None
    if _is_uint(tokens[0]) and len(tokens[0]) <= MAX_ID_DIGITS:
        cid = int(tokens[0])
        tokens = tokens[1:]
    if not tokens:
        return Command(cid, "", [])
    return Command(cid, tokens[0], tokens[1:])


def _is_uint(token: str) -> bool:
    return token.isascii() and token.isdigit()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _body(text: str) -> str:
    """A response body: no empty lines (they would end the response), no trailing newline."""
    lines = [ln.rstrip() for ln in str(text).replace("\r", "").split("\n")]
    return "\n".join(ln for i, ln in enumerate(lines) if i == 0 or ln.strip())


def _id(cid: int | None) -> str:
    return "" if cid is None else str(cid)


def format_success(cid: int | None, response: str = "") -> str:
    """``=id response`` followed by the blank line that ends every response."""
    return f"={_id(cid)} {_body(response)}\n\n"


def format_failure(cid: int | None, message: str) -> str:
    """``?id message`` followed by a blank line; the message is squeezed onto one line."""
    return f"?{_id(cid)} {_one_line(message)}\n\n"


def stream_header(cid: int | None) -> str:
    """The first line of a streamed (analysis) response: ``=id`` and a newline.

    The streamed lines follow, one per update, and an empty line ends the response.
    """
    return f"={_id(cid)}\n"


# ----------------------------------------------------------------------------- arguments
def expect_args(args: list[str], low: int, high: int | None = None) -> None:
    """Fail with ``syntax error`` unless ``low <= len(args) <= high`` (high defaults to low)."""
    high = low if high is None else high
    if not (low <= len(args) <= high):
        raise GTPCommandError(SYNTAX_ERROR)


def parse_int(token: str, low: int = 0, high: int = MAX_INT) -> int:
    """A GTP ``int`` (digits, optionally signed when low < 0) within [low, high]."""
    t = token.strip()
    body = t[1:] if t[:1] in "+-" else t
    if not body or not _is_uint(body) or len(body) > 100:
        raise GTPCommandError(SYNTAX_ERROR)
    value = int(t)
    if not (low <= value <= high):
        raise GTPCommandError(SYNTAX_ERROR)
    return value


def parse_float(token: str, low: float = -math.inf, high: float = math.inf) -> float:
    """A finite ``float`` within [low, high] (no nan, no inf)."""
    try:
        value = float(token)
    except ValueError:
        raise GTPCommandError(SYNTAX_ERROR) from None
    if not math.isfinite(value) or not (low <= value <= high):
        raise GTPCommandError(SYNTAX_ERROR)
    return value


def parse_color(token: str) -> int:
    """``b``/``black``/``w``/``white`` (any case) -> BLACK / WHITE."""
    try:
        return coords.parse_color(token)
    except ValueError:
        raise GTPCommandError(SYNTAX_ERROR) from None


def parse_vertex(token: str, size: int) -> int:
    """A vertex (``D4``, ``pass``) -> flat index or PASS.

    A malformed token (or ``resign``) is a ``syntax error``; a well-formed vertex that lies off
    this board (``T19`` on 9x9) is an ``illegal move``.
    """
    t = token.strip().upper()
    if t == "PASS":
        return PASS
    if len(t) < 2 or t[0] not in coords.COLUMNS or not _is_uint(t[1:]) or len(t) > 4:
        raise GTPCommandError(SYNTAX_ERROR)
    try:
        return coords.vertex_to_point(t, size)
    except ValueError:
        raise GTPCommandError(ILLEGAL_MOVE) from None


def format_vertex(move: int, size: int) -> str:
    """Flat index / PASS / RESIGN -> ``D4`` / ``pass`` / ``resign``."""
    return coords.point_to_vertex(move, size)


# ----------------------------------------------------------------------------- handicap
def max_fixed_handicap(size: int) -> int:
    """The largest ``fixed_handicap`` the spec defines for a board size (0: none)."""
    if size < 7:
        return 0
    if size == 7 or size % 2 == 0:
        return 4
    return 9


def fixed_handicap_points(stones: int, size: int) -> list[int]:
    """The spec's fixed handicap layout (section 4.1.1) as flat indices.

    Corner (and side) stones are on the 3rd line up to 12x12 and on the 4th line from 13x13.
    2: lower-left and upper-right corners; 3: + upper-left; 4: + lower-right; 5: 4 + centre;
    6: 4 + left and right sides; 7: 6 + centre; 8: 6 + top and bottom sides; 9: 8 + centre.
    Raises ``GTPCommandError('invalid number of stones')`` where no layout exists.
    """
    if not (2 <= stones <= max_fixed_handicap(size)):
        raise GTPCommandError(INVALID_NUMBER_OF_STONES)
    edge = 3 if size >= 13 else 2  # 0-based distance from the edge
    low, mid, high = edge, size // 2, size - 1 - edge
    # (x, y) with y counted from the top; "lower" = high y
    corners = [(low, high), (high, low), (low, low), (high, high)]
    sides_lr = [(low, mid), (high, mid)]
    sides_tb = [(mid, high), (mid, low)]
    centre = [(mid, mid)]
    layout = corners[: min(stones, 4)]
    if stones >= 6:
        layout += sides_lr
    if stones >= 8:
        layout += sides_tb
    if stones % 2 == 1 and stones >= 5:
        layout += centre
    return [coords.point(x, y, size) for x, y in layout]
