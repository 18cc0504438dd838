"""The match arena: two GTP engines play a series of games, refereed and scored by kosumi.

Each engine is a GTP command line (``kosumi gtp --model FILE``, ``/usr/games/gnugo --mode gtp
--level 1``, ``/usr/games/leelaz --cpu-only -w NET --gtp --noponder``); nothing here assumes a
particular engine. Per game, both engines get ``boardsize``, ``komi`` and ``clear_board``; then
the side to move gets ``genmove`` and its answer, once checked by kosumi's ``GameState`` (simple
ko, suicide illegal), is sent to the other engine with ``play`` (as an upper-case vertex or
``pass``; a ``resign`` is never forwarded).

A game ends by

* two passes in a row, or ``max_moves`` moves (default 3*N*N): a referee engine (GNU Go by
  default) scores the final position, kosumi's own area count beside it
  (``kosumi.engine.referee``);
* a cycle: the same position (stones and side to move) for the third time, which under simple
  ko (a triple ko, or a ko with passes between the captures) would repeat forever. The game has
  no result (``Void``) and counts as a draw;
* a resignation (``B+R`` / ``W+R``);
* a forfeit (``B+F`` / ``W+F``): an illegal or unparsable move ("cheating"), an engine crash, an
  answer slower than ``move_timeout``, a failed ``genmove`` or a rejected legal move. A crashed or
  timed-out engine is restarted for the next game and the match goes on.

Colours alternate between games with ``swap_colors``; the "first engine" is ``black_cmd`` (it has
Black in game 1). The result (``MatchResult``, JSON-able through ``to_dict``) holds every game,
the wins per engine and per colour, the first engine's Elo difference with its 95% interval and,
with ``sprt=(elo0, elo1)``, the SPRT verdict (the match stops as soon as it is decided). The
result records and their printing live in ``kosumi.engine.match_results``.

``concurrency`` N plays N games at a time, like cutechess-cli's ``-concurrency``: N lanes, each
with its own engine processes and referee, take the next game number as they finish one. Results
are recorded in the order games finish; once the SPRT decides, games still being played are
dropped (they finish, and are not recorded). ``{lane}`` in an engine command is replaced by the
lane's number (1..N): an engine given a fixed seed (``kosumi gtp --seed 1{lane}``) would
otherwise replay the same games in every lane.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from kosumi.engine.elo import CONTINUE, SPRTResult, elo_estimate
from kosumi.engine.elo import sprt as sprt_test
from kosumi.engine.gtp_client import (
    EngineCrashed,
    EngineError,
    GTPError,
    GTPProcess,
    GTPTimeout,
    split_command,
)
from kosumi.engine.match_results import (
    END_CYCLE,
    END_FORFEIT,
    END_MAX_MOVES,
    END_PASSES,
    END_RESIGN,
    F_CRASH,
    F_ERROR,
    F_ILLEGAL,
    F_REJECTED,
    F_TIMEOUT,
    Forfeit,
    GameResult,
    MatchResult,
    live_line,
    print_summary,
    sgf_comments,
)
from kosumi.engine.openings import check_openings
from kosumi.engine.referee import score_game
from kosumi.errors import KosumiError, Terminated
from kosumi.go.board import GameState, IllegalMove, default_komi
from kosumi.go.coords import (
    BLACK,
    PASS,
    RESIGN,
    WHITE,
    check_size,
    point_to_vertex,
    vertex_to_point,
)
from kosumi.go.sgf import save_game

log = logging.getLogger("kosumi.match")

DEFAULT_REFEREE = "/usr/games/gnugo --mode gtp --chinese-rules"
_LETTER = {BLACK: "B", WHITE: "W"}
_GTP_COLOR = {BLACK: "b", WHITE: "w"}


class _Player:
    """An engine command with its (re)startable process."""

    def __init__(self, command: Sequence[str], label: str, env: dict[str, str] | None,
                 startup_timeout: float):
        self.command = list(command)
        self.label = label
        self.env = env
        self.startup_timeout = startup_timeout
        self.proc: GTPProcess | None = None
        self.fresh = False  # started and not yet answered a command (slow first answer is ok)

    def ensure(self) -> GTPProcess:
        if self.proc is not None and not self.proc.alive:
            self.discard()
        if self.proc is None:
            try:
                self.proc = GTPProcess(self.command, name=self.label, env=self.env)
            except OSError as e:
                raise KosumiError(
                    f"cannot start engine '{self.label}' ({self.command[0]}): {e.strerror or e}"
                ) from None
            self.fresh = True
        return self.proc

    def send(self, command: str, timeout: float | None) -> str:
        proc = self.ensure()
        if self.fresh and timeout is not None:
            timeout = max(timeout, self.startup_timeout)
        reply = proc.send(command, timeout=timeout)
        self.fresh = False
        return reply

    def discard(self) -> None:
        if self.proc is not None:
            self.proc.close(grace=1.0)
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc = None


class _ForfeitSignal(Exception):
    def __init__(self, color: int, kind: str, detail: str):
        self.forfeit = Forfeit(_LETTER[color], kind, detail)
        super().__init__(detail)


def _engine_failure(color: int, player: _Player, what: str, e: EngineError) -> _ForfeitSignal:
    """Turn an engine error into a forfeit of ``color`` (killing a crashed/stuck engine)."""
    if isinstance(e, GTPTimeout):
        player.kill()
        return _ForfeitSignal(color, F_TIMEOUT, f"{player.label}: no answer to '{what}' in time")
    if isinstance(e, EngineCrashed):
        player.kill()
        return _ForfeitSignal(color, F_CRASH, str(e))
    assert isinstance(e, GTPError)
    return _ForfeitSignal(color, F_ERROR, str(e))



def _setup_engine(player: _Player, color: int, size: int, komi: float, timeout: float) -> None:
    for cmd in (f"boardsize {size}", f"komi {komi:g}", "clear_board"):
        try:
            player.send(cmd, timeout)
        except GTPError as e:
            raise KosumiError(f"engine '{player.label}' cannot play this match: {e}") from None
        except EngineError as e:
            raise _engine_failure(color, player, cmd, e) from None


def _play_game(
    index: int,
    players: dict[int, _Player],
    first_color: int,
    size: int,
    komi: float,
    move_timeout: float,
    max_moves: int,
    referee: _Player | None,
    referee_timeout: float,
    opening: Sequence[int] = (),
) -> tuple[GameResult, GameState]:
    started = time.monotonic()
    state = GameState(size, komi)
    forfeit: Forfeit | None = None
    winner: int | None = None
    try:
        for color in (BLACK, WHITE):
            _setup_engine(players[color], color, size, komi, move_timeout)
        for p in opening:  # the opening's moves, told to both engines
            color = state.to_move
            state.play(p, color)
            for listener in (BLACK, WHITE):
                _tell(players[listener], listener, color, p, size, move_timeout)
        end, winner, result = _play_moves(players, state, move_timeout, max_moves)
    except _ForfeitSignal as f:
        forfeit = f.forfeit
        end = END_FORFEIT
        winner = 3 - (BLACK if forfeit.color == "B" else WHITE)
        result = f"{_LETTER[winner]}+F"
        log.warning("game %d: %s forfeits (%s): %s", index, forfeit.color, forfeit.kind,
                    forfeit.detail)

    game = GameResult(
        index=index,
        black=players[BLACK].label,
        white=players[WHITE].label,
        first_color=_LETTER[first_color],
        result=result,
        winner=None if winner is None else _LETTER[winner],
        end=end,
        moves=len(state.moves),
        seconds=0.0,
        forfeit=forfeit,
    )
    if end in (END_PASSES, END_MAX_MOVES):
        score_game(game, state, referee, referee_timeout)
        if end == END_MAX_MOVES:
            game.notes.append(f"stopped after {max_moves} moves and scored")
    elif end == END_CYCLE:
        game.notes.append("the same position for the third time (a cycle under simple ko): "
                          "no result, counted as a draw")
    game.seconds = round(time.monotonic() - started, 3)
    return game, state


def _play_moves(players: dict[int, _Player], state: GameState, move_timeout: float,
                max_moves: int) -> tuple[str, int | None, str]:
    """Play until two passes, a resignation, a cycle or ``max_moves``: (end, winner, result);
    _ForfeitSignal on an illegal or rejected move."""
    while True:
        if state.passes >= 2:
            return END_PASSES, None, ""
        if len(state.moves) >= max_moves:
            return END_MAX_MOVES, None, ""
        color = state.to_move
        p = _genmove(players[color], color, state, move_timeout)
        if p == RESIGN:
            other = 3 - color
            return END_RESIGN, other, f"{_LETTER[other]}+R"
        try:
            state.play(p, color)
        except IllegalMove as e:
            raise _ForfeitSignal(color, F_ILLEGAL, f"{players[color].label}: {e}") from None
        _tell(players[3 - color], 3 - color, color, p, state.size, move_timeout)
        if state.repetitions() >= 2:
            return END_CYCLE, None, "Void"


def _genmove(mover: _Player, color: int, state: GameState, move_timeout: float) -> int:
    """The point ``mover`` plays (or PASS/RESIGN); _ForfeitSignal on an unparsable reply."""
    cmd = f"genmove {_GTP_COLOR[color]}"
    try:
        reply = mover.send(cmd, move_timeout)
    except EngineError as e:
        raise _engine_failure(color, mover, cmd, e) from None
    text = reply.strip()
    try:
        return vertex_to_point(text, state.size)
    except ValueError:
        raise _ForfeitSignal(color, F_ILLEGAL,
                             f"{mover.label}: unparsable move {text!r}") from None


def _tell(listener: _Player, listener_color: int, color: int, p: int, size: int,
          move_timeout: float) -> None:
    """Tell the other engine the move just played; _ForfeitSignal if it rejects it."""
    vertex = "pass" if p == PASS else point_to_vertex(p, size)
    cmd = f"play {_GTP_COLOR[color]} {vertex}"
    try:
        listener.send(cmd, move_timeout)
    except GTPError as e:
        raise _ForfeitSignal(listener_color, F_REJECTED,
                             f"{listener.label} rejected the legal move "
                             f"{vertex}: {e.message}") from None
    except EngineError as e:
        raise _engine_failure(listener_color, listener, cmd, e) from None


def _labels(first: list[str], second: list[str]) -> tuple[str, str]:
    def short(args: list[str]) -> str:
        rest = [a for a in args[1:] if a not in ("--mode", "gtp", "--gtp")]
        text = " ".join(os.path.basename(a) if "/" in a else a for a in [args[0], *rest])
        return text if len(text) <= 48 else text[:45] + "..."

    a, b = short(first), short(second)
    if a == b:
        a, b = f"{a} #1", f"{b} #2"
    return a, b


def _engine_env(args: list[str], home: str) -> dict[str, str] | None:
    """Leela Zero writes into $HOME at every start: give it a private temporary HOME."""
    if any("leelaz" in os.path.basename(a) for a in args[:1]):
        env = dict(os.environ)
        env["HOME"] = home
        return env
    return None


def play_match(
    black_cmd: str | Sequence[str],
    white_cmd: str | Sequence[str],
    games: int,
    size: int = 9,
    komi: float | None = None,
    swap_colors: bool = False,
    sgf_dir: str | os.PathLike[str] | None = None,
    move_timeout: float = 60.0,
    sprt: tuple[float, float] | None = None,
    max_moves: int | None = None,
    referee_cmd: str | Sequence[str] | None = DEFAULT_REFEREE,
    progress: bool = True,
    console: Console | None = None,
    startup_timeout: float = 120.0,
    referee_timeout: float = 300.0,
    concurrency: int = 1,
    openings: Sequence[Sequence[int]] | None = None,
    keep_on_stop: bool = False,
) -> MatchResult:
    """Play ``games`` games between two GTP engines; see the module docstring.

    ``black_cmd`` is the first engine (Black in game 1; with ``swap_colors`` the colours
    alternate). ``sprt`` is ``(elo0, elo1)`` for the first engine. ``referee_cmd=None`` scores
    finished games by plain Tromp-Taylor (no dead-stone removal). ``startup_timeout`` bounds the
    first answer of a freshly started engine (model loading). ``concurrency``: games played at
    a time. ``openings``: move lists (points, Black first) that games start from (``_opening_of``
    says which). ``keep_on_stop``: Ctrl-C or SIGTERM (``Terminated``) during the games returns
    the games finished so far, ``stopped_by`` naming the signal (the caller then stops); else
    they propagate. Raises KosumiError for bad options or an engine that cannot be started or
    refuses the board size/komi.
    """
    size, komi, max_moves = _check_match_options(games, size, komi, move_timeout, max_moves,
                                                 sprt, concurrency)
    first_args, second_args, referee_args = _engine_commands(black_cmd, white_cmd,
                                                             referee_cmd)
    sgf_dir = _sgf_folder(sgf_dir)
    if console is None:
        console = Console()
    book = check_openings(openings or [], size, komi)

    first_label, second_label = _labels(first_args, second_args)
    home = tempfile.mkdtemp(prefix="kosumi-match-home-")
    lanes = [_Lane(n, first_args, second_args, referee_args, (first_label, second_label),
                   home, startup_timeout) for n in range(1, concurrency + 1)]
    results: list[GameResult] = []
    sprt_result: SPRTResult | None = None
    stopped_early = False

    def play(lane: _Lane, i: int) -> tuple[GameResult, GameState]:
        first_black = not (swap_colors and i % 2 == 0)
        first, second = lane.first, lane.second
        players = {BLACK: first, WHITE: second} if first_black else {BLACK: second,
                                                                      WHITE: first}
        return _play_game(i, players, BLACK if first_black else WHITE, size, komi,
                          move_timeout, max_moves, lane.referee, referee_timeout,
                          _opening_of(book, i, swap_colors))

    def record(game: GameResult, state: GameState) -> bool:
        """Keep a finished game; True once the SPRT has decided."""
        nonlocal sprt_result, stopped_early
        if sgf_dir is not None:
            path = sgf_dir / f"game-{game.index:03d}.sgf"
            save_game(path, state, result=game.result, black=game.black, white=game.white,
                      comments=sgf_comments(game, first_label, second_label))
            game.sgf = str(path)
        results.append(game)
        if progress:
            live_line(console, game, games, first_label)
        if sprt is not None:
            sprt_result = _sprt(*_first_wdl(results), sprt)
            if sprt_result.verdict != CONTINUE:
                stopped_early = len(results) < games
                return True
        return False

    stopped_by = None
    try:
        _run_lanes(lanes, games, play, record)
    except (KeyboardInterrupt, Terminated) as e:  # keep the finished games; the caller stops
        if not keep_on_stop:
            raise
        stopped_by = "interrupted" if isinstance(e, KeyboardInterrupt) else "terminated"
        stopped_early = True
    finally:
        for lane in lanes:
            lane.discard()
        shutil.rmtree(home, ignore_errors=True)

    results = sorted(results, key=lambda g: g.index)  # recorded as they finished
    w, d, l_ = _first_wdl(results)
    if sprt is not None and sprt_result is None:
        sprt_result = _sprt(w, d, l_, sprt)
    result = MatchResult(first_label, second_label, first_args, second_args, size, float(komi),
                         results, elo_estimate(w, d, l_), sprt_result, stopped_early, stopped_by)
    if progress:
        print_summary(result, console)
    return result


def _opening_of(book: list[tuple[int, ...]], i: int, swap_colors: bool) -> tuple[int, ...]:
    """Game ``i``'s opening, told to both engines before the first ``genmove``: with
    ``swap_colors`` opening (i - 1) // 2 (each once with each colour), else i - 1, cycling
    through the book (``kosumi.engine.openings``)."""
    if not book:
        return ()
    return book[((i - 1) // 2 if swap_colors else i - 1) % len(book)]


class _Lane:
    """One game at a time: the two engines' processes and the referee's, lane ``number``'s
    ``{lane}`` put into the commands, and its own HOME for Leela Zero."""

    def __init__(self, number: int, first_args: list[str], second_args: list[str],
                 referee_args: list[str] | None, labels: tuple[str, str], home: str,
                 startup_timeout: float):
        home = os.path.join(home, f"lane-{number}")
        os.makedirs(home, exist_ok=True)

        def player(args: list[str], label: str) -> _Player:
            args = [a.replace("{lane}", str(number)) for a in args]
            return _Player(args, label, _engine_env(args, home), startup_timeout)

        self.first = player(first_args, labels[0])
        self.second = player(second_args, labels[1])
        self.referee = player(referee_args, "referee") if referee_args else None

    def discard(self) -> None:
        for p in (self.first, self.second, self.referee):
            if p is not None:
                p.discard()


def _run_lanes(lanes: list[_Lane], games: int,
               play: Callable[[_Lane, int], tuple[GameResult, GameState]],
               record: Callable[[GameResult, GameState], bool]) -> None:
    """Games 1..``games`` through the lanes, each taking the next number when it is free;
    ``record`` (under a lock) returns True to stop. A game that finishes after the stop is
    dropped. One lane plays in this thread; more play in threads, this one waiting."""
    numbers = iter(range(1, games + 1))
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(lane: _Lane) -> None:
        while not stop.is_set():
            with lock:
                i = next(numbers, None)
            if i is None:
                return
            try:
                game, state = play(lane, i)
            except BaseException as e:  # an engine that cannot play the match: stop them all
                errors.append(e)
                stop.set()
                return
            with lock:
                if stop.is_set():
                    return
                if record(game, state):
                    stop.set()

    if len(lanes) == 1:
        work(lanes[0])
    else:
        threads = [threading.Thread(target=work, args=(lane,), daemon=True) for lane in lanes]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        finally:
            stop.set()  # Ctrl-C: no lane starts or records another game
    if errors:
        raise errors[0]


def _sgf_folder(sgf_dir: str | os.PathLike[str] | None) -> Path | None:
    if sgf_dir is None:
        return None
    path = Path(sgf_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KosumiError(f"{path}: cannot create the SGF folder: {e.strerror}") from None
    return path


def _check_match_options(games: int, size: int, komi: float | None, move_timeout: float,
                         max_moves: int | None, sprt: tuple[float, float] | None,
                         concurrency: int) -> tuple[int, float, int]:
    """(size, komi, max_moves) with the defaults filled in; KosumiError on a bad option."""
    if games < 1:
        raise KosumiError(f"--games must be at least 1 (got {games})")
    if not 1 <= concurrency <= games:
        raise KosumiError(f"--concurrency must be between 1 and --games ({games}), "
                          f"got {concurrency}")
    try:
        size = check_size(size)
    except ValueError as e:
        raise KosumiError(f"--size: {e}") from None
    if komi is None:
        komi = default_komi(size)
    if move_timeout <= 0:
        raise KosumiError(f"--move-timeout must be positive (got {move_timeout:g})")
    if max_moves is None:
        max_moves = 3 * size * size
    if max_moves < 1:
        raise KosumiError(f"--max-moves must be at least 1 (got {max_moves})")
    if sprt is not None and not sprt[0] < sprt[1]:
        raise KosumiError(f"--sprt needs elo0 < elo1 (got {sprt[0]:g},{sprt[1]:g})")
    return size, komi, max_moves


def _engine_commands(black_cmd: str | Sequence[str], white_cmd: str | Sequence[str],
                     referee_cmd: str | Sequence[str] | None
                     ) -> tuple[list[str], list[str], list[str] | None]:
    """The engines' and the referee's argument lists, each program found on PATH."""
    try:
        first_args = split_command(black_cmd)
        second_args = split_command(white_cmd)
        referee_args = split_command(referee_cmd) if referee_cmd else None
    except ValueError as e:
        raise KosumiError(f"bad engine command: {e}") from None
    if referee_args and shutil.which(referee_args[0]) is None:
        raise KosumiError(f"referee program not found: {referee_args[0]} (install GNU Go or "
                          f"give another referee command)")
    for args in (first_args, second_args):
        if shutil.which(args[0]) is None:
            raise KosumiError(f"engine program not found: {args[0]}")
    return first_args, second_args, referee_args

def _first_wdl(results: list[GameResult]) -> tuple[int, int, int]:
    w = sum(1 for g in results if g.first_won is True)
    d = sum(1 for g in results if g.winner is None)
    return w, d, len(results) - w - d


def _sprt(w: int, d: int, l_: int, bounds: tuple[float, float]) -> SPRTResult:
    return sprt_test(w, d, l_, bounds[0], bounds[1])
