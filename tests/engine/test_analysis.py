"""GTP analysis commands (kosumi.engine.analysis): the argument syntax of lz-analyze /
kata-analyze and the ``info`` lines GUIs read.

Oracles: argument lists and info lines written out by hand from the formats Leela Zero (integers
in 1/10000) and KataGo (floats in [0, 1]) document.
"""

from __future__ import annotations

import numpy as np
import pytest

from kosumi.engine.analysis import (
    AnalyzeOptions,
    info_line,
    looks_numeric,
    parse_analyze_args,
    parse_bool,
    permyriad,
    unit,
)
from kosumi.engine.mcts import MoveInfo, SearchResult
from kosumi.go.coords import BLACK, PASS, WHITE, vertex_to_point
from kosumi.go.gtp import GTPCommandError


@pytest.mark.parametrize("args,color,interval,max_moves,ownership", [
    ([], None, 1.0, 0, False),
    (["b"], BLACK, 1.0, 0, False),
    (["white", "50"], WHITE, 0.5, 0, False),
    (["25"], None, 0.25, 0, False),
    (["B", "interval", "10", "maxmoves", "3"], BLACK, 0.1, 3, False),
    (["w", "0", "ownership", "true", "minmoves", "2", "pvVisits", "false"], WHITE, 0.0, 0, True),
    (["+7"], None, 0.07, 0, False),
])
def test_arguments_by_hand(args, color, interval, max_moves, ownership):
    opts = parse_analyze_args(args, color_required=False)
    assert (opts.color, opts.interval, opts.max_moves, opts.ownership) == (
        color, pytest.approx(interval), max_moves, ownership)


@pytest.mark.parametrize("args", [
    ["interval"],                 # a key without its value
    ["b", "10", "colour", "1"],   # an unknown key
    ["ownership", "maybe"],       # not a boolean
    ["maxmoves", "x"],            # not an integer
    ["-5"],                       # a negative interval
])
def test_bad_arguments_are_syntax_errors(args):
    with pytest.raises(GTPCommandError):
        parse_analyze_args(args, color_required=False)


def test_a_required_colour():
    with pytest.raises(GTPCommandError):
        parse_analyze_args(["50"], color_required=True)
    assert parse_analyze_args(["w", "50"], color_required=True).color == WHITE


def test_small_parsers_by_hand():
    assert [parse_bool(t) for t in ("true", "1", "YES", "false", "0", "No")] == \
        [True, True, True, False, False, False]
    assert [looks_numeric(t) for t in ("10", "+3", "-3", "b", "1.5", "", "٣")] == \
        [True, True, True, False, False, False, False]
    assert [unit(x) for x in (0.25, -0.5, 1.5, float("nan"), float("inf"))] == \
        [0.25, 0.0, 1.0, 0.0, 0.0]
    assert [permyriad(x) for x in (0.5, 0.12345, 1.2, -1.0)] == [5000, 1234, 10000, 0]


def result(score: bool = True) -> SearchResult:
    d4, q16 = vertex_to_point("D4", 19), vertex_to_point("Q16", 19)
    moves = [MoveInfo(d4, 30, 0.55, 0.4, 0.5, [d4, q16], 2.5 if score else None),
             MoveInfo(PASS, 5, 0.456789, 0.1, -0.2, [], -1.0 if score else None),
             MoveInfo(q16, 1, 1.3, 0.05, 1.1, [q16], float("nan") if score else None)]
    return SearchResult(moves=moves, root_winrate=0.5, visits=36, elapsed=0.1,
                        ownership=np.array([0.5, -0.25]))


def test_lz_info_line_by_hand():
    line = info_line("lz", result(), 19, AnalyzeOptions())
    assert line == (
        "info move D4 visits 30 winrate 5500 prior 4000 lcb 5000 order 0 pv D4 Q16 "
        "info move pass visits 5 winrate 4568 prior 1000 lcb 0 order 1 pv pass "
        "info move Q16 visits 1 winrate 10000 prior 500 lcb 10000 order 2 pv Q16")
    first = info_line("lz", result(), 19, AnalyzeOptions(max_moves=1))
    assert first == "info move D4 visits 30 winrate 5500 prior 4000 lcb 5000 order 0 pv D4 Q16"


def test_kata_info_line_by_hand():
    line = info_line("kata", result(), 19, AnalyzeOptions(max_moves=2, ownership=True))
    assert line == (
        "info move D4 visits 30 winrate 0.550000 scoreMean 2.5000 scoreLead 2.5000"
        " prior 0.400000 lcb 0.500000 order 0 pv D4 Q16 "
        "info move pass visits 5 winrate 0.456789 scoreMean -1.0000 scoreLead -1.0000"
        " prior 0.100000 lcb 0.000000 order 1 pv pass "
        "ownership 0.5000 -0.2500")
    # no score without a score head, nor for a non-finite one; no ownership unless asked
    plain = info_line("kata", result(score=False), 19, AnalyzeOptions(max_moves=1))
    assert plain == ("info move D4 visits 30 winrate 0.550000 prior 0.400000 lcb 0.500000"
                     " order 0 pv D4 Q16")
    third = info_line("kata", result(), 19, AnalyzeOptions()).split("info ")[3]
    assert "score" not in third
    empty = SearchResult(moves=[], root_winrate=0.5, visits=0, elapsed=0.0,
                         ownership=np.zeros(2))
    assert info_line("kata", empty, 19, AnalyzeOptions(ownership=True)) == ""


