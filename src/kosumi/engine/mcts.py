"""PUCT Monte-Carlo tree search with batched leaf evaluation and virtual loss.

One search = repeated rounds; each round walks ``batch`` paths from the root down the tree by
PUCT (the children already walked this round carry a virtual loss, so the paths spread out),
evaluates the new leaves together through the ``Evaluator``, expands them and backs their values
up. Finished games (two passes) are scored exactly by Tromp-Taylor area scoring, so the search
itself knows when passing wins or throws a game away.

Conventions: a node's child statistics are from the view of the player to move at that node
(values are win probabilities in [0, 1]); a leaf's value is for the side to move at the leaf.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kosumi import accel
from kosumi.go.board import GameState, Rules
from kosumi.go.coords import PASS, RESIGN, policy_move
from kosumi.runtime.evaluator import Evaluation, Evaluator


@dataclass
class SearchConfig:
    visits: int = 200  # root visits to reach (reused visits count)
    batch: int = 8  # leaves evaluated together
    c_puct: float = 1.5
    fpu_reduction: float = 0.25
    virtual_loss: int = 1
    dirichlet_alpha: float = 0.0  # > 0: Dirichlet noise on the root priors (self-play)
    noise_fraction: float = 0.25
    temperature: float = 0.0  # move choice: 0 = the most visited move
    temperature_moves: int = 0  # apply the temperature for the first K moves of the game
    resign_threshold: float = 0.0  # resign when the root winrate falls below (0 disables)
    reuse_tree: bool = True
    seed: int | None = None


@dataclass
class MoveInfo:
    move: int
    visits: int
    winrate: float
    prior: float
    lcb: float
    pv: list[int] = field(default_factory=list)
    score_lead: float | None = None


@dataclass
class SearchResult:
    moves: list[MoveInfo]
    root_winrate: float
    visits: int
    elapsed: float
    ownership: np.ndarray | None = None
    playouts: int = 0  # playouts done by this call (visits minus reused)


# what a tree belongs to: size, komi, rules, setup stones, the first player to move
GameKey = tuple[int, float, Rules, tuple[tuple[int, int], ...], int]

# An unexpanded node's child arrays: empty, shared, and never written (a node is expanded before
# anything indexes them). Typed as the arrays they become, they need no None check on each use.
_NO_MOVES: array[int] = array("h")
_NO_STATS: array[float] = array("d")


class Node:
    """A position in the tree. Children are kept in parallel arrays over the legal moves."""

    __slots__ = (
        "children",
        "moves",
        "n",
        "own_n",
        "own_sum",
        "pending",
        "priors",
        "s",
        "score",
        "state",
        "terminal",
        "value",
        "visits",
        "w",
    )

    def __init__(self, state: GameState):
        self.state = state
        self.moves = _NO_MOVES  # int16 policy indices of the children (N*N = pass)
        self.priors = _NO_STATS  # float64, summing to 1
        # per-child statistics as float64 arrays (array.array: cheap scalar updates, not tracked
        # by the GC, and a buffer for the C selection): visits (virtual loss included while
        # pending), summed values from this node's mover's view, summed score leads (same view)
        self.n = _NO_STATS
        self.w = _NO_STATS
        self.s = _NO_STATS
        self.children: list[Node | None] = []
        self.visits = 0
        self.value = 0.5  # the net's (or the rules') value for the side to move here
        self.score: float | None = None
        self.terminal = False
        self.pending = False
        self.own_sum: np.ndarray | None = None
        self.own_n = 0

    @property
    def expanded(self) -> bool:
        return self.moves is not _NO_MOVES


def terminal_value(state: GameState) -> tuple[float, float]:
    """(win probability, score lead) of a finished game for the side to move, by area scoring."""
    lead_black = state.area_score()
    lead = lead_black if state.to_move == 1 else -lead_black
    return (1.0 if lead > 0 else 0.0 if lead < 0 else 0.5), lead


class MCTS:
    def __init__(self, evaluator: Evaluator, config: SearchConfig | None = None):
        self.evaluator = evaluator
        self.config = config or SearchConfig()
        self.rng = np.random.default_rng(self.config.seed)
        self._root: Node | None = None
        self._root_key: tuple[GameKey, tuple[tuple[int, int], ...]] | None = None

    # ------------------------------------------------------------------ tree reuse
    @staticmethod
    def _game_key(state: GameState) -> GameKey:
        return (state.size, state.komi, state.rules, tuple(state.setup), state.start_to_move)

    def clear(self) -> None:
        self._root = None
        self._root_key = None

    def _find_root(self, state: GameState) -> Node:
        cfg = self.config
        key = (self._game_key(state), tuple(state.moves))
        root: Node | None = None
        if cfg.reuse_tree and self._root is not None and self._root_key is not None:
            old_game, old_moves = self._root_key
            new_moves = key[1]
            if old_game == key[0] and new_moves[: len(old_moves)] == old_moves:
                node: Node | None = self._root
                for color, mv in new_moves[len(old_moves):]:
                    if node is None or not node.expanded or node.state.to_move != color:
                        node = None
                        break
                    idx = state.size * state.size if mv == PASS else mv
                    try:
                        node = node.children[node.moves.index(idx)]
                    except ValueError:  # the move was not a child (e.g. pruned prior)
                        node = None
                if node is not None and node.state.to_move == state.to_move and not node.pending:
                    root = node
        if root is None:
            root = Node(state.copy())
        self._root, self._root_key = root, key
        return root

    # ------------------------------------------------------------------ expansion
    def _expand(self, node: Node, ev: Evaluation) -> None:
        # children: the moves with a prior > 0, and always pass (finished games must stay
        # reachable even when its prior underflowed to 0); see kosumi.accel.policy_children
        move_bytes, prior_bytes = accel.policy_children(ev.policy)
        node.moves = moves = array("h")
        moves.frombytes(move_bytes)
        node.priors = priors = array("d")
        priors.frombytes(prior_bytes)
        zeros = bytes(len(prior_bytes))
        node.n, node.w, node.s = array("d", zeros), array("d", zeros), array("d", zeros)
        node.children = [None] * len(moves)
        node.value = float(ev.value)
        node.score = None if ev.score_lead is None else float(ev.score_lead)
        node.pending = False

    def _add_noise(self, node: Node) -> None:
        cfg = self.config
        if cfg.dirichlet_alpha > 0 and node.expanded and len(node.priors) > 1:
            noise = self.rng.dirichlet([cfg.dirichlet_alpha] * len(node.priors))
            mixed = ((1 - cfg.noise_fraction) * np.frombuffer(node.priors)
                     + cfg.noise_fraction * noise)
            node.priors = array("d", (mixed / mixed.sum()).tobytes())

    # ------------------------------------------------------------------ selection
    def _select_child(self, node: Node) -> int:
        cfg = self.config
        # argmax of q + u, with first-play urgency: unvisited children get the parent's value
        # minus a reduction growing with the explored prior; the formula is documented in
        # kosumi.accel.puct_select (C when built, the same numpy code otherwise)
        return accel.puct_select(node.n, node.w, node.priors, node.visits, node.value,
                                 cfg.c_puct, cfg.fpu_reduction)

    def _descend(self, root: Node) -> tuple[list[tuple[Node, int]], Node | None]:
        """Walk down with virtual loss. Returns (path, leaf); leaf None on a collision."""
        cfg = self.config
        vl, c_puct, fpu_reduction = cfg.virtual_loss, cfg.c_puct, cfg.fpu_reduction
        select = accel.puct_select  # see _select_child
        path: list[tuple[Node, int]] = []
        node = root
        while True:
            i = select(node.n, node.w, node.priors, node.visits, node.value, c_puct,
                       fpu_reduction)
            node.n[i] += vl
            node.visits += vl
            path.append((node, i))
            child = node.children[i]
            if child is None:
                st = node.state.copy()
                st.play(policy_move(int(node.moves[i]), st.size), trusted=True)
                child = Node(st)
                node.children[i] = child
                if st.passes >= 2:  # the game is over
                    child.terminal = True
                    child.value, child.score = terminal_value(st)
                    return path, child
                child.pending = True
                return path, child
            if child.terminal:
                return path, child
            if child.pending:
                self._revert(path)
                return path, None
            node = child

    def _revert(self, path: list[tuple[Node, int]]) -> None:
        vl = self.config.virtual_loss
        for node, i in path:
            node.n[i] -= vl
            node.visits -= vl

    def _backup(self, path: list[tuple[Node, int]], leaf: Node, value: float,
                score: float | None) -> None:
        settle = 1 - self.config.virtual_loss  # the visit was counted (as a loss) on descent
        leaf_color = leaf.state.to_move
        leaf.visits += 1
        for node, i in path:
            same = node.state.to_move == leaf_color
            if settle:
                node.n[i] += settle
                node.visits += settle
            node.w[i] += value if same else 1.0 - value
            if score is not None:
                node.s[i] += score if same else -score

    @staticmethod
    def _add_ownership(root: Node, rows: list[np.ndarray], signs: list[float]) -> None:
        """Add a batch of leaves' ownership (+1 = the leaf's mover) to the root's running sum,
        in the root mover's view (sign -1 for leaves with the other player to move)."""
        total = np.asarray(signs) @ np.asarray(rows, dtype=np.float64)
        if root.own_sum is None:
            root.own_sum = total
        else:
            root.own_sum += total
        root.own_n += len(rows)

    # ------------------------------------------------------------------ search
    def search(
        self,
        state: GameState,
        *,
        visits: int | None = None,
        time_limit: float | None = None,
        stop: threading.Event | None = None,
        callback: Callable[[SearchResult], None] | None = None,
        callback_interval: float = 0.1,
    ) -> SearchResult:
        # The tree holds no reference cycles, so reference counting frees it; the cyclic GC would
        # only re-scan thousands of live states per collection (a third of the search's time).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._search(state, visits, time_limit, stop, callback, callback_interval)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _search(self, state: GameState, visits: int | None, time_limit: float | None,
                stop: threading.Event | None, callback: Callable[[SearchResult], None] | None,
                callback_interval: float) -> SearchResult:
        cfg = self.config
        target = cfg.visits if visits is None else visits
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + time_limit
        root = self._find_root(state)
        if root.terminal or state.is_game_over():
            return SearchResult([], terminal_value(state)[0], 0, 0.0)
        start_visits = root.visits
        self._prepare_root(root)
        next_cb = t0 + callback_interval
        batch = max(1, cfg.batch)
        while True:
            if root.visits >= target > 0:
                break
            # a deadline or a stop ends the search, but never before its first playout
            if deadline is not None and time.perf_counter() >= deadline and root.visits:
                break
            if stop is not None and stop.is_set() and root.visits:
                break
            self._playouts(root, batch if target <= 0 else max(1, min(batch, target - root.visits)))
            if callback is not None and time.perf_counter() >= next_cb:
                callback(self._result(root, t0, start_visits))
                next_cb = time.perf_counter() + callback_interval
        result = self._result(root, t0, start_visits)
        if callback is not None:
            callback(result)
        return result

    def _prepare_root(self, root: Node) -> None:
        """Expand a fresh root (its evaluation is not a visit) and add the root noise."""
        if not root.expanded:
            ev = self.evaluator.evaluate([root.state])[0]
            self._expand(root, ev)
            root.visits = 0
            if ev.ownership is not None:
                root.own_sum, root.own_n = ev.ownership.astype(np.float64), 1
        self._add_noise(root)

    def _playouts(self, root: Node, want: int) -> None:
        """Up to ``want`` playouts: descend (virtual loss keeps them apart), evaluate the new
        leaves in one batch, expand them and back their values up."""
        leaves: list[tuple[list[tuple[Node, int]], Node]] = []
        for _ in range(want):
            path, leaf = self._descend(root)
            if leaf is None:
                break
            if leaf.terminal:
                self._backup(path, leaf, leaf.value, leaf.score)
                continue
            leaves.append((path, leaf))
        if not leaves:
            return
        try:
            evals = self.evaluator.evaluate([leaf.state for _, leaf in leaves])
        except BaseException:
            for path, _ in leaves:  # as if these playouts had never started
                self._revert(path)
                parent, i = path[-1]
                parent.children[i] = None
            raise
        own_rows: list[np.ndarray] = []
        own_signs: list[float] = []
        root_color = root.state.to_move
        for (path, leaf), ev in zip(leaves, evals, strict=True):
            self._expand(leaf, ev)
            self._backup(path, leaf, leaf.value, leaf.score)
            if ev.ownership is not None:
                own_rows.append(ev.ownership)
                own_signs.append(1.0 if leaf.state.to_move == root_color else -1.0)
        if own_rows:  # one matrix product per batch, not one sum per leaf
            self._add_ownership(root, own_rows, own_signs)

    def _pv(self, node: Node | None, limit: int = 20) -> list[int]:
        pv: list[int] = []
        while node is not None and node.expanded and len(pv) < limit and node.visits > 0:
            i = int(np.argmax(np.frombuffer(node.n)))
            if node.n[i] <= 0:
                break
            pv.append(policy_move(int(node.moves[i]), node.state.size))
            node = node.children[i]
        return pv

    def _result(self, root: Node, t0: float, start_visits: int) -> SearchResult:
        size = root.state.size
        infos = []
        if root.expanded:
            order = np.lexsort((-np.frombuffer(root.priors), -np.frombuffer(root.n)))
            for i in order:
                nv = root.n[i]
                if nv <= 0:
                    continue
                q = float(root.w[i] / nv)
                # a normal-approximation lower bound on the win rate
                lcb = q - 1.96 * math.sqrt(max(q * (1 - q), 0.0025) / nv)
                mv = policy_move(int(root.moves[i]), size)
                child = root.children[i]
                has_score = root.score is not None or (child is not None and child.terminal)
                infos.append(MoveInfo(
                    move=mv, visits=int(nv), winrate=q, prior=float(root.priors[i]), lcb=lcb,
                    pv=[mv, *self._pv(child)],
                    score_lead=float(root.s[i] / nv) if has_score else None,
                ))
        tot = float(sum(root.n)) if root.expanded else 0.0
        winrate = float(sum(root.w) / tot) if tot > 0 else root.value
        own = (None if root.own_sum is None
               else (root.own_sum / max(root.own_n, 1)).astype(np.float32))
        return SearchResult(
            moves=infos, root_winrate=winrate, visits=int(root.visits),
            elapsed=time.perf_counter() - t0, ownership=own,
            playouts=int(root.visits) - start_visits,
        )

    # ------------------------------------------------------------------ choosing a move
    def choose_move(self, state: GameState, result: SearchResult) -> int:
        cfg = self.config
        if not result.moves:
            return PASS
        candidates = result.moves
        # Pass safety under area scoring: after the opponent passed, passing ends the game.
        if state.passes >= 1:
            lead = state.area_score()
            mine = lead if state.to_move == 1 else -lead
            if mine > 0:
                return PASS  # passing wins now
            non_pass = [m for m in candidates if m.move != PASS]
            if non_pass:
                candidates = non_pass  # never end a game we would lose by passing
        if cfg.resign_threshold > 0 and result.root_winrate < cfg.resign_threshold:
            best = max(candidates, key=lambda m: (m.visits, m.winrate))
            if best.winrate < cfg.resign_threshold and result.visits >= min(cfg.visits, 32):
                return RESIGN
        if cfg.temperature > 0 and len(state.moves) < cfg.temperature_moves:
            counts = np.array([m.visits for m in candidates], dtype=np.float64)
            probs = counts ** (1.0 / cfg.temperature)
            probs /= probs.sum()
            return candidates[int(self.rng.choice(len(candidates), p=probs))].move
        return max(candidates, key=lambda m: (m.visits, m.winrate)).move

    def genmove(self, state: GameState, *, visits: int | None = None,
                time_limit: float | None = None) -> tuple[int, SearchResult]:
        result = self.search(state, visits=visits, time_limit=time_limit)
        return self.choose_move(state, result), result
