"""GTP v2 at the protocol level (kosumi.go.gtp): preprocessing, parsing, reply formats, argument
helpers and the fixed handicap layout. Expected values come from the GTP v2 specification (draft
2: sections 2.5-2.7 and the handicap table of section 4.1.1), written out by hand."""

from __future__ import annotations

import pytest

from kosumi.go import gtp
from kosumi.go.coords import BLACK, PASS, WHITE
from kosumi.go.gtp import Command, GTPCommandError


# ----------------------------------------------------------------------------- preprocessing
@pytest.mark.parametrize(
    "raw, expected",
    [
        ("boardsize 9\n", "boardsize 9"),
        ("boardsize 9\r\n", "boardsize 9"),  # CR is a control character: removed
        ("play\tb\tD4", "play b D4"),  # HT becomes a space
        ("\x01\x02genmove\x07 w\x1b", "genmove w"),  # other control characters removed
        ("bo\x00ardsize 9", "boardsize 9"),  # removed, not replaced by a space
        ("genmove b # think hard", "genmove b"),  # comment stripped
        ("# a whole comment line", ""),
        ("   ", ""),
        ("", ""),
        ("\t\t", ""),
        ("\x7fname", "name"),  # DEL is a control character too
        ("  name  ", "name"),
    ],
)
def test_preprocess(raw, expected):
    assert gtp.preprocess(raw) == expected


def test_parse_skips_empty_and_comment_lines():
    assert gtp.parse_command("") is None
    assert gtp.parse_command("\n") is None
    assert gtp.parse_command("   # nothing here\n") is None
    assert gtp.parse_command("\r\n") is None


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("name", Command(None, "name", [])),
        ("1 name", Command(1, "name", [])),
        ("42 play black D4", Command(42, "play", ["black", "D4"])),
        ("007 komi 6.5", Command(7, "komi", ["6.5"])),
        ("  3\tboardsize\t19 # comment", Command(3, "boardsize", ["19"])),
        ("play  w   pass", Command(None, "play", ["w", "pass"])),
        ("-1 name", Command(None, "-1", ["name"])),  # an id has no sign: not an id
        ("12", Command(12, "", [])),  # an id alone
        ("4x name", Command(None, "4x", ["name"])),
    ],
)
def test_parse_command(raw, expected):
    assert gtp.parse_command(raw) == expected


# ----------------------------------------------------------------------------- replies
def test_success_formats():
    assert gtp.format_success(None, "2") == "= 2\n\n"
    assert gtp.format_success(5, "kosumi") == "=5 kosumi\n\n"
    assert gtp.format_success(None) == "= \n\n"
    assert gtp.format_success(0, "") == "=0 \n\n"


def test_success_multiline_has_no_empty_line_inside():
    reply = gtp.format_success(3, "\nline one\n\nline two\n\n")
    assert reply == "=3 \nline one\nline two\n\n"
    assert reply.count("\n\n") == 1 and reply.endswith("\n\n")


def test_failure_formats():
    assert gtp.format_failure(None, "unknown command") == "? unknown command\n\n"
    assert gtp.format_failure(17, "illegal move") == "?17 illegal move\n\n"
    assert gtp.format_failure(2, "two\nlines\n\n") == "?2 two lines\n\n"


def test_stream_header():
    assert gtp.stream_header(None) == "=\n"
    assert gtp.stream_header(9) == "=9\n"


def test_command_error_is_one_line():
    assert GTPCommandError("a\nb  c").message == "a b c"


# ----------------------------------------------------------------------------- arguments
def test_expect_args():
    gtp.expect_args(["a"], 1)
    gtp.expect_args([], 0, 1)
    with pytest.raises(GTPCommandError, match="syntax error"):
        gtp.expect_args([], 1)
    with pytest.raises(GTPCommandError, match="syntax error"):
        gtp.expect_args(["a", "b"], 1)


@pytest.mark.parametrize("token, value",
                         [("0", 0), ("19", 19), ("+3", 3), ("2147483647", 2**31 - 1)])
def test_parse_int_ok(token, value):
    assert gtp.parse_int(token) == value


