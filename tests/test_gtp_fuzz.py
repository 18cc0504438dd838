"""Fuzzing ``GTPEngine.handle``: random lines and mutations of valid commands, in random order.

Whatever arrives, every reply must be a well-formed GTP response (``=`` or ``?``, the command's
id echoed, exactly one blank line, at its end), no exception may escape, and afterwards the
engine must still answer ``protocol_version`` correctly.
"""

from __future__ import annotations

import io
import os
import re
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kosumi.engine.gtp_engine import GTPEngine
from kosumi.engine.mcts import SearchConfig
from kosumi.go.gtp import preprocess
from kosumi.runtime.evaluator import UniformEvaluator

# valid commands to start from
TEMPLATES = [
    "protocol_version", "name", "version", "known_command play", "list_commands", "quit",
    "boardsize 9", "boardsize 5", "boardsize 3", "clear_board", "komi 6.5", "komi -3",
    "play b E5", "play w C3", "play black pass", "play white A1", "genmove b", "genmove w",
    "undo", "showboard", "final_score", "final_status_list dead", "final_status_list alive",
    "final_status_list seki", "time_settings 10 1 1", "time_left b 5 0", "time_left w 1 1",
    "kgs-time_settings canadian 10 5 2", "loadsgf /nonexistent/game.sgf 3", "printsgf",
    "fixed_handicap 4", "place_free_handicap 3", "set_free_handicap C3 G7 E5",
    "kgs-genmove_cleanup b", "lz-analyze 1", "lz-analyze w 2", "kata-analyze b 1",
    "kata-analyze interval 1 ownership true maxmoves 3", "lz-genmove_analyze b 1",
    "genmove_analyze w 1", "kata-genmove_analyze b 1",
]

WEIRD_TOKENS = [
    "", "0", "-1", "1", "2", "19", "20", "-19", "99999999999999999999999999", "1e309", "nan",
    "inf", "-inf", "0.5", "+7", "A0", "Z99", "T19", "J9", "I5", "a1", "pass", "PASS", "resign",
    "b", "w", "black", "white", "x", "#", "\t", "\x00", "\x1b[31m", "é", "五", "\u2028", "🀄",
    "D4", "Q16", "K10", "E5", "A1", "interval", "ownership", "true", "maxmoves", "=", "?",
    "\r", "\n", "9" * 60,
]

token = st.one_of(st.sampled_from(WEIRD_TOKENS), st.text(max_size=8))


@st.composite
def mutated(draw) -> str:
    """A valid command with tokens replaced, dropped, duplicated or appended; maybe an id."""
    tokens = draw(st.sampled_from(TEMPLATES)).split()
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["replace", "drop", "insert", "append"]))
        i = draw(st.integers(0, max(len(tokens) - 1, 0)))
        if op == "replace" and tokens:
            tokens[i] = draw(token)
        elif op == "drop" and tokens:
            del tokens[i]
        elif op == "insert":
            tokens.insert(i, draw(token))
        else:
            tokens.append(draw(token))
    line = " ".join(tokens)
    if draw(st.booleans()):
        line = f"{draw(st.integers(0, 2**40))} {line}"
    return line


lines = st.one_of(
    st.sampled_from(TEMPLATES),
    mutated(),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="ascii"), max_size=40),
)

REPLY_HEAD = re.compile(r"^([=?])(\d*)")


def no_file_writes(line: str) -> str:
    """``printsgf FILE`` writes FILE (and the tests run as any user): keep only ``printsgf``."""
    tokens = preprocess(line).split()
    if tokens and tokens[0].isdigit():
        tokens = tokens[1:]
    return "printsgf" if tokens[:1] == ["printsgf"] else line


def check_reply(line: str, reply: str) -> None:
    text = preprocess(line)
    if not text:
        assert reply == "", (line, reply)
        return
    assert reply.endswith("\n\n"), (line, reply)
    assert reply.count("\n\n") == 1, (line, reply)  # the only blank line ends the reply
    m = REPLY_HEAD.match(reply)
    assert m, (line, reply)
    first = text.split()[0]
    if first.isascii() and first.isdigit() and len(first) <= 100:
        assert m.group(2) == str(int(first)), (line, reply)
    else:
        assert m.group(2) == "", (line, reply)
    if m.group(1) == "?":
        assert reply.count("\n") == 2, (line, reply)  # failures are one line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, min_size=1, max_size=8))
def test_any_command_sequence_gets_well_formed_replies(commands):
    engine = GTPEngine(UniformEvaluator(), SearchConfig(visits=4, batch=2, seed=0),
                       log=io.StringIO())
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # whatever a command might write lands in a scratch folder
        try:
            for line in map(no_file_writes, commands):
                check_reply(line, engine.handle(line))
        finally:
            os.chdir(here)
    assert engine.handle("protocol_version") == "= 2\n\n"
    assert engine.handle("11 name") == "=11 kosumi\n\n"
    assert engine.handle("boardsize 9") == "= \n\n"
    move = engine.handle("genmove b")
    assert re.fullmatch(r"= ([A-HJ]\d|pass|resign)\n\n", move, re.IGNORECASE), move


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_single_line(line):
    engine = GTPEngine(UniformEvaluator(), SearchConfig(visits=2, batch=2, seed=0),
                       log=io.StringIO())
    line = no_file_writes(line)
    check_reply(line, engine.handle(line))
    assert engine.handle("protocol_version") == "= 2\n\n"


def test_every_single_token_replacement_of_every_template():
    """Deterministic sweep: each argument of each valid command replaced by each weird token."""
    engine = GTPEngine(UniformEvaluator(), SearchConfig(visits=2, batch=2, seed=0),
                       log=io.StringIO())
    engine.handle("boardsize 9")
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for template in TEMPLATES:
                tokens = template.split()
                for i in range(len(tokens) + 1):
                    for weird in WEIRD_TOKENS:
                        mutant = [*tokens[:i], weird, *tokens[i + 1:]]
                        line = no_file_writes(" ".join(mutant))
                        check_reply(line, engine.handle(line))
                engine.handle("boardsize 9")  # keep the games small
        finally:
            os.chdir(here)
    assert engine.handle("protocol_version") == "= 2\n\n"
