"""Ladders: is a chain with one or two liberties captured by a sequence of ataris?

The tactical reading behind KataGo's ladder input features (V7 planes 14-17), following the
published behaviour of KataGo's ladder search (an independent implementation):

- The *defender* owns the chain; the *attacker* is the other colour. The attacker only plays on
  the chain's liberties; the defender plays its lone liberty or captures an adjacent attacker
  chain that is in atari (a liberty-gaining capture).
- ``is_ladder_captured``: a chain with ONE liberty, defender to move (whoever's turn it really
  is). The position's simple-ko ban is lifted at the start (kos are assumed to work for the
  defender).
- ``ladder_working_moves``: a chain with TWO liberties, attacker to move: which of the two
  liberties start a ladder that captures it (the position's ko ban applies to that first move).
- Terminal rules: the attacker to move wins when the chain is down to <= 1 liberty and loses at
  >= 3; the defender to move wins with >= 2 liberties, and also whenever the attacker's last move
  left a simple-ko ban (no ladders through kos). An attacker facing two ko-mouth liberties, each
  of which would leave the defender on <= 2 liberties, with no capture available to the
  defender, wins ("double-ko death"). Illegal moves (occupied, the ko point -- for either colour
  --, suicide) are skipped. The reading gives up after 25,000 moves (the chain is then NOT
  captured) and counts a sequence longer than 1.5 * N*N plies as captured.
- Cheap, exact shortcuts prune moves whose outcome is already known (an extension that surely
  gains three liberties, or surely gains at most one). The attacker tries first the liberty
  with the better score "2 * empty neighbours + sum over adjacent defender chains with more than
  one liberty of (2 * liberties - 3)". Move order can only matter when the 25,000-move budget
  runs out.

``ladder_features`` (``kosumi.go.ladder_planes``) reads a whole board with this search, the way
the V7 planes need it.

Boards are N*N buffers (bytes/bytearray/uint8 numpy) row-major from the top-left, 0 empty,
1 black, 2 white; points are flat indices; ``ko`` is the simple-ko point or -1.
"""

from __future__ import annotations

import sys
from functools import cache

import numpy as np

EMPTY, BLACK, WHITE, WALL = 0, 1, 2, 3
NODE_BUDGET = 25_000


class _BudgetExceeded(Exception):
    pass


