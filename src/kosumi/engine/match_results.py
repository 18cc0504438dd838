"""The match arena's results: the records of games and matches, and how they are shown.

``GameResult`` (one game: result, how it ended, a ``Forfeit``, kosumi's score and the referee's)
and ``MatchResult`` (every game, the wins per engine and per colour, the first engine's Elo and
the SPRT verdict; JSON-able through ``to_dict``) are what ``kosumi.engine.match.play_match``
returns. ``parse_score`` reads a GTP ``final_score`` / SGF ``RE``; ``sgf_comments`` annotates a
saved game, ``live_line`` prints one finished game and ``print_summary`` the end-of-match table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kosumi.engine.elo import EloEstimate, SPRTResult
from kosumi.go.sgf import format_result

# How a game ended
END_PASSES, END_MAX_MOVES, END_RESIGN, END_FORFEIT = "two-passes", "max-moves", "resign", "forfeit"
END_CYCLE = "cycle"  # the same position (stones and side to move) a third time: no result
# Why a side forfeited
F_ILLEGAL, F_CRASH, F_TIMEOUT = "illegal", "crash", "timeout"
F_ERROR, F_REJECTED = "error", "rejected"


@dataclass
class Forfeit:
    """Why one side lost a game by forfeit."""

    color: str  # "B" or "W": the side that forfeited
    kind: str  # illegal | crash | timeout | error | rejected
    detail: str


@dataclass
class GameResult:
    """One finished game. ``score`` is the result's score from Black's view (scored games): the
    referee's final_score, or kosumi's ``area_score`` where no referee gave one."""

    index: int  # 1-based
    black: str  # engine labels
    white: str
    first_color: str  # the colour the first engine had: "B" or "W"
    result: str  # SGF RE: "B+3.5", "W+R", "B+F", "0", "Void" (a cycle: no result)
    winner: str | None  # "B", "W" or None for a draw
    end: str  # two-passes | max-moves | cycle | resign | forfeit
    moves: int
    seconds: float
    forfeit: Forfeit | None = None
    score: float | None = None
    area_score: float | None = None  # kosumi's Tromp-Taylor count with the referee's dead stones
    dead: list[str] = field(default_factory=list)
    referee_result: str | None = None  # the referee's own final_score
    referee_agrees: bool | None = None
    sgf: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def first_won(self) -> bool | None:
        """Did the first engine win (None for a draw)?"""
        if self.winner is None:
            return None
        return self.winner == self.first_color


@dataclass
class MatchResult:
    """A whole match; ``to_dict()`` is JSON-able."""

    first: str
    second: str
    first_command: list[str]
    second_command: list[str]
    size: int
    komi: float
    games: list[GameResult]
    elo: EloEstimate
    sprt: SPRTResult | None
    stopped_early: bool
    #: the signal that stopped the match ("interrupted": Ctrl-C, "terminated": SIGTERM); the
    #: games are then those finished before it, the ones in play are not counted
    stopped_by: str | None = None

    def counts(self) -> dict:
        """Wins/draws/losses per engine, per colour and per engine and colour."""
        first = {"wins": 0, "draws": 0, "losses": 0, "black_wins": 0, "black_losses": 0,
                 "white_wins": 0, "white_losses": 0}
        second = dict(first)
        colors = {"black_wins": 0, "white_wins": 0, "draws": 0}
        for g in self.games:
            if g.winner is None:
                first["draws"] += 1
                second["draws"] += 1
                colors["draws"] += 1
                continue
            colors["black_wins" if g.winner == "B" else "white_wins"] += 1
            win, lose = (first, second) if g.first_won else (second, first)
            win["wins"] += 1
            lose["losses"] += 1
            win["black_wins" if g.winner == "B" else "white_wins"] += 1
            lose["white_losses" if g.winner == "B" else "black_losses"] += 1
        return {"first": first, "second": second, "colors": colors}

    def to_dict(self) -> dict:
        return {
            "first": self.first,
            "second": self.second,
            "first_command": self.first_command,
            "second_command": self.second_command,
            "size": self.size,
            "komi": self.komi,
            "games": [asdict(g) for g in self.games],
            "counts": self.counts(),
            "elo": self.elo.to_dict(),
            "sprt": self.sprt.to_dict() if self.sprt else None,
            "stopped_early": self.stopped_early,
            "stopped_by": self.stopped_by,
        }



def parse_score(text: str) -> float:
    """'B+3.5' -> 3.5, 'W+2' -> -2.0, '0' / 'Draw' -> 0.0 (GTP final_score / SGF RE)."""
    t = text.strip().split()[0] if text.strip() else ""
    if t.upper() in ("0", "DRAW", "JIGO", "B+0", "W+0"):
        return 0.0
    if len(t) >= 3 and t[0].upper() in "BW" and t[1] == "+":
        try:
            value = float(t[2:])
        except ValueError:  # "B+R", "W+T", "B+F": a result, not a score
            raise ValueError(f"not a score: {text!r}") from None
        return value if t[0].upper() == "B" else -value
    raise ValueError(f"not a score: {text!r}")


def sgf_comments(game: GameResult, first: str, second: str) -> dict[int, str]:
    lines = [
        f"Game {game.index}: first engine {first} ({game.first_color}), second engine {second}.",
        f"Result {game.result} ({game.end}).",
    ]
    last: list[str] = []
    if game.forfeit:
        who = "Black" if game.forfeit.color == "B" else "White"
        last.append(f"{who} forfeits ({game.forfeit.kind}): {game.forfeit.detail}")
    if game.score is not None:
        area = game.score if game.area_score is None else game.area_score
        last.append(f"Area score {format_result(area)}; dead stones: "
                    f"{' '.join(game.dead) or 'none'}.")
        if game.referee_result is not None:
            last.append(f"Referee final_score: {game.referee_result}"
                        + ("" if game.referee_agrees else " (DISAGREES; the result is the "
                                                          "referee's)"))
    if game.end == END_RESIGN:
        last.append(f"{'Black' if game.winner == 'W' else 'White'} resigns.")
    last.extend(game.notes)
    comments: dict[int, str] = {}
    if game.moves == 0:
        comments[0] = "\n".join(lines + last)
    else:
        comments[0] = "\n".join(lines)
        comments[game.moves] = "\n".join(last)
    return comments


def live_line(console: Console, game: GameResult, total: int, first: str) -> None:
    first_tag = "1st" if game.first_color == "B" else "2nd"
    outcome = game.result
    if game.forfeit:
        outcome += f" [red]forfeit: {escape(game.forfeit.kind)}[/red]"
    flag = ""
    if game.referee_agrees is False:
        area = "?" if game.area_score is None else format_result(game.area_score)
        flag = f" [yellow]kosumi's area count says {escape(area)}[/yellow]"
    winner = "draw"
    if game.winner is not None:
        winner = escape(game.black if game.winner == "B" else game.white)
    console.print(
        f"game {game.index}/{total}  B: {escape(game.black)} ({first_tag})  "
        f"W: {escape(game.white)}  [bold]{outcome}[/bold]{flag}  winner {winner}  "
        f"({game.end}, {game.moves} moves, {game.seconds:.1f} s)",
        highlight=False,
        soft_wrap=True,
    )


def print_summary(result: MatchResult, console: Console) -> None:
    """The end-of-match table: wins/losses per engine and colour, Elo and the SPRT verdict."""
    counts = result.counts()
    table = Table(title=f"{len(result.games)} games, {result.size}x{result.size}, "
                        f"komi {result.komi:g}")
    for col in ("engine", "wins", "draws", "losses", "as Black W-L", "as White W-L"):
        table.add_column(col)
    for label, c in ((result.first, counts["first"]), (result.second, counts["second"])):
        table.add_row(escape(label), str(c["wins"]), str(c["draws"]), str(c["losses"]),
                      f"{c['black_wins']}-{c['black_losses']}",
                      f"{c['white_wins']}-{c['white_losses']}")
    console.print(table)
    col = counts["colors"]
    console.print(f"Black won {col['black_wins']}, White won {col['white_wins']}, "
                  f"draws {col['draws']}", highlight=False, soft_wrap=True)
    forfeits = [(g.index, g.forfeit) for g in result.games if g.forfeit]
    if forfeits:
        console.print(f"forfeits: {len(forfeits)} ("
                      + ", ".join(f"game {index} {f.color} {f.kind}" for index, f in forfeits)
                      + ")", highlight=False, soft_wrap=True)
    disagreements = [g.index for g in result.games if g.referee_agrees is False]
    if disagreements:
        console.print(f"[yellow]score disagreements with the referee in games "
                      f"{disagreements}[/yellow]")
    console.print(f"Elo of {escape(result.first)} vs {escape(result.second)}: {result.elo}",
                  highlight=False, soft_wrap=True)
    if result.sprt is not None:
        console.print(str(result.sprt) + (" (stopped early)" if result.stopped_early else ""),
                      highlight=False, soft_wrap=True)
    if result.stopped_by is not None:
        console.print(f"[yellow]match {result.stopped_by}: the {len(result.games)} finished games "
                      "above; the games in play were not counted[/yellow]", highlight=False,
                      soft_wrap=True)