def test_pv_visits_on_request_as_katago_prints_them():
    """KataGo's kata-analyze with ``pvVisits true`` / ``pvEdgeVisits true``: after a move's pv,
    one count per pv move (written out by hand)."""
    opts = parse_analyze_args(["b", "pvVisits", "true", "pvEdgeVisits", "1"], False)
    assert opts.pv_visits and opts.pv_edge_visits
    res = result()
    res.moves[0].pv_visits, res.moves[0].pv_edge_visits = [30, 19], [30, 12]
    line = info_line("kata", res, 19, AnalyzeOptions(max_moves=2, pv_visits=True,
                                                     pv_edge_visits=True))
    assert line == (
        "info move D4 visits 30 winrate 0.550000 scoreMean 2.5000 scoreLead 2.5000"
        " prior 0.400000 lcb 0.500000 order 0 pv D4 Q16 pvVisits 30 19 pvEdgeVisits 30 12 "
        "info move pass visits 5 winrate 0.456789 scoreMean -1.0000 scoreLead -1.0000"
        " prior 0.100000 lcb 0.000000 order 1 pv pass pvVisits 5 pvEdgeVisits 5")


def test_pv_visits_of_a_real_search_shrink_down_the_line():
    """A tree search (no transpositions): each pv move has fewer visits than the one before it,
    the node and edge counts agree, and the first is the move's own."""
    from kosumi.engine.mcts import MCTS, SearchConfig
    from kosumi.go.board import GameState
    from kosumi.runtime.evaluator import UniformEvaluator

    m = MCTS(UniformEvaluator(), SearchConfig(visits=200, batch=1, graph_search=False))
    res = m.search(GameState(9, 7.0))
    for mi in res.moves:
        assert len(mi.pv_visits) == len(mi.pv) == len(mi.pv_edge_visits)
        assert mi.pv_visits[0] == mi.visits and mi.pv_visits == mi.pv_edge_visits
        assert all(a > b for a, b in zip(mi.pv_visits, mi.pv_visits[1:], strict=False))
    assert max(len(mi.pv) for mi in res.moves) >= 3


def test_a_nan_lcb_prints_as_zero_in_both_styles():
    d4 = vertex_to_point("D4", 19)
    nan = float("nan")
    res = SearchResult(moves=[MoveInfo(d4, 3, nan, 0.5, nan, [d4], None)], root_winrate=nan,
                       visits=3, elapsed=0.1, ownership=None)
    assert info_line("kata", res, 19, AnalyzeOptions()) == (
        "info move D4 visits 3 winrate 0.000000 prior 0.500000 lcb 0.000000 order 0 pv D4")
    assert info_line("lz", res, 19, AnalyzeOptions()) == (
        "info move D4 visits 3 winrate 0 prior 5000 lcb 0 order 0 pv D4")


def test_pv_and_pv_visits_equal_katagos_on_the_same_net(tmp_path):
    """The oracle is KataGo itself: both engines deterministic on the g170 net (KataGo without
    its random symmetry or move temperature), 100 visits after 1. E5 2. C4 on 9x9: every root move's
    visits, pv, pvVisits and pvEdgeVisits as KataGo prints them."""
    import sys

    from helpers import KATAGO_ENGINE, KATAGO_MODEL, shared_path

    from kosumi.engine.gtp_client import GTPProcess

    engine, model = shared_path(KATAGO_ENGINE), shared_path(KATAGO_MODEL)
    fixed = ("maxVisits=100,nnRandomize=false,rootSymmetryPruning=false,"
             f"chosenMoveTemperatureEarly=0,chosenMoveTemperature=0,logDir={tmp_path}")
    commands = [str(engine), "gtp", "-model", str(model), "-config",
                str(shared_path("engines/katago-gtp.cfg")), "-override-config", fixed]
    ours = [sys.executable, "-m", "kosumi", "gtp", "--model", str(model), "--visits", "100",
            "--batch", "1", "--threads", "1", "--resign-threshold", "0"]

    def lines(cmd: list[str], name: str) -> dict[str, str]:
        with GTPProcess(cmd, name=name) as proc:
            for c in ("boardsize 9", "komi 7", "clear_board", "play b E5", "play w C4"):
                proc.send(c, timeout=60)
            reply = proc.send("kata-genmove_analyze b 100000 pvVisits true pvEdgeVisits true",
                              timeout=600)
        info = [ln for ln in reply.splitlines() if ln.startswith("info ")][-1]
        out = {}
        for chunk in info.split("info ")[1:]:
            tok = chunk.split()
            out[tok[1]] = " ".join([tok[3], *tok[tok.index("pv"):]])  # visits, pv and counts
        return out

    katago, kosumi = lines(commands, "katago"), lines(ours, "kosumi")
    assert kosumi == katago
    assert any(len(v.split("pvVisits")[1].split()) >= 4 for v in katago.values())
