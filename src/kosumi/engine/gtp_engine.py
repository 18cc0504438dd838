"""kosumi's GTP engine: the command handlers over one ``GameState`` and one ``MCTS``.

``GTPEngine.handle(line)`` executes one command line and returns its whole reply; ``run(stdin,
stdout)`` is the loop a GUI or a match runner talks to (``kosumi.engine.gtp_io.serve``). Nothing
a controller sends can crash the engine: a user error answers ``? message`` (the spec's standard
messages), a bug answers ``? internal error: ...`` and logs a traceback on stderr, and the engine
keeps working.

Analysis (``lz-analyze``, ``kata-analyze``, ``*genmove_analyze``) streams: the reply is ``=id``,
then one ``info move ...`` line per update (every ``interval`` centiseconds, all root moves on one
line, best first), then an empty line. In ``run`` stdin is read by a separate thread that sets
the current stop ``Event``, so ``lz-analyze`` runs until the next command line arrives. Called
through ``handle`` without a stop event, an analysis is one bounded search
(``SearchConfig.visits``) and its lines come back in the returned reply.

Dead stones (``final_score``, ``final_status_list``, ``kgs-genmove_cleanup``) are decided from
ownership by ``kosumi.engine.scoring``. Seki is not recognised: ``final_status_list seki`` is
always empty and seki stones are listed as alive.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

import kosumi
from kosumi.engine.analysis import (
    info_line,
    parse_analyze_args,
)
from kosumi.engine.gtp_io import Emit, ReplyStream, serve
from kosumi.engine.mcts import MCTS, SearchConfig, SearchResult
from kosumi.engine.scoring import black_ownership, dead_stones, format_score
from kosumi.engine.timecontrol import TimeManager
from kosumi.errors import KosumiError
from kosumi.go import gtp
from kosumi.go.board import GameState, IllegalMove, default_komi
from kosumi.go.coords import BLACK, EMPTY, MAX_SIZE, MIN_SIZE, PASS, RESIGN, WHITE
from kosumi.go.gtp import GTPCommandError
from kosumi.runtime.evaluator import Evaluator, UniformEvaluator

#: an open-ended analysis stops growing the tree after this many root visits (memory bound)
ANALYSIS_MAX_VISITS = 200_000

class GTPEngine:
    """A GTP v2 engine: one game, one search tree, one evaluator."""

    def __init__(
        self,
        evaluator: Evaluator | Callable[[], Evaluator],
        search_config: SearchConfig | None = None,
        *,
        name: str = "kosumi",
        version: str = kosumi.__version__,
        board_size: int = 19,
        komi: float | None = None,
        rules: str = "chinese",
        time_per_move: float | None = None,
        log: IO[str] | None = None,
    ):
        """``evaluator``: an Evaluator, or a no-argument factory called on first use.
        ``time_per_move``: seconds per move when no clock is set (and a cap when one is)."""
        self._evaluator = evaluator if isinstance(evaluator, Evaluator) else None
        self._factory = None if isinstance(evaluator, Evaluator) else evaluator
        self.config = search_config or SearchConfig()
        self.name = name
        self.version = version
        self.rules = rules
        self.komi = float(default_komi(board_size) if komi is None else komi)
        self.state = GameState(board_size, self.komi, rules)
        self.time = TimeManager(default_per_move=time_per_move)
        self.log = log
        self.quit_requested = False
        self._mcts: MCTS | None = None
        self._ownership_cache: tuple[tuple, np.ndarray | None] | None = None
        self.commands: dict[str, Callable[..., str]] = {
            "protocol_version": self.cmd_protocol_version,
            "name": self.cmd_name,
            "version": self.cmd_version,
            "known_command": self.cmd_known_command,
            "list_commands": self.cmd_list_commands,
            "quit": self.cmd_quit,
            "boardsize": self.cmd_boardsize,
            "clear_board": self.cmd_clear_board,
            "komi": self.cmd_komi,
            "play": self.cmd_play,
            "genmove": self.cmd_genmove,
            "kgs-genmove_cleanup": self.cmd_genmove_cleanup,
            "undo": self.cmd_undo,
            "showboard": self.cmd_showboard,
            "final_score": self.cmd_final_score,
            "final_status_list": self.cmd_final_status_list,
            "time_settings": self.cmd_time_settings,
            "kgs-time_settings": self.cmd_kgs_time_settings,
            "time_left": self.cmd_time_left,
            "loadsgf": self.cmd_loadsgf,
            "printsgf": self.cmd_printsgf,
            "fixed_handicap": self.cmd_fixed_handicap,
            "place_free_handicap": self.cmd_place_free_handicap,
            "set_free_handicap": self.cmd_set_free_handicap,
        }
        # streaming commands: handler(args, cid, stream, stop) -> trailer text
        self.streaming: dict[str, Callable[..., str]] = {
            "lz-analyze": lambda *a: self._analyze("lz", *a),
            "kata-analyze": lambda *a: self._analyze("kata", *a),
            "lz-genmove_analyze": lambda *a: self._genmove_analyze("lz", *a),
            "kata-genmove_analyze": lambda *a: self._genmove_analyze("kata", *a),
            "genmove_analyze": lambda *a: self._genmove_analyze("kata", *a),
        }

    # ================================================================== plumbing
    @property
    def evaluator(self) -> Evaluator:
        if self._evaluator is None:
            assert self._factory is not None
            self._evaluator = self._factory()
        return self._evaluator

    @property
    def mcts(self) -> MCTS:
        if self._mcts is None:
            self._mcts = MCTS(self.evaluator, self.config)
        return self._mcts

    def _log(self, message: str) -> None:
        stream = self.log if self.log is not None else sys.stderr
        try:
            stream.write(f"kosumi: {message}\n")
            stream.flush()
        except (OSError, ValueError):
            pass

    def handle(self, line: str, emit: Emit | None = None,
               stop: threading.Event | None = None) -> str:
        """Execute one command line; return its reply ('' for an empty or comment line).

        Streaming commands write their first lines through ``emit`` when it is given (the
        returned text is then the rest of the reply) and run until ``stop`` is set; without
        ``emit`` everything is in the returned reply.
        """
        try:
            cmd = gtp.parse_command(line)
        except Exception as e:
            self._log(f"internal error parsing {line!r}: {e!r}")
            return gtp.format_failure(None, "internal error: cannot parse the command")
        if cmd is None:
            return ""
        stream = ReplyStream(emit)
        try:
            if cmd.name in self.streaming:
                trailer = self.streaming[cmd.name](cmd.args, cmd.id, stream, stop)
                return stream.finish(trailer)
            handler = self.commands.get(cmd.name)
            if handler is None:
                raise GTPCommandError(gtp.UNKNOWN_COMMAND)
            if not _accepts(handler, len(cmd.args)):
                raise GTPCommandError(gtp.SYNTAX_ERROR)
            return gtp.format_success(cmd.id, handler(*cmd.args))
        except GTPCommandError as e:
            if stream.started:
                self._log(f"{cmd.name}: {e.message}")
                return stream.finish()
            return gtp.format_failure(cmd.id, e.message)
        except KosumiError as e:  # a user error from below (e.g. a model that fails to load)
            self._log(f"{cmd.name}: {e}")
            if stream.started:
                return stream.finish()
            return gtp.format_failure(cmd.id, str(e))
        except Exception as e:
            self._log(f"internal error in {cmd.name!r}:\n{traceback.format_exc().rstrip()}")
            if stream.started:
                return stream.finish()
            return gtp.format_failure(cmd.id, f"internal error: {type(e).__name__}: {e}")

    def run(self, stdin: IO[Any] | None = None, stdout: IO[str] | None = None) -> None:
        """Serve GTP until ``quit`` or the end of ``stdin`` (text or binary streams)."""
        inp: IO[Any] = stdin if stdin is not None else getattr(sys.stdin, "buffer", sys.stdin)
        out = stdout if stdout is not None else sys.stdout
        try:
            serve(self.handle, inp, out, log=self._log, done=lambda: self.quit_requested)
        finally:
            self.close()

    def close(self) -> None:
        """Release the evaluator (if it was created)."""
        if self._evaluator is not None:
            try:
                self._evaluator.close()
            except Exception as e:
                self._log(f"closing the evaluator failed: {e!r}")

    # ================================================================== game setup
    def _new_game(self, size: int) -> None:
        self.state = GameState(size, self.komi, self.rules)
        self.time.reset()
        if self._mcts is not None:
            self._mcts.clear()
        self._ownership_cache = None

    def _board_is_empty(self) -> bool:
        return not self.state.moves and not any(self.state.board)

    def cmd_protocol_version(self) -> str:
        return "2"

    def cmd_name(self) -> str:
        return self.name

    def cmd_version(self) -> str:
        return self.version

    def cmd_known_command(self, name: str) -> str:
        return "true" if name in self.commands or name in self.streaming else "false"

    def cmd_list_commands(self) -> str:
        return "\n".join([*self.commands, *self.streaming])

    def cmd_quit(self) -> str:
        self.quit_requested = True
        return ""

    def cmd_boardsize(self, size: str) -> str:
        n = gtp.parse_int(size, low=-(10**100), high=10**100)
        if not (MIN_SIZE <= n <= MAX_SIZE) or not self.evaluator.supports_size(n):
            raise GTPCommandError(gtp.UNACCEPTABLE_SIZE)
        self._new_game(n)
        return ""

    def cmd_clear_board(self) -> str:
        self._new_game(self.state.size)
        return ""

    def cmd_komi(self, value: str) -> str:
        self.komi = gtp.parse_float(value, -1000.0, 1000.0)
        self.state.komi = self.komi
        self._ownership_cache = None
        return ""

    # ================================================================== moves
    def cmd_play(self, color: str, vertex: str) -> str:
        c = gtp.parse_color(color)
        p = gtp.parse_vertex(vertex, self.state.size)
        try:
            self.state.play(p, c)
        except IllegalMove:
            raise GTPCommandError(gtp.ILLEGAL_MOVE) from None
        return ""

    def cmd_undo(self) -> str:
        try:
            self.state.undo()
        except IllegalMove:
            raise GTPCommandError(gtp.CANNOT_UNDO) from None
        return ""

    def cmd_genmove(self, color: str) -> str:
        return self._genmove(gtp.parse_color(color))

    def cmd_genmove_cleanup(self, color: str) -> str:
        return self._genmove(gtp.parse_color(color), cleanup=True)

    def _search_state(self, color: int | None) -> GameState:
        """A copy of the position with ``color`` to move (GTP lets either colour move)."""
        s = self.state.copy()
        if color is not None:
            s.to_move = color
        return s

    def _genmove(self, color: int, cleanup: bool = False,
                 callback: Callable[[SearchResult], None] | None = None,
                 interval: float = 0.1) -> str:
        """Search, choose, play (unless resigning) and return the vertex."""
        state = self._search_state(color)
        if cleanup and state.passes >= 2:
            # KGS's cleanup phase comes after two passes: search as if the game went on (and
            # not from a tree whose node for this position is a finished game)
            state.passes = 0
            self.mcts.clear()
        budget = self.time.budget(color, len(state.moves), state.size)
        t0 = time.monotonic()
        result = self.mcts.search(state, time_limit=budget, callback=callback,
                                  callback_interval=interval if interval > 0 else 1e9)
        move = self.mcts.choose_move(state, result)
        if cleanup and move == PASS:
            move = self._cleanup_move(state, result)
        self.time.spend(color, time.monotonic() - t0)
        if move != RESIGN:
            move = self._play_own(move, color, result)
        best = result.moves[0] if result.moves else None
        self._log(
            f"genmove {'BW'[color - 1]}: {gtp.format_vertex(move, state.size)}"
            f" ({result.visits} visits, winrate {result.root_winrate:.3f}"
            f"{', best ' + gtp.format_vertex(best.move, state.size) if best else ''},"
            f" {time.monotonic() - t0:.2f} s)"
        )
        return gtp.format_vertex(move, state.size)

    def _play_own(self, move: int, color: int, result: SearchResult) -> int:
        """Play our chosen move; if it is somehow illegal fall back to the next legal one."""
        for m in [move] + [mi.move for mi in result.moves] + [PASS]:
            try:
                self.state.play(m, color)
            except IllegalMove:
                self._log(f"search chose an illegal move {m}; trying the next one")
                continue
            return m
        raise AssertionError("pass is always legal")  # pragma: no cover

    def _cleanup_move(self, state: GameState, result: SearchResult) -> int:
        """kgs-genmove_cleanup: rather than pass, capture opponent stones we believe are dead."""
        dead = self._dead_stones()
        opp = 3 - state.to_move
        if not any(state.board[p] == opp for p in dead):
            return PASS
        for mi in result.moves:
            if mi.move != PASS and state.is_legal(mi.move):
                return mi.move
        return PASS

    # ================================================================== display and scoring
    def cmd_showboard(self) -> str:
        s = self.state
        lines = ["", str(s)]
        lines.append(f"Black (X) captures: {s.captures[BLACK]}")
        lines.append(f"White (O) captures: {s.captures[WHITE]}")
        lines.append(f"To move: {'black' if s.to_move == BLACK else 'white'}  komi: {s.komi:g}")
        return "\n".join(lines)

    def cmd_final_score(self) -> str:
        return format_score(self.state.area_score(self._dead_stones()))

    def cmd_final_status_list(self, status: str) -> str:
        status = status.lower()
        if status not in ("alive", "dead", "seki"):
            raise GTPCommandError(gtp.SYNTAX_ERROR)
        if status == "seki":
            return ""
        dead = self._dead_stones()
        s = self.state
        seen: set[int] = set()
        chains = []
        for p in range(s.num_points):
            if s.board[p] == EMPTY or p in seen:
                continue
            stones = s.chain_stones(p)
            seen.update(stones)
            if (p in dead) == (status == "dead"):
                chains.append(" ".join(gtp.format_vertex(q, s.size) for q in sorted(stones)))
        return "\n".join(chains)

    def _dead_stones(self) -> set[int]:
        """The stones ``kosumi.engine.scoring`` finds dead on the current position."""
        return dead_stones(self.state, self._black_ownership())

    def _black_ownership(self) -> np.ndarray | None:
        """Ownership of every point from Black's view (+1 Black), or None if the net has none."""
        s = self.state
        key = (s.size, s.hash, s.to_move, s.komi, len(s.moves), s.passes)
        if self._ownership_cache is not None and self._ownership_cache[0] == key:
            return self._ownership_cache[1]
        own = black_ownership(s, self.mcts, self.evaluator, self.config.visits)
        self._ownership_cache = (key, own)
        return own

    # ================================================================== time
    def cmd_time_settings(self, main: str, byo_time: str, byo_stones: str) -> str:
        self.time.set_settings(
            gtp.parse_float(main, 0.0, 1e9),
            gtp.parse_float(byo_time, 0.0, 1e9),
            gtp.parse_int(byo_stones),
        )
        return ""

    def cmd_kgs_time_settings(self, system: str, *args: str) -> str:
        """KGS's time systems: none, absolute M, byoyomi M P N (Japanese: P seconds per move,
        N periods, handled as a 1-stone period), canadian M B S."""
        system = system.lower()
        if system == "none" and not args:
            self.time.set_settings(0.0, 1.0, 0)  # the GTP way of saying "no limit"
        elif system == "absolute" and len(args) == 1:
            self.time.set_settings(gtp.parse_float(args[0], 0.0, 1e9), 0.0, 0)
        elif system == "byoyomi" and len(args) == 3:
            gtp.parse_int(args[2])
            self.time.set_settings(gtp.parse_float(args[0], 0.0, 1e9),
                                   gtp.parse_float(args[1], 0.0, 1e9), 1)
        elif system == "canadian" and len(args) == 3:
            return self.cmd_time_settings(*args)
        else:
            raise GTPCommandError(gtp.SYNTAX_ERROR)
        return ""

    def cmd_time_left(self, color: str, seconds: str, stones: str) -> str:
        self.time.set_time_left(gtp.parse_color(color), gtp.parse_float(seconds, -1e9, 1e9),
                                gtp.parse_int(stones))
        return ""

    # ================================================================== SGF
    def cmd_loadsgf(self, filename: str, move_number: str | None = None) -> str:
        from kosumi.go.sgf import load_game

        num = None if move_number is None else gtp.parse_int(move_number, low=1)
        try:
            if not Path(filename).is_file():  # not a folder, a device or a pipe
                raise KosumiError(f"{filename}: not a file")
            record = load_game(filename)
            if num is not None:
                num = min(num - 1, len(record.moves))  # the position *before* move_number
            state = record.to_state(num, rules=self.rules)
        except (KosumiError, OSError, ValueError) as e:
            self._log(f"loadsgf: {e}")
            raise GTPCommandError(gtp.CANNOT_LOAD_FILE) from None
        if not self.evaluator.supports_size(state.size):
            raise GTPCommandError(gtp.UNACCEPTABLE_SIZE)
        self._new_game(state.size)
        self.state = state
        self.komi = state.komi
        return "black" if state.to_move == BLACK else "white"

    def cmd_printsgf(self, filename: str | None = None) -> str:
        from kosumi.go.sgf import save_game, state_to_sgf

        if filename is None:
            return state_to_sgf(self.state).decode("utf-8", "replace")
        try:
            save_game(filename, self.state)
        except KosumiError as e:
            self._log(f"printsgf: {e}")
            raise GTPCommandError("cannot save file") from None
        return ""

    # ================================================================== handicap
    def _place_handicap(self, points: list[int]) -> str:
        self.state.place_setup(BLACK, points)
        return " ".join(gtp.format_vertex(p, self.state.size) for p in points)

    def cmd_fixed_handicap(self, number: str) -> str:
        n = gtp.parse_int(number)
        if not self._board_is_empty():
            raise GTPCommandError(gtp.BOARD_NOT_EMPTY)
        return self._place_handicap(gtp.fixed_handicap_points(n, self.state.size))

    def cmd_place_free_handicap(self, number: str) -> str:
        """The fixed layout where one exists, then the points the net likes best for Black."""
        n = gtp.parse_int(number)
        size = self.state.size
        if not (2 <= n < size * size):
            raise GTPCommandError(gtp.INVALID_NUMBER_OF_STONES)
        if not self._board_is_empty():
            raise GTPCommandError(gtp.BOARD_NOT_EMPTY)
        k = min(n, gtp.max_fixed_handicap(size))
        points = gtp.fixed_handicap_points(k, size) if k >= 2 else []
        while len(points) < n:
            probe = GameState(size, self.komi, self.rules)
            probe.place_setup(BLACK, points, to_move=BLACK)
            policy = np.array(self.evaluator.evaluate_one(probe).policy[: size * size])
            policy[[p for p in points]] = -1.0
            policy[[p for p in range(size * size) if probe.board[p] != EMPTY]] = -1.0
            points.append(int(np.argmax(policy)))
        return self._place_handicap(points)

    def cmd_set_free_handicap(self, *vertices: str) -> str:
        size = self.state.size
        points = []
        for v in vertices:
            try:
                points.append(gtp.parse_vertex(v, size))
            except GTPCommandError:
                raise GTPCommandError(gtp.BAD_VERTEX_LIST) from None
        if (len(points) < 2 or len(points) >= size * size or PASS in points
                or len(set(points)) != len(points)):
            raise GTPCommandError(gtp.BAD_VERTEX_LIST)
        if not self._board_is_empty():
            raise GTPCommandError(gtp.BOARD_NOT_EMPTY)
        self._place_handicap(points)
        return ""

    # ================================================================== analysis
    def _analyze(self, style: str, args: list[str], cid: int | None, stream: ReplyStream,
                 stop: threading.Event | None) -> str:
        opts = parse_analyze_args(args, color_required=False)
        state = self._search_state(opts.color)
        stream.start(cid)

        def emit(result: SearchResult) -> None:
            stream.line(info_line(style, result, state.size, opts))

        interval = opts.interval if opts.interval > 0 else 1e9
        if stop is None:  # called directly (tests, scripts): one bounded search
            self.mcts.search(state, callback=emit, callback_interval=interval)
            return ""
        self.mcts.search(state, visits=ANALYSIS_MAX_VISITS, stop=stop, callback=emit,
                         callback_interval=interval)
        stop.wait()  # the tree is full or the game is over: wait for the next command
        return ""

    def _genmove_analyze(self, style: str, args: list[str], cid: int | None, stream: ReplyStream,
                         stop: threading.Event | None) -> str:
        opts = parse_analyze_args(args, color_required=True)
        assert opts.color is not None
        size = self.state.size
        stream.start(cid)

        def emit(result: SearchResult) -> None:
            stream.line(info_line(style, result, size, opts))

        vertex = self._genmove(opts.color, callback=emit, interval=opts.interval)
        return f"play {vertex}"


# ================================================================== helpers
def load_model(model: str, threads: int = 1, backend: str = "auto", device: str | None = None,
               symmetries: int = 1, precision: str = "auto", announce: bool = False) -> Evaluator:
    """``uniform`` -> a ``UniformEvaluator`` (no network); anything else goes through
    ``kosumi.runtime.load_evaluator`` on the given backend (imported here: only a torch model on
    the torch backend imports torch)."""
    if model == "uniform":
        return UniformEvaluator()
    from kosumi.runtime.loader import load_evaluator

    return load_evaluator(model, threads=threads, backend=backend, device=device,
                          symmetries=symmetries, precision=precision, announce=announce)


def _accepts(handler: Callable[..., str], nargs: int) -> bool:
    """Does ``handler`` take ``nargs`` positional string arguments?"""
    try:
        inspect.signature(handler).bind(*([""] * nargs))
    except TypeError:
        return False
    return True