@cache
def _geometry(size: int) -> tuple[int, tuple[int, ...], tuple[int, ...], np.ndarray, np.ndarray]:
    """(padded width W, point -> padded loc, padded loc -> point (or -1), point -> padded loc
    as a numpy index array, a walled empty padded board as uint8).

    The padded board has a ring of WALL around the N x N points, so a neighbour of any on-board
    location is ``loc - W``, ``loc - 1``, ``loc + 1`` or ``loc + W`` without bounds checks."""
    w = size + 2
    to_loc = tuple((p // size + 1) * w + (p % size + 1) for p in range(size * size))
    to_pt = [-1] * (w * w)
    for p, loc in enumerate(to_loc):
        to_pt[loc] = p
    base = np.full(w * w, WALL, dtype=np.uint8)
    loc_index = np.array(to_loc, dtype=np.intp)
    base[loc_index] = EMPTY
    return w, to_loc, tuple(to_pt), loc_index, base


class LadderBoard:
    """A small mutable board with play/undo for ladder reading (padded layout, see ``_geometry``).

    Chains are found by flood fill on demand: ladders only ever look at a handful of chains,
    so no incremental bookkeeping is kept (making play and undo nearly free).

    ``reads`` collects the locations whose neighbourhood the reading looked at: the board's
    contents on those points and their neighbours determine every result, which lets
    ``ladder_features`` reuse a result on another board that differs only elsewhere."""

    __slots__ = ("c", "depth_limit", "ko", "nodes", "reads", "size", "to_loc", "to_pt", "w")

    def __init__(self, board: bytes | bytearray, size: int, ko: int = -1) -> None:
        w, to_loc, to_pt, loc_index, base = _geometry(size)
        self.size = size
        self.w = w
        self.to_loc = to_loc
        self.to_pt = to_pt
        c = base.copy()
        c[loc_index] = np.frombuffer(bytes(board), dtype=np.uint8)
        self.c = bytearray(c.tobytes())
        self.ko = to_loc[ko] if ko >= 0 else 0  # 0 is a wall location: "no ko"
        self.nodes = 0
        self.depth_limit = size * size * 3 // 2 + 1
        self.reads: set[int] = set()
        if sys.getrecursionlimit() < self.depth_limit + 1000:  # the search recurses per move
            sys.setrecursionlimit(self.depth_limit + 1000)

    # ------------------------------------------------------------------ chains
    def chain(self, loc: int) -> tuple[list[int], list[int]]:
        """(stones, liberties) of the chain at ``loc`` (liberties in discovery order)."""
        c = self.c
        col = c[loc]
        w = self.w
        stones = [loc]
        seen = {loc}
        libs: list[int] = []
        for s in stones:  # grows while iterating
            for q in (s - w, s - 1, s + 1, s + w):
                v = c[q]
                if v == EMPTY:
                    if q not in libs:
                        libs.append(q)
                elif v == col and q not in seen:
                    seen.add(q)
                    stones.append(q)
        self.reads.update(seen)
        return stones, libs

    def libs_upto(self, loc: int, cap: int) -> int:
        """Liberties of the chain at ``loc``, counting stops at ``cap``."""
        c = self.c
        col = c[loc]
        w = self.w
        stack = [loc]
        seen = {loc}
        libs: set[int] = set()
        n = 0
        while stack and n < cap:
            s = stack.pop()
            for q in (s - w, s - 1, s + 1, s + w):
                v = c[q]
                if v == EMPTY:
                    if q not in libs:
                        libs.add(q)
                        n += 1
                        if n >= cap:
                            break
                elif v == col and q not in seen:
                    seen.add(q)
                    stack.append(q)
        self.reads.update(seen)
        return n

    def has_liberty(self, loc: int) -> bool:
        """Does the chain at ``loc`` have at least one liberty? (stops at the first one)"""
        c = self.c
        col = c[loc]
        w = self.w
        stack = [loc]
        seen = {loc}
        found = False
        while stack and not found:
            s = stack.pop()
            for q in (s - w, s - 1, s + 1, s + w):
                v = c[q]
                if v == EMPTY:
                    found = True
                    break
                if v == col and q not in seen:
                    seen.add(q)
                    stack.append(q)
        self.reads.update(seen)
        return found

    def atari_liberty(self, loc: int, mark: set[int] | None = None) -> int:
        """The lone liberty of the chain at ``loc``, or -1 if it has none or several.

        The stones visited are added to ``mark`` when given (to skip the chain later)."""
        c = self.c
        col = c[loc]
        w = self.w
        stack = [loc]
        seen = {loc}
        lib = -1
        many = False
        while stack and not many:
            s = stack.pop()
            for q in (s - w, s - 1, s + 1, s + w):
                v = c[q]
                if v == EMPTY:
                    if lib < 0:
                        lib = q
                    elif q != lib:
                        many = True
                        break
                elif v == col and q not in seen:
                    seen.add(q)
                    stack.append(q)
        self.reads.update(seen)
        if mark is not None:
            mark.update(seen)
        return -1 if many else lib

    def is_legal(self, loc: int, col: int) -> bool:
        """Empty, not the ko point (for either colour, as in KataGo's ladder code), not suicide."""
        c = self.c
        self.reads.add(loc)
        if c[loc] != EMPTY or loc == self.ko:
            return False
        opp = 3 - col
        w = self.w
        nbs = (loc - w, loc - 1, loc + 1, loc + w)
        for q in nbs:
            if c[q] == EMPTY:
                return True
        for q in nbs:
            v = c[q]
            # connecting to a chain with another liberty, or capturing a chain in atari
            if (v == col and self.libs_upto(q, 2) >= 2) or (
                    v == opp and self.atari_liberty(q) >= 0):
                return True
        return False

    def play(self, loc: int, col: int) -> tuple[int, list[int]]:
        """Place a legal stone; returns the undo record (previous ko, captured stones)."""
        c = self.c
        w = self.w
        opp = 3 - col
        self.reads.add(loc)
        c[loc] = col
        captured: list[int] = []
        for q in (loc - w, loc - 1, loc + 1, loc + w):
            if c[q] == opp and not self.has_liberty(q):
                stones, _ = self.chain(q)
                for s in stones:
                    c[s] = EMPTY
                captured.extend(stones)
        record = (self.ko, captured)
        self.ko = 0
        if len(captured) == 1:
            # a ko: one stone captured by a lone stone that now has exactly one liberty
            lone = libs_n = 0
            for q in (loc - w, loc - 1, loc + 1, loc + w):
                v = c[q]
                if v == col:
                    lone = 1
                    break
                if v == EMPTY:
                    libs_n += 1
            if not lone and libs_n == 1:
                self.ko = captured[0]
        self.nodes += 1
        return record

    def undo(self, loc: int, col: int, record: tuple[int, list[int]]) -> None:
        ko, captured = record
        c = self.c
        c[loc] = EMPTY
        opp = 3 - col
        for s in captured:
            c[s] = opp
        self.ko = ko

    # ------------------------------------------------------------------ helpers of the search
    def _immediate_libs(self, loc: int) -> int:
        c = self.c
        w = self.w
        self.reads.add(loc)
        return ((c[loc - w] == EMPTY) + (c[loc - 1] == EMPTY) + (c[loc + 1] == EMPTY)
                + (c[loc + w] == EMPTY))

    def _would_be_ko_capture(self, loc: int, col: int) -> bool:
        """Would ``col`` playing at empty ``loc`` capture exactly one lone stone, with every
        neighbour an opponent stone or the edge?"""
        c = self.c
        opp = 3 - col
        w = self.w
        self.reads.add(loc)
        capturable = 0
        for q in (loc - w, loc - 1, loc + 1, loc + w):
            v = c[q]
            if v == WALL:
                continue
            if v != opp:
                return False
            if self.atari_liberty(q) >= 0:
                if capturable:
                    return False
                capturable = q
        if not capturable:
            return False
        cc = c[capturable]
        return all(c[q] != cc for q in (capturable - w, capturable - 1, capturable + 1,
                                        capturable + w))

    def _libs_after_play(self, loc: int, col: int, cap: int) -> int:
        """Liberties a stone of ``col`` at empty ``loc`` would have (captures included), capped."""
        c = self.c
        opp = 3 - col
        w = self.w
        self.reads.add(loc)
        libs: set[int] = set()
        captured: set[int] = set()
        friends: list[int] = []
        for q in (loc - w, loc - 1, loc + 1, loc + w):
            v = c[q]
            if v == EMPTY:
                libs.add(q)
            elif v == opp:
                if q not in captured:
                    stones, ql = self.chain(q)
                    if len(ql) == 1:
                        captured.update(stones)
                if q in captured:
                    libs.add(q)
            elif v == col:
                friends.append(q)
        seen: set[int] = set()
        for f in friends:
            if f in seen:
                continue
            stones, _ = self.chain(f)
            seen.update(stones)
            for s in stones:
                for q in (s - w, s - 1, s + 1, s + w):
                    if q != loc and (c[q] == EMPTY or q in captured):
                        libs.add(q)
        return min(len(libs), cap)

    def _extension_escapes(self, loc: int, col: int, chain: list[int]) -> bool:
        """Would a stone of ``col`` at ``loc`` (the lone liberty of ``chain``) surely have >= 3
        liberties: >= 3 empty neighbours, or another adjacent chain of ``col`` with >= 4?"""
        c = self.c
        w = self.w
        self.reads.add(loc)
        nbs = (loc - w, loc - 1, loc + 1, loc + w)
        if (c[nbs[0]] == EMPTY) + (c[nbs[1]] == EMPTY) + (c[nbs[2]] == EMPTY) \
                + (c[nbs[3]] == EMPTY) >= 3:
            return True
        return any(c[q] == col and q not in chain and self.libs_upto(q, 4) >= 4 for q in nbs)

    def _libs_bounds(self, loc: int, col: int, chain: set[int], chain_libs: int
                     ) -> tuple[int, int]:
        """Cheap (lower, upper) bounds on the liberties of a stone of ``col`` played at ``loc``:
        lower = captures + max(empty neighbours, best adjacent friendly chain's liberties - 1),
        upper = empty neighbours + stones of captured chains + sum of (friendly liberties - 1)
        (per adjacent direction). ``chain`` (with ``chain_libs`` liberties) is a friendly
        chain whose count is known already."""
        c = self.c
        w = self.w
        opp = 3 - col
        self.reads.add(loc)
        empty = caps = cap_stones = conn = conn_max = 0
        for q in (loc - w, loc - 1, loc + 1, loc + w):
            v = c[q]
            if v == EMPTY:
                empty += 1
            elif v == opp:
                stones, ql = self.chain(q)
                if len(ql) == 1:
                    caps += 1
                    cap_stones += len(stones)
            elif v == col:
                n = (chain_libs if q in chain else self.libs_upto(q, 1000)) - 1
                conn += n
                conn_max = max(conn_max, n)
        return caps + max(conn_max, empty), empty + cap_stones + conn

    def _capture_moves(self, stones: list[int], col: int) -> list[int]:
        """Liberties of the opponent chains in atari adjacent to ``stones`` (a chain of ``col``)."""
        c = self.c
        opp = 3 - col
        w = self.w
        out: list[int] = []
        checked: set[int] = set()
        for s in stones:
            for q in (s - w, s - 1, s + 1, s + w):
                if c[q] == opp and q not in checked:
                    lib = self.atari_liberty(q, checked)
                    if lib >= 0 and lib not in out:
                        out.append(lib)
        return out

    def _has_capture(self, stones: list[int], col: int) -> bool:
        """Is an opponent chain adjacent to ``stones`` (a chain of ``col``) in atari?"""
        c = self.c
        opp = 3 - col
        w = self.w
        checked: set[int] = set()
        for s in stones:
            for q in (s - w, s - 1, s + 1, s + w):
                if c[q] == opp and q not in checked and self.atari_liberty(q, checked) >= 0:
                    return True
        return False

    def _connection_score_x2(self, loc: int, col: int, chain: set[int], chain_libs: int
                             ) -> int:
        """Move-ordering heuristic: for each adjacent direction holding a chain of ``col`` with
        more than one liberty, 2 * liberties - 3 (``chain`` has ``chain_libs``, known)."""
        c = self.c
        w = self.w
        self.reads.add(loc)
        total = 0
        for q in (loc - w, loc - 1, loc + 1, loc + w):
            if c[q] == col:
                n = chain_libs if q in chain else self.libs_upto(q, 1000)
                if n > 1:
                    total += 2 * n - 3
        return total

    # ------------------------------------------------------------------ the search
    def search(self, loc: int, defender_turn: bool, depth: int) -> bool:
        """Is the chain at ``loc`` captured with best play, ``defender_turn`` deciding who moves?"""
        if depth >= self.depth_limit - 1:
            return True
        return self._defend(loc, depth) if defender_turn else self._attack(loc, depth)

    def _attack(self, loc: int, depth: int) -> bool:
        """The attacker to move: captured if one of its (at most two) fills captures."""
        pla = self.c[loc]
        opp = 3 - pla
        stones, libs = self.chain(loc)
        n = len(libs)
        if n <= 1:
            return True
        if n >= 3:
            return False
        a, b = libs
        la, lb = self._immediate_libs(a), self._immediate_libs(b)
        # double-ko death: both liberties are ko mouths the defender cannot profit from
        if (la == 0 and lb == 0 and self._would_be_ko_capture(a, opp)
                and self._would_be_ko_capture(b, opp)
                and self._libs_after_play(a, pla, 3) <= 2
                and self._libs_after_play(b, pla, 3) <= 2
                and not self._has_capture(stones, pla)):
            return True
        for m in self._fills(stones, a, b, la, lb, pla):
            if not self.is_legal(m, opp):
                continue
            rec = self.play(m, opp)
            if self.nodes >= NODE_BUDGET:
                raise _BudgetExceeded
            captured = self.search(loc, True, depth + 1)
            self.undo(m, opp, rec)
            if captured:
                return True
        return False

    def _fills(self, stones: list[int], a: int, b: int, la: int, lb: int, pla: int
               ) -> list[int]:
        """The liberties worth filling, the more promising first. After the attacker fills
        one liberty the defender extends at the other; with >= 3 empty neighbours (besides
        the filled point) there it escapes, so that fill fails."""
        adjacent = a - b in (1, -1, self.w, -self.w)
        a_escape = la - adjacent >= 3
        b_escape = lb - adjacent >= 3
        if a_escape and b_escape:
            return []
        if a_escape:
            return [a]  # filling b would let the defender out at a
        if b_escape:
            return [b]
        own = set(stones)
        sa = 2 * la + self._connection_score_x2(a, pla, own, 2)
        sb = 2 * lb + self._connection_score_x2(b, pla, own, 2)
        return [b, a] if sb > sa else [a, b]

    def _defend(self, loc: int, depth: int) -> bool:
        """The defender to move: escaped if one of its captures or extensions escapes."""
        pla = self.c[loc]
        if self.ko:  # the attacker's last move was a ko capture: assume the defender wins the ko
            return False
        stones, libs = self.chain(loc)
        if len(libs) >= 2:
            return False
        # extending at the lone liberty surely gains >= 3 liberties (empty neighbours, or a
        # friendly chain to join with >= 4): escaped. Checked before looking for captures,
        # which costs more; the result is the same.
        if self._extension_escapes(libs[0], pla, stones):
            return False
        moves = self._capture_moves(stones, pla)
        for lib in libs:
            if lib not in moves:
                moves.append(lib)
        # bounds on the liberties after the last candidate (normally the extension): provably
        # enough -> escaped; provably too few and nothing else to try -> captured
        lower, upper = self._libs_bounds(moves[-1], pla, set(stones), 1)
        if lower >= 3:
            return False
        if len(moves) == 1 and upper <= 1:
            return True
        for m in moves:
            if not self.is_legal(m, pla):
                continue
            rec = self.play(m, pla)
            if self.nodes >= NODE_BUDGET:
                raise _BudgetExceeded
            captured = self.search(loc, False, depth + 1)
            self.undo(m, pla, rec)
            if not captured:
                return False
        return True


# ====================================================================================== API
def _start(board: bytes | bytearray, size: int, point: int, ko: int) -> tuple[LadderBoard, int]:
    lb = LadderBoard(board, size, ko)
    loc = lb.to_loc[point]
    if lb.c[loc] not in (BLACK, WHITE):
        raise ValueError(f"point {point} holds no stone")
    return lb, loc


def captured_defender_first(lb: LadderBoard, loc: int) -> bool:
    """Is the chain at ``loc`` (one liberty) captured, defender to move, root ko ban lifted?

    False when the reading exceeds ``NODE_BUDGET`` (the board is restored)."""
    saved_ko = lb.ko
    saved_stones = bytes(lb.c)
    lb.ko = 0
    lb.nodes = 0
    try:
        return lb.search(loc, True, 0)
    except _BudgetExceeded:  # too long to read: not captured (the board is restored below)
        lb.c[:] = saved_stones
        return False
    finally:
        lb.ko = saved_ko


def is_ladder_captured(board: bytes | bytearray, size: int, point: int, ko: int = -1) -> bool:
    """Is the chain at ``point`` (exactly one liberty) captured in a ladder, its owner to move?

    False for chains with two or more liberties (use ``ladder_working_moves``)."""
    lb, loc = _start(board, size, point, ko)
    if lb.libs_upto(loc, 2) != 1:
        return False
    return captured_defender_first(lb, loc)


def working_moves(lb: LadderBoard, loc: int) -> list[int]:
    """Padded locations of the attacker's first moves that capture the 2-liberty chain at loc."""
    pla = lb.c[loc]
    opp = 3 - pla
    _, libs = lb.chain(loc)
    a, b = libs
    adjacent = a - b in (1, -1, lb.w, -lb.w)
    out = []
    for m, other in ((a, b), (b, a)):
        # the defender answers a fill at m by extending at the other liberty: >= 3 empty
        # neighbours there (besides m) and the ladder fails without reading
        if lb._immediate_libs(other) - adjacent >= 3:
            continue
        if lb.is_legal(m, opp):
            rec = lb.play(m, opp)
            if captured_defender_first(lb, loc):
                out.append(m)
            lb.undo(m, opp, rec)
    return out


def ladder_working_moves(board: bytes | bytearray, size: int, point: int,
                         ko: int = -1) -> list[int]:
    """The attacker's moves (flat indices) that capture the chain at ``point`` (exactly two
    liberties) in a ladder, the attacker moving first; [] when the ladder fails."""
    lb, loc = _start(board, size, point, ko)
    if lb.libs_upto(loc, 3) != 2:
        return []
    return sorted(lb.to_pt[m] for m in working_moves(lb, loc))
