"""Match results (kosumi.engine.match_results): scores read from GTP/SGF text, the win/draw/loss
counts per engine and colour, the SGF comments and the JSON form.

Oracles: scores and tallies worked out by hand for a five-game match written out below.
"""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from kosumi.engine.elo import elo_estimate
from kosumi.engine.match_results import (
    END_FORFEIT,
    END_PASSES,
    END_RESIGN,
    Forfeit,
    GameResult,
    MatchResult,
    parse_score,
    print_summary,
    sgf_comments,
)


@pytest.mark.parametrize("text,score", [
    ("B+3.5", 3.5), ("W+2", -2.0), ("w+12.5", -12.5), ("  B+0.5 ", 0.5), ("B+7.5 extra", 7.5),
    ("0", 0.0), ("Draw", 0.0), ("jigo", 0.0), ("B+0", 0.0), ("W+0", 0.0),
])
def test_parse_score_by_hand(text, score):
    assert parse_score(text) == score


@pytest.mark.parametrize("text", ["", "B+", "X+3", "B3.5", "W+R", "Void", "B-3"])
def test_parse_score_refuses_what_is_not_a_score(text):
    with pytest.raises(ValueError, match=r"^not a score: "):
        parse_score(text)


def game(index, first_color, winner, end=END_PASSES, result=None, moves=10, **kw) -> GameResult:
    black, white = ("one", "two") if first_color == "B" else ("two", "one")
    if result is None:
        result = "0" if winner is None else f"{winner}+1.5"
    return GameResult(index=index, black=black, white=white, first_color=first_color,
                      result=result, winner=winner, end=end, moves=moves, seconds=1.0, **kw)


# the first engine ("one") plays Black in games 1, 3, 5 and White in 2, 4
GAMES = [
    game(1, "B", "B"),                 # one wins with Black
    game(2, "W", "B"),                 # two wins with Black
    game(3, "B", None),                # a draw
    game(4, "W", "W", end=END_RESIGN, result="W+R"),  # one wins with White (two resigns)
    game(5, "B", "W", end=END_FORFEIT, result="W+F",   # one forfeits with Black
         forfeit=Forfeit("B", "illegal", "played D4 twice")),
]


def match(games=GAMES) -> MatchResult:
    return MatchResult(first="one", second="two", first_command=["one"],
                       second_command=["two"], size=9, komi=7.0, games=list(games),
                       elo=elo_estimate(2, 1, 2), sprt=None, stopped_early=False)


def test_first_won():
    assert [g.first_won for g in GAMES] == [True, False, None, True, False]


def test_counts_by_hand():
    c = match().counts()
    # one: won game 1 with Black and game 4 with White; lost game 2 with White, 5 with Black
    assert c["first"] == {"wins": 2, "draws": 1, "losses": 2, "black_wins": 1,
                          "black_losses": 1, "white_wins": 1, "white_losses": 1}
    # two: won game 2 with Black and game 5 with White; lost game 1 with White, 4 with Black
    assert c["second"] == {"wins": 2, "draws": 1, "losses": 2, "black_wins": 1,
                           "black_losses": 1, "white_wins": 1, "white_losses": 1}
    assert c["colors"] == {"black_wins": 2, "white_wins": 2, "draws": 1}
    empty = match([]).counts()
    assert empty["first"]["wins"] == empty["colors"]["draws"] == 0


def test_to_dict_is_json_and_complete():
    d = json.loads(json.dumps(match().to_dict()))
    assert d["first"] == "one" and d["size"] == 9 and d["komi"] == 7.0 and d["sprt"] is None
    assert [g["result"] for g in d["games"]] == ["B+1.5", "B+1.5", "0", "W+R", "W+F"]
    assert d["games"][4]["forfeit"] == {"color": "B", "kind": "illegal",
                                        "detail": "played D4 twice"}
    assert d["counts"] == match().counts()


def test_sgf_comments_go_on_the_root_and_the_last_move():
    scored = game(1, "B", "B", score=1.5, dead=["C3", "D4"], referee_result="B+1.5",
                  referee_agrees=True, moves=42)
    c = sgf_comments(scored, "one", "two")
    assert set(c) == {0, 42}
    assert c[0] == "Game 1: first engine one (B), second engine two.\nResult B+1.5 (two-passes)."
    assert c[42] == "Area score B+1.5; dead stones: C3 D4.\nReferee final_score: B+1.5"
    disagree = game(2, "W", "W", score=-2.5, area_score=-3.5, result="W+2.5",
                    referee_result="W+2.5", referee_agrees=False, moves=30)
    assert sgf_comments(disagree, "one", "two")[30] == (
        "Area score W+3.5; dead stones: none.\n"
        "Referee final_score: W+2.5 (DISAGREES; the result is the referee's)")
    resign = sgf_comments(GAMES[3], "one", "two")
    assert resign[10] == "Black resigns."  # White won by resignation
    forfeit = sgf_comments(game(5, "B", "W", end=END_FORFEIT, result="W+F", moves=0,
                                forfeit=Forfeit("B", "crash", "exit 1")), "one", "two")
    assert set(forfeit) == {0}  # no move: everything on the root
    assert forfeit[0].endswith("Black forfeits (crash): exit 1")


def test_summary_names_both_engines_and_the_counts():
    out = io.StringIO()
    print_summary(match(), Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    for name in ("one", "two"):  # engine, wins, draws, losses, as Black W-L, as White W-L
        line = next(x for x in text.splitlines() if f" {name} " in x)
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        assert cells == [name, "2", "1", "2", "1-1", "1-1"], line
    assert "5 games, 9x9, komi 7" in text
    assert "Black won 2, White won 2, draws 1" in text
    assert "forfeits: 1 (game 5 B illegal)" in text
