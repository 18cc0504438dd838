"""The referee (kosumi.engine.referee): a scripted referee for the rules of scoring (a 5x5
position counted by hand), and GNU Go on a real game that ended with a boundary open."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import FAKE_GTP, GNUGO, gnugo_final_score, require_program

from kosumi.engine.gtp_client import EngineCrashed
from kosumi.engine.match import play_match
from kosumi.engine.match_results import END_PASSES, GameResult, parse_score
from kosumi.engine.referee import score_game
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE, vertex_to_point


class ScriptedReferee:
    """Answers final_status_list and final_score as told; records what it was sent."""

    def __init__(self, dead: str, score: str, fail: bool = False):
        self.dead, self.score, self.fail = dead, score, fail
        self.sent: list[str] = []
        self.killed = False

    def send(self, command: str, timeout: float | None) -> str:
        self.sent.append(command)
        if self.fail:
            raise EngineCrashed("referee died")
        if command == "final_status_list dead":
            return self.dead
        return self.score if command == "final_score" else ""

    def kill(self) -> None:
        self.killed = True


def walls() -> GameState:
    """5x5, komi 0.5: Black on column B, White on column D and a lone stone at A3 in Black's
    side. Counted by hand: with A3 dead, Black 5 stones + 5 points (column A), White 5 + 5
    (column E), column C neutral: W+0.5. With A3 alive, column A touches both colours: Black 5,
    White 11: W+6.5."""
    state = GameState(5, 0.5)
    for row in range(1, 6):
        state.play(vertex_to_point(f"B{row}", 5), BLACK)
        state.play(vertex_to_point(f"D{row}", 5), WHITE)
    state.play(PASS, BLACK)
    state.play(vertex_to_point("A3", 5), WHITE)
    state.play(PASS, BLACK)
    state.play(PASS, WHITE)
    return state


def finished() -> GameResult:
    return GameResult(index=1, black="b", white="w", first_color="B", result="", winner=None,
                      end=END_PASSES, moves=14, seconds=0.0)


def test_the_referees_score_is_the_result_and_kosumis_count_stays_beside_it():
    game, referee = finished(), ScriptedReferee("A3", "W+2.5")
    score_game(game, walls(), referee, timeout=5.0)
    assert game.area_score == -0.5 and game.dead == ["A3"]  # the hand count with A3 dead
    assert game.score == -2.5 and game.result == "W+2.5" and game.winner == "W"
    assert game.referee_result == "W+2.5" and game.referee_agrees is False
    assert any("area count W+0.5" in note for note in game.notes)
    assert referee.sent[:3] == ["boardsize 5", "komi 0.5", "clear_board"]
    assert referee.sent[-2:] == ["final_status_list dead", "final_score"]
    assert len(referee.sent) == 3 + 14 + 2  # every move replayed, passes included


def test_agreement_is_not_flagged():
    game = finished()
    score_game(game, walls(), ScriptedReferee("A3", "W+0.5"), timeout=5.0)
    assert game.score == game.area_score == -0.5 and game.referee_agrees is True
    assert game.notes == []


def test_without_a_referee_or_with_a_failed_one_kosumis_count_is_the_result():
    game = finished()
    score_game(game, walls(), None, timeout=5.0)
    assert game.score == -6.5 and game.result == "W+6.5"  # A3 alive: the hand count
    assert game.referee_agrees is None and "no referee" in game.notes[0]
    game, referee = finished(), ScriptedReferee("A3", "W+2.5", fail=True)
    score_game(game, walls(), referee, timeout=5.0)
    assert game.score == -6.5 and referee.killed and "referee failed" in game.notes[0]


def test_a_final_score_that_is_no_score_leaves_kosumis_count():
    game = finished()
    score_game(game, walls(), ScriptedReferee("A3", "unknown"), timeout=5.0)
    assert game.score == -0.5 and game.result == "W+0.5"
    assert any("not a score" in note for note in game.notes)


# A real GNU Go level 1 game on 9x9 that both sides passed out with the top right still open.
# Counted by hand after removing the referee's dead stones (B4 C2 C3 C5 D5): Black has 22 stones
# and 22 points (A1-C9 on the left, C5 D5 D4), White 17 stones and 7 points (H3; F1-J1 G2 J2); the
# 13 points from F5 to J9 touch both colours. Tromp-Taylor says B+13 with komi 7; GNU Go plays the
# open boundary out and says otherwise.
OPEN_BOUNDARY_BLACK = ("E5,D6,C6,B5,B6,E4,D2,D3,C4,G4,G5,H5,J4,D8,J6,D7,C9,B8,H6,F3,D1,F4,B3,"
                       "pass;pass")
OPEN_BOUNDARY_WHITE = ("D5,E6,C5,B4,F6,C3,C2,G3,E7,H4,H7,H2,J3,J5,E8,D9,E9,J4,F2,E2,E3,E1,pass;"
                       "pass")


def test_the_referees_final_score_is_the_result_when_a_boundary_is_open(tmp_path: Path):
    black = [sys.executable, str(FAKE_GTP), "script", OPEN_BOUNDARY_BLACK]
    white = [sys.executable, str(FAKE_GTP), "script", OPEN_BOUNDARY_WHITE]
    result = play_match(black, white, games=1, size=9, komi=7.0, sgf_dir=tmp_path,
                        move_timeout=20.0, progress=False,
                        referee_cmd=f"{require_program(GNUGO)} --mode gtp --chinese-rules")
    game = result.games[0]
    assert game.forfeit is None and game.end == "two-passes" and game.moves == 47
    assert game.dead == ["B4", "C2", "C3", "C5", "D5"]
    assert game.area_score == 13.0  # the hand count above
    fresh = gnugo_final_score(Path(game.sgf))  # a fresh GNU Go, from the saved SGF
    assert game.score == fresh != 13.0 and parse_score(game.result) == fresh
    assert game.referee_agrees is False
    assert any("area count B+13" in note for note in game.notes)
