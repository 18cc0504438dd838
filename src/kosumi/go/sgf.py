"""SGF game records: load one game's main line into a ``GameRecord``, write a ``GameState``.

Reading goes through sgfmill and keeps only what kosumi plays from: board size, komi, handicap
and setup stones (AB/AW in the root node), the player to move (PL), the main-line moves, the
result (RE) and the player names. Every record is replayed with kosumi's rules while loading, so
a file that parses is also a legal game. Anything wrong with a file (bad syntax, unsupported
size, off-board point, illegal move, setup stones after the root) raises a one-line
``KosumiError`` that names the file (and the move number for a bad move).

Writing (``state_to_sgf`` / ``save_game``) produces FF[4] SGF with SZ, KM, RU, AB/AW setup, PL
when needed, the moves, RE and PB/PW; ``save_game`` replaces the target file atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sgfmill import sgf

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write
from kosumi.go.board import GameState, IllegalMove, Rules
from kosumi.go.coords import (
    BLACK,
    MAX_SIZE,
    MIN_SIZE,
    PASS,
    WHITE,
    point_to_sgfmill,
    point_to_vertex,
    sgfmill_to_point,
)

_COLOR_OF = {"b": BLACK, "w": WHITE}
_LETTER_OF = {BLACK: "b", WHITE: "w"}


@dataclass
class GameRecord:
    """The main line of one SGF game, in kosumi's coordinates (flat indices, ``PASS``).

    ``setup`` holds (color, point) pairs for AB/AW stones (handicap stones are AB stones);
    ``to_move`` is the PL property (None when absent); ``moves`` holds (color, point) pairs.
    """

    size: int
    komi: float = 0.0
    handicap: int = 0
    setup: list[tuple[int, int]] = field(default_factory=list)
    to_move: int | None = None
    moves: list[tuple[int, int]] = field(default_factory=list)
    result: str | None = None
    black: str | None = None
    white: str | None = None
    source: str = "<sgf>"

    def to_state(self, num_moves: int | None = None, rules: Rules | str = "chinese") -> GameState:
        """The position after the setup and the first ``num_moves`` moves (None = all of them).

        Raises KosumiError (naming the source and the move number) if a move is illegal.
        """
        if num_moves is None:
            num_moves = len(self.moves)
        if not 0 <= num_moves <= len(self.moves):
            raise KosumiError(
                f"{self.source}: asked for {num_moves} moves but the game has {len(self.moves)}"
            )
        state = GameState(self.size, self.komi, rules)
        black = [p for c, p in self.setup if c == BLACK]
        white = [p for c, p in self.setup if c == WHITE]
        try:
            if black or white or self.to_move is not None:
                state.place_setup(BLACK, black)
                state.place_setup(WHITE, white, to_move=self.to_move)
        except IllegalMove as e:
            raise KosumiError(f"{self.source}: bad setup stones: {e}") from None
        for number, (color, p) in enumerate(self.moves[:num_moves], start=1):
            try:
                state.play(p, color)
            except IllegalMove as e:
                raise KosumiError(
                    f"{self.source}: move {number} ({_LETTER_OF[color].upper()} "
                    f"{point_to_vertex(p, self.size)}) is illegal: {e}"
                ) from None
        return state


def _text(node: sgf.Tree_node, ident: str) -> str | None:
    try:
        value = node.get(ident)
    except KeyError:
        return None
    return str(value).strip() or None


def parse_sgf(data: bytes, source_name: str = "<sgf>",
              rules: Rules | str = "chinese") -> GameRecord:
    """Parse SGF bytes (one game; the first one of a collection) into a ``GameRecord`` whose
    moves are checked under ``rules``."""
    try:
        return _parse(data, source_name, rules)
    except KosumiError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, LookupError, IllegalMove) as e:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise KosumiError(f"{source_name}: malformed SGF: {detail}") from None


def _parse(data: bytes, source: str, rules: Rules | str) -> GameRecord:
    game = sgf.Sgf_game.from_bytes(data)
    size = game.get_size()
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise KosumiError(f"{source}: board size {size} is not supported (SZ must be "
                          f"{MIN_SIZE}..{MAX_SIZE})")
    root = game.get_root()
    try:
        komi = float(game.get_komi())
    except ValueError:
        raise KosumiError(f"{source}: bad komi "
                          f"KM[{root.get_raw('KM').decode(errors='replace')}]") from None
    try:
        handicap = game.get_handicap() or 0
    except ValueError:
        raise KosumiError(f"{source}: bad handicap HA") from None

    record = GameRecord(size=size, komi=komi, handicap=handicap, source=source)
    try:
        black, white, empty = root.get_setup_stones()
    except ValueError:
        raise KosumiError(f"{source}: bad setup stones (AB/AW/AE) in the root node") from None
    if empty:
        raise KosumiError(f"{source}: AE (remove stones) in the root node is not supported")
    if black & white:
        raise KosumiError(f"{source}: a point is both AB and AW")
    record.setup = [(BLACK, sgfmill_to_point(m, size)) for m in sorted(black)] + [
        (WHITE, sgfmill_to_point(m, size)) for m in sorted(white)
    ]
    if root.has_property("PL"):
        try:
            record.to_move = _COLOR_OF[root.get("PL")]
        except (ValueError, KeyError):
            raise KosumiError(f"{source}: bad player to move PL") from None
    record.result = _text(root, "RE")
    record.black = _text(root, "PB")
    record.white = _text(root, "PW")

    for depth, node in enumerate(game.get_main_sequence()):
        if depth > 0 and node.has_setup_stones():
            raise KosumiError(
                f"{source}: setup stones (AB/AW/AE) after the root node (after move "
                f"{len(record.moves)}) are not supported"
            )
        try:
            colour, move = node.get_move()
        except ValueError:
            color_letter, raw = node.get_raw_move()
            raise KosumiError(
                f"{source}: move {len(record.moves) + 1} ({color_letter.upper()}"
                f"[{raw.decode(errors='replace')}]) is not a point on the {size}x{size} board"
            ) from None
        if colour is None:
            continue
        record.moves.append((_COLOR_OF[colour], sgfmill_to_point(move, size)))

    record.to_state(rules=rules)  # validates setup and every move; KosumiError names the move
    return record


def load_game(path: str | os.PathLike[str], rules: Rules | str = "chinese") -> GameRecord:
    """Read and check an SGF file (see ``parse_sgf``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KosumiError(f"{path}: cannot read: {e.strerror or e}") from None
    return parse_sgf(data, str(path), rules)


def format_result(score: float) -> str:
    """An area score from Black's view -> SGF RE text: 'B+3.5', 'W+0.5' or '0' (a draw)."""
    if score > 0:
        return f"B+{score:g}"
    if score < 0:
        return f"W+{-score:g}"
    return "0"


def state_to_sgf(
    state: GameState,
    result: str | None = None,
    black: str | None = None,
    white: str | None = None,
    comments: Mapping[int, str] | None = None,
) -> bytes:
    """Serialise a game: setup stones, moves, size, komi, result and player names.

    ``comments`` maps a move number to a comment on that move's node (0 = the root node, i.e.
    a comment about the whole game).
    """
    size = state.size
    game = sgf.Sgf_game(size)
    root = game.get_root()
    root.set("KM", float(state.komi))
    root.set("RU", "Chinese" if state.rules == Rules() else "TrompTaylor")
    root.set("AP", ("kosumi", "0.1"))
    black_setup = [point_to_sgfmill(p, size) for c, p in state.setup if c == BLACK]
    white_setup = [point_to_sgfmill(p, size) for c, p in state.setup if c == WHITE]
    if black_setup or white_setup:
        root.set_setup_stones(black_setup, white_setup)
        if black_setup and not white_setup and state.start_to_move == WHITE:
            if len(black_setup) >= 2:
                root.set("HA", len(black_setup))
        else:
            root.set("PL", _LETTER_OF[state.start_to_move])
    elif state.start_to_move != BLACK:
        root.set("PL", _LETTER_OF[state.start_to_move])
    if result:
        root.set("RE", result)
    if black:
        root.set("PB", black)
    if white:
        root.set("PW", white)
    comments = dict(comments or {})
    if comments.get(0):
        root.set("C", comments[0])
    for number, (color, p) in enumerate(state.moves, start=1):
        node = game.extend_main_sequence()
        node.set_move(_LETTER_OF[color], None if p == PASS else point_to_sgfmill(p, size))
        if comments.get(number):
            node.set("C", comments[number])
    data: bytes = game.serialise()  # sgfmill is untyped
    return data


def save_game(
    path: str | os.PathLike[str],
    state: GameState,
    result: str | None = None,
    black: str | None = None,
    white: str | None = None,
    comments: Mapping[int, str] | None = None,
) -> Path:
    """Write ``state`` as an SGF file (atomically); returns the path."""
    path = Path(path)
    data = state_to_sgf(state, result=result, black=black, white=white, comments=comments)
    try:
        atomic_write(path, data)
    except OSError as e:
        raise KosumiError(f"{path}: cannot write SGF: {e.strerror or e}") from None
    return path
