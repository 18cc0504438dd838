"""The rules of Go: one ``GameState`` with incremental chains, liberties and Zobrist hashing.

Stones live in a ``bytearray`` of N*N points (``EMPTY``/``BLACK``/``WHITE``), row-major from the
top-left (see ``coords``). Chains are kept incrementally: every stone knows its chain's head, the
stones of a chain form a circular linked list, and each chain counts its *pseudo-liberties*
(one per stone/empty-neighbour adjacency) together with the sum and the sum of squares of those
liberty points. A chain is captured when the count reaches 0 and is in atari exactly when all its
pseudo-liberties are the same point (``sum**2 == count * sum_of_squares``). No flood fill is done
per move; only scoring and the exact liberty counts used by features walk the board.

Rules options: simple ko or positional superko, suicide illegal (default) or multi-stone suicide
legal (single-stone suicide is always illegal), any komi, Tromp-Taylor area scoring.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass
from functools import cache

import numpy as np

from kosumi.go import board_kernels
from kosumi.go.coords import (
    BLACK,
    EMPTY,
    PASS,
    WHITE,
    check_size,
    neighbor_table,
    point_to_vertex,
)

KO_SIMPLE = "simple"
KO_POSITIONAL = "positional"


def default_komi(size: int) -> float:
    """The komi every kosumi command uses when none is given: 7.5 (area scoring, no draws),
    and 7.0 on 9x9 and smaller boards (as in KataGo's 9x9 reference positions and kosumi's
    matches against GNU Go)."""
    return 7.0 if int(size) <= 9 else 7.5


class IllegalMove(ValueError):
    """A move that the rules forbid (occupied, ko, superko, suicide, off board)."""


@dataclass(frozen=True)
class Rules:
    ko: str = KO_SIMPLE  # "simple" | "positional"
    suicide: bool = False  # multi-stone suicide legal?
    scoring: str = "area"

    def __post_init__(self) -> None:
        if self.ko not in (KO_SIMPLE, KO_POSITIONAL):
            raise ValueError(f"unknown ko rule {self.ko!r} (use 'simple' or 'positional')")
        if self.scoring != "area":
            raise ValueError(f"unknown scoring {self.scoring!r} (only 'area' is supported)")

    @property
    def friendly_pass_ok(self) -> bool:
        """KataGo's ``friendlyPassOk``: two passes in a row need not end the game (dead stones
        are then taken off, not counted). On for its ``chinese`` preset, off for Tromp-Taylor
        (positional superko with suicide legal), where two passes end the game as it stands."""
        return not (self.ko == KO_POSITIONAL and self.suicide)

    @staticmethod
    def named(name: str) -> Rules:
        """Presets: 'chinese' (KataGo's: simple ko, suicide illegal), 'tromp-taylor' (superko,
        suicide legal), 'positional' (superko, suicide illegal)."""
        presets = {
            "chinese": Rules(),
            "simple": Rules(),
            "tromp-taylor": Rules(ko=KO_POSITIONAL, suicide=True),
            "positional": Rules(ko=KO_POSITIONAL),
        }
        if name not in presets:
            raise ValueError(f"unknown rules {name!r} (known: {', '.join(presets)})")
        return presets[name]


@cache
def zobrist_table(size: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    rng = random.Random(0x6B6F73756D69 + size)
    empty = tuple(0 for _ in range(size * size))
    black = tuple(rng.getrandbits(64) for _ in range(size * size))
    white = tuple(rng.getrandbits(64) for _ in range(size * size))
    return empty, black, white


@cache
def zobrist_array(size: int) -> np.ndarray:
    """``zobrist_table(size)`` as uint64 [3, N*N] (vectorised superko checks)."""
    return np.array(zobrist_table(size), dtype=np.uint64)


class GameState:
    """A Go position with its history. Cheap to copy; ``play`` mutates in place."""

    __slots__ = (
        "_nb",
        "_zob",
        "board",
        "boards",
        "captures",
        "hash",
        "hash_history",
        "head",
        "ko",
        "ko_color",
        "komi",
        "lsq",
        "lsum",
        "moves",
        "nstones",
        "nxt",
        "passes",
        "plibs",
        "rules",
        "setup",
        "size",
        "start_to_move",
        "to_move",
    )

    def __init__(self, size: int = 19, komi: float = 7.5, rules: Rules | str = "chinese"):
        n = check_size(size)
        self.size = n
        self.komi = float(komi)
        self.rules = Rules.named(rules) if isinstance(rules, str) else rules
        nn = n * n
        self.board = bytearray(nn)
        self.to_move = BLACK
        self.ko = -1  # point the player ``ko_color`` may not play (simple ko), or -1
        self.ko_color = EMPTY
        # chain data in typed arrays: copied by memcpy, and invisible to the cyclic GC (a search
        # tree holds thousands of states; GC-tracked lists made every copy several times slower)
        self.head = array("h", [-1]) * nn
        self.nxt = array("h", [-1]) * nn
        self.nstones = array("h", [0]) * nn
        self.plibs = array("i", [0]) * nn
        self.lsum = array("i", [0]) * nn
        self.lsq = array("i", [0]) * nn
        self.hash = 0
        self.hash_history = array("Q", [0])
        self.moves: list[tuple[int, int]] = []  # (color, point or PASS)
        self.boards: list[bytes] = [bytes(nn)]  # boards[i] = stones after i moves (setup incl.)
        self.passes = 0
        self.captures = [0, 0, 0]  # prisoners taken by [_, BLACK, WHITE]
        self.setup: list[tuple[int, int]] = []
        self.start_to_move = BLACK
        self._nb = neighbor_table(n)
        self._zob = zobrist_table(n)

    @classmethod
    def from_rows(cls, rows: list[str], komi: float = 7.5, to_move: int = BLACK,
                  rules: Rules | str = "chinese") -> GameState:
        """A position from a diagram: strings from the TOP row, 'X' black, 'O' white, '.' empty
        (spaces ignored). The stones are setup stones; ``to_move`` moves next."""
        grid = [r.replace(" ", "") for r in rows]
        n = len(grid)
        if any(len(r) != n for r in grid):
            raise ValueError(f"a {n}-row diagram needs {n} points in every row")
        state = cls(n, komi, rules)
        for color, ch in ((BLACK, "X"), (WHITE, "O")):
            pts = [y * n + x for y, r in enumerate(grid) for x, c in enumerate(r) if c == ch]
            if pts:
                state.place_setup(color, pts, to_move=to_move)
        state.to_move = state.start_to_move = to_move
        return state

    # ------------------------------------------------------------------ copying
    def copy(self) -> GameState:
        s = GameState.__new__(GameState)
        s.size = self.size
        s.komi = self.komi
        s.rules = self.rules
        s.board = self.board[:]
        s.to_move = self.to_move
        s.ko = self.ko
        s.ko_color = self.ko_color
        s.head = self.head[:]
        s.nxt = self.nxt[:]
        s.nstones = self.nstones[:]
        s.plibs = self.plibs[:]
        s.lsum = self.lsum[:]
        s.lsq = self.lsq[:]
        s.hash = self.hash
        s.hash_history = self.hash_history[:]
        s.moves = self.moves[:]
        s.boards = self.boards[:]
        s.passes = self.passes
        s.captures = self.captures[:]
        s.setup = self.setup
        s.start_to_move = self.start_to_move
        s._nb = self._nb
        s._zob = self._zob
        return s

    # ------------------------------------------------------------------ queries
    @property
    def num_points(self) -> int:
        return self.size * self.size

    @property
    def last_move(self) -> int | None:
        return self.moves[-1][1] if self.moves else None

    def is_game_over(self) -> bool:
        return self.passes >= 2

    def repetitions(self) -> int:
        """How many earlier positions of this game equal the current one: the same stones and
        the same side to move. Under simple ko a cycle (triple ko, or a ko with passes between
        the captures) repeats its positions forever; a count of 2 means the third occurrence."""
        board, to_move, moves = self.boards[-1], self.to_move, self.moves
        count = 0
        for i in range(len(self.boards) - 2, -1, -1):
            mover_next = 3 - moves[i - 1][0] if i else self.start_to_move
            if mover_next == to_move and self.boards[i] == board:
                count += 1
        return count

    def in_atari(self, h: int) -> bool:
        """Is the chain with head ``h`` down to one (distinct) liberty?"""
        n = self.plibs[h]
        return n > 0 and self.lsum[h] * self.lsum[h] == n * self.lsq[h]

    def chain_stones(self, p: int) -> list[int]:
        """The stones of the chain through ``p``."""
        out = [p]
        q = self.nxt[p]
        while q != p:
            out.append(q)
            q = self.nxt[q]
        return out

    def chain_liberties(self, p: int) -> set[int]:
        board, nb = self.board, self._nb
        libs = set()
        for s in self.chain_stones(p):
            for q in nb[s]:
                if board[q] == EMPTY:
                    libs.add(q)
        return libs

    def atari_liberty(self, h: int) -> int:
        """The single liberty of a chain in atari."""
        return self.lsum[h] // self.plibs[h]

    def _capture_heads(self, p: int, color: int) -> list[int]:
        """Heads of opponent chains that a stone of ``color`` at ``p`` would capture."""
        board, head = self.board, self.head
        opp = 3 - color
        out = []
        for q in self._nb[p]:
            if board[q] == opp:
                h = head[q]
                if h not in out and self.in_atari(h):
                    out.append(h)
        return out

    def illegal_reason(self, p: int, color: int | None = None) -> str | None:
        """Why playing ``p`` is illegal for ``color`` (default: side to move), or None if legal."""
        if color is None:
            color = self.to_move
        if p == PASS:
            return None
        if not (0 <= p < self.size * self.size):
            return "off board"
        board = self.board
        if board[p] != EMPTY:
            return "occupied"
        if p == self.ko and color == self.ko_color:
            return "ko"
        nb = self._nb[p]
        head = self.head
        has_liberty = False
        for q in nb:
            c = board[q]
            if c == EMPTY:
                has_liberty = True
                break
            if c == color and not self.in_atari(head[q]):
                has_liberty = True
                break
        captures = self._capture_heads(p, color)
        if not has_liberty and not captures:
            if not self.rules.suicide:
                return "suicide"
            # multi-stone suicide may be legal; single-stone suicide never is
            if not any(board[q] == color for q in nb):
                return "suicide"
        if (self.rules.ko == KO_POSITIONAL
                and self._hash_after(p, color, captures, suicide=not (has_liberty or captures))
                in self.hash_history):  # any move can complete a cycle, capturing or not
            return "superko"
        return None

    def is_legal(self, p: int, color: int | None = None) -> bool:
        return self.illegal_reason(p, color) is None

    def _hash_after(self, p: int, color: int, captures: list[int], suicide: bool) -> int:
        zob = self._zob
        h = self.hash ^ zob[color][p]
        for ch in captures:
            zc = zob[self.board[ch]]
            for s in self.chain_stones(ch):
                h ^= zc[s]
        if suicide:
            h ^= zob[color][p]
            # each own chain once, however many of p's neighbours it holds
            for hq in {self.head[q] for q in self._nb[p] if self.board[q] == color}:
                for s in self.chain_stones(hq):
                    h ^= zob[color][s]
        return h

    def legal_mask(self, color: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Boolean array of N*N: legal points for ``color`` (default: side to move); written
        into ``out`` (a bool array of N*N, e.g. a row of a batch) when given."""
        if color is None:
            color = self.to_move
        n = self.size
        # occupied, simple ko and suicide: kosumi.accel (C when built, numpy otherwise)
        mask = np.empty(n * n, dtype=bool) if out is None else out
        ko = self.ko if color == self.ko_color else -1
        board_kernels.legal_mask(self.board, n, color, ko, self.rules.suicide, out=mask)
        if self.rules.ko == KO_POSITIONAL:
            # a quiet move repeats a position if (hash ^ its stone's key) was seen: re-check
            # those points in full (rare), then the moves that capture or are suicide
            seen_hashes = np.frombuffer(self.hash_history, dtype=np.uint64)
            after = np.uint64(self.hash) ^ zobrist_array(n)[color]
            for p in np.flatnonzero(mask & np.isin(after, seen_hashes)):
                mask[p] = self.illegal_reason(int(p), color) is None
            # moves that capture: the liberties of the opponent's chains in atari
            b = np.frombuffer(self.board, dtype=np.uint8)
            opp = 3 - color
            seen = set()
            for p in np.flatnonzero(b == opp):
                h = self.head[p]
                if h in seen:
                    continue
                seen.add(h)
                if self.in_atari(h):
                    q = self.atari_liberty(h)
                    if mask[q]:
                        mask[q] = self.illegal_reason(q, color) is None
            if self.rules.suicide:
                # ... and legal multi-stone suicides: re-check the points without an empty
                # neighbour in full
                empty = (b == EMPTY).reshape(n, n)
                emp_nb = np.zeros((n, n), dtype=bool)
                emp_nb[1:, :] |= empty[:-1, :]
                emp_nb[:-1, :] |= empty[1:, :]
                emp_nb[:, 1:] |= empty[:, :-1]
                emp_nb[:, :-1] |= empty[:, 1:]
                for p in np.flatnonzero(mask & ~emp_nb.reshape(-1)):
                    mask[p] = self.illegal_reason(int(p), color) is None
        return mask

    # ------------------------------------------------------------------ playing
    def play(self, p: int, color: int | None = None, trusted: bool = False) -> None:
        """Play ``p`` (a flat index or PASS) for ``color`` (default: side to move).

        Raises IllegalMove for an illegal move; the state is then unchanged. ``trusted=True``
        skips the legality check for a move already known legal (from ``legal_mask``).
        """
        if color is None:
            color = self.to_move
        elif color not in (BLACK, WHITE):
            raise IllegalMove(f"invalid color {color}")
        if p == PASS:
            self.moves.append((color, PASS))
            self.boards.append(self.boards[-1])
            self.passes += 1
            self.ko = -1
            self.ko_color = EMPTY
            self.to_move = 3 - color
            return
        reason = None if trusted else self.illegal_reason(p, color)
        if reason is not None:
            where = point_to_vertex(p, self.size) if 0 <= p < self.num_points else str(p)
            raise IllegalMove(f"illegal move {where}: {reason}")
        captured = self._place(p, color)
        self.moves.append((color, p))
        self.boards.append(bytes(self.board))
        self.hash_history.append(self.hash)
        self.passes = 0
        self.to_move = 3 - color

        # simple ko: a single stone captured by a single stone that now has one liberty
        self.ko = -1
        self.ko_color = EMPTY
        if len(captured) == 1 and self.nstones[self.head[p]] == 1 and self.in_atari(p):
            self.ko = captured[0]
            self.ko_color = 3 - color

    def _place(self, p: int, color: int) -> list[int]:
        """Put a stone down, merge, capture; return the captured points. No legality check."""
        board, head, nxt = self.board, self.head, self.nxt
        nstones, plibs, lsum, lsq = self.nstones, self.plibs, self.lsum, self.lsq
        nb = self._nb
        board[p] = color
        self.hash ^= self._zob[color][p]
        head[p] = p
        nxt[p] = p
        nstones[p] = 1
        n = s1 = s2 = 0
        for q in nb[p]:
            if board[q] == EMPTY:
                n += 1
                s1 += q
                s2 += q * q
        plibs[p], lsum[p], lsq[p] = n, s1, s2
        pp = p * p
        captured: list[int] = []
        for q in nb[p]:
            c = board[q]
            if c == EMPTY:
                continue
            h = head[q]
            plibs[h] -= 1
            lsum[h] -= p
            lsq[h] -= pp
            if c == color:
                hp = head[p]
                if h != hp:
                    self._merge(hp, h)
            elif plibs[h] == 0:
                captured.extend(self._remove_chain(h))
        hp = head[p]
        if plibs[hp] == 0:  # multi-stone suicide (legality was checked by the caller)
            self._remove_chain(hp)
        if captured:
            self.captures[color] += len(captured)
        return captured

    def _merge(self, a: int, b: int) -> None:
        """Merge chains with heads a and b (keeps the larger head)."""
        head, nxt, nstones = self.head, self.nxt, self.nstones
        if nstones[a] < nstones[b]:
            a, b = b, a
        # relabel b's stones
        q = b
        while True:
            head[q] = a
            q = nxt[q]
            if q == b:
                break
        nxt[a], nxt[b] = nxt[b], nxt[a]
        nstones[a] += nstones[b]
        self.plibs[a] += self.plibs[b]
        self.lsum[a] += self.lsum[b]
        self.lsq[a] += self.lsq[b]

    def _remove_chain(self, h: int) -> list[int]:
        board, head, nxt, nb = self.board, self.head, self.nxt, self._nb
        plibs, lsum, lsq = self.plibs, self.lsum, self.lsq
        stones = self.chain_stones(h)
        zc = self._zob[board[h]]
        hsh = self.hash
        for s in stones:
            board[s] = EMPTY
            hsh ^= zc[s]
        self.hash = hsh
        for s in stones:
            ss = s * s
            for q in nb[s]:
                if board[q] != EMPTY:
                    hq = head[q]
                    plibs[hq] += 1
                    lsum[hq] += s
                    lsq[hq] += ss
            head[s] = -1
            nxt[s] = -1
        return stones

    def place_setup(self, color: int, points: list[int], to_move: int | None = None) -> None:
        """Add setup stones (handicap, SGF AB/AW) before the first move.

        After Black-only setup stones (handicap) White moves first unless ``to_move`` says
        otherwise.
        """
        if self.moves:
            raise IllegalMove("setup stones must be placed before the first move")
        for p in points:
            if not (0 <= p < self.num_points) or self.board[p] != EMPTY:
                where = point_to_vertex(p, self.size) if 0 <= p < self.num_points else str(p)
                raise IllegalMove(f"cannot place a setup stone at {where}")
            self._place(p, color)
            self.setup.append((color, p))
        self.boards = [bytes(self.board)]
        self.hash_history = array("Q", [self.hash])
        if to_move is None:
            to_move = WHITE if self.setup and all(c == BLACK for c, _ in self.setup) else BLACK
        self.to_move = self.start_to_move = to_move

    def undo(self) -> None:
        """Take back the last move (replays the game; cheap enough for GTP)."""
        if not self.moves:
            raise IllegalMove("no move to undo")
        fresh = self.replay(len(self.moves) - 1)
        for name in GameState.__slots__:
            setattr(self, name, getattr(fresh, name))

    def replay(self, num_moves: int) -> GameState:
        """A new state: the same setup and the first ``num_moves`` moves of this game."""
        fresh = GameState(self.size, self.komi, self.rules)
        for c, p in self.setup:
            fresh._place(p, c)
        fresh.setup = list(self.setup)
        fresh.boards = [bytes(fresh.board)]
        fresh.hash_history = array("Q", [fresh.hash])
        fresh.to_move = fresh.start_to_move = self.start_to_move
        for c, p in self.moves[:num_moves]:
            fresh.play(p, c)
        return fresh

    # ------------------------------------------------------------------ scoring
    def area_ownership(self) -> np.ndarray:
        """Tromp-Taylor owner of each point: BLACK, WHITE or EMPTY (dame/neutral)."""
        owner = np.empty(self.num_points, dtype=np.int8)
        board_kernels.area_ownership(self.board, self.size, out=owner)
        return owner

    def area_score(self, dead: list[int] | set[int] | None = None) -> float:
        """Black's area minus White's area minus komi (Tromp-Taylor), after removing ``dead``."""
        state = self
        if dead:
            state = self.copy()
            for p in dead:
                if state.board[p] != EMPTY:
                    state._remove_chain(state.head[p])
        owner = state.area_ownership()
        return (float(np.count_nonzero(owner == BLACK) - np.count_nonzero(owner == WHITE))
                - self.komi)

    # ------------------------------------------------------------------ display
    def rows(self) -> list[str]:
        """The board as strings from the top row: 'X' black, 'O' white, '.' empty."""
        n = self.size
        chars = ".XO"
        return ["".join(chars[self.board[y * n + x]] for x in range(n)) for y in range(n)]

    def __str__(self) -> str:
        n = self.size
        from kosumi.go.coords import COLUMNS

        cols = "   " + " ".join(COLUMNS[:n])
        lines = [cols]
        for y, row in enumerate(self.rows()):
            lines.append(f"{n - y:2d} " + " ".join(row) + f" {n - y:2d}")
        lines.append(cols)
        return "\n".join(lines)