@pytest.mark.parametrize("token", ["", "x", "1.5", "-1", "2147483648", "٣", "1e3", "9" * 200])
def test_parse_int_bad(token):
    with pytest.raises(GTPCommandError, match="syntax error"):
        gtp.parse_int(token)


def test_parse_float():
    assert gtp.parse_float("6.5") == 6.5
    assert gtp.parse_float("-3") == -3.0
    for bad in ("nan", "inf", "-inf", "abc", ""):
        with pytest.raises(GTPCommandError, match="syntax error"):
            gtp.parse_float(bad)
    with pytest.raises(GTPCommandError):
        gtp.parse_float("5", high=4)


def test_parse_color():
    for t in ("b", "B", "black", "BLACK", "Black"):
        assert gtp.parse_color(t) == BLACK
    for t in ("w", "W", "white", "White"):
        assert gtp.parse_color(t) == WHITE
    for t in ("x", "", "blue", "bl"):
        with pytest.raises(GTPCommandError, match="syntax error"):
            gtp.parse_color(t)


def test_parse_vertex():
    # index = row from the top * N + column; A19 is 0 on 19x19, T1 is 360
    assert gtp.parse_vertex("A19", 19) == 0
    assert gtp.parse_vertex("T1", 19) == 360
    assert gtp.parse_vertex("d4", 19) == 15 * 19 + 3
    assert gtp.parse_vertex("J9", 9) == 8  # no I column: J is the 9th
    assert gtp.parse_vertex("A1", 9) == 72
    assert gtp.parse_vertex("PASS", 9) == PASS
    assert gtp.parse_vertex("pass", 9) == PASS
    for bad in ("I5", "Z3", "A", "44", "", "resign", "A-1", "B2x", "Ä4"):
        with pytest.raises(GTPCommandError, match="syntax error"):
            gtp.parse_vertex(bad, 19)
    for off in ("T19", "K10", "A0", "A10"):
        with pytest.raises(GTPCommandError, match="illegal move"):
            gtp.parse_vertex(off, 9)


def test_format_vertex():
    assert gtp.format_vertex(0, 19) == "A19"
    assert gtp.format_vertex(80, 9) == "J1"
    assert gtp.format_vertex(PASS, 9) == "pass"
    assert gtp.format_vertex(-2, 9) == "resign"


# ----------------------------------------------------------------------------- handicap
def _vertices(stones: int, size: int) -> set[str]:
    return {gtp.format_vertex(p, size) for p in gtp.fixed_handicap_points(stones, size)}


# the GTP v2 specification's table (section 4.1.1) for 19x19
SPEC_19 = {
    2: "D4 Q16",
    3: "D4 Q16 D16",
    4: "D4 Q16 D16 Q4",
    5: "D4 Q16 D16 Q4 K10",
    6: "D4 Q16 D16 Q4 D10 Q10",
    7: "D4 Q16 D16 Q4 D10 Q10 K10",
    8: "D4 Q16 D16 Q4 D10 Q10 K4 K16",
    9: "D4 Q16 D16 Q4 D10 Q10 K4 K16 K10",
}


@pytest.mark.parametrize("stones", sorted(SPEC_19))
def test_fixed_handicap_19(stones):
    assert _vertices(stones, 19) == set(SPEC_19[stones].split())


def test_fixed_handicap_other_sizes():
    # third line up to 12x12, fourth line from 13x13; even sizes have no centre or sides
    assert _vertices(9, 9) == {"C3", "G7", "C7", "G3", "C5", "G5", "E3", "E7", "E5"}
    assert _vertices(5, 13) == {"D4", "K10", "D10", "K4", "G7"}
    assert _vertices(4, 8) == {"C3", "F6", "C6", "F3"}
    assert _vertices(4, 7) == {"C3", "E5", "C5", "E3"}
    assert _vertices(2, 12) == {"C3", "K10"}  # K is the 10th column (no I)


@pytest.mark.parametrize("stones, size",
                         [(1, 19), (10, 19), (0, 9), (5, 8), (5, 7), (2, 6), (2, 5)])
def test_fixed_handicap_invalid(stones, size):
    with pytest.raises(GTPCommandError, match="invalid number of stones"):
        gtp.fixed_handicap_points(stones, size)
