"""Monte-Carlo tree search with KataGo's rules, batched leaf evaluation and virtual loss.

One search = repeated rounds; each round walks ``batch`` paths from the root down the tree by
``kosumi.engine.puct.select_child`` (the children already walked this round carry a virtual
loss, so the paths spread out), evaluates the new leaves together through the ``Evaluator``,
then recomputes every node on each path from its children (``puct.update_node``: noise pruning
and value weighting, then its own evaluation). Finished games (two passes) are scored exactly
by Tromp-Taylor area scoring, so the search itself knows when passing wins or throws a game
away. The move is then chosen from the root's children by ``kosumi.engine.choice``: KataGo's
play-selection weights with a lower-confidence-bound check, and a temperature early on.

Values are *utilities* from White's view (``kosumi.engine.puct`` defines them: win/loss in
[-1, 1] plus a small share for the score). ``SearchResult`` and ``MoveInfo`` report them to
the outside as the root player's win rate in [0, 1] and lead in points.

``visits`` counts like KataGo's ``maxVisits``: the root's own evaluation is its first visit,
and visits reused from the last search count. So one visit plays the raw policy's best move.
"""

from __future__ import annotations

import functools
import gc
import math
import threading
import time
import weakref
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from kosumi.engine import choice, puct
from kosumi.engine.puct import F_LD, F_N, F_SM, F_VL, F_W, F_W2, F_WL, NF, O_U, O_W
from kosumi.errors import KosumiError
from kosumi.go.board import KO_SIMPLE, GameState, Rules
from kosumi.go.coords import BLACK, PASS, RESIGN, WHITE, policy_move
from kosumi.go.dead_stones import dead_stones
from kosumi.go.ladder_planes import dead_ladder_escapes
from kosumi.runtime.evaluator import Evaluation, Evaluator


@dataclass
class SearchConfig:
    """Every setting of the search, by name (``kosumi gtp --set name=value``). The defaults are
    KataGo's GTP defaults where KataGo has the setting; ``docs/SEARCH.md`` gives the matches
    behind them."""

    visits: int = 200  # root visits to reach (the root's evaluation and reused visits count)
    batch: int = 8  # leaves evaluated together
    # exploration (utility units: a win is +1, a loss -1)
    c_puct: float = 1.0  # KataGo cpuctExploration
    c_puct_log: float = 0.45  # ... + c_puct_log * log((visits + base) / base)
    c_puct_base: float = 500.0
    stdev_prior: float = 0.40  # cPUCT scaled by the node's utility deviation (this prior)
    stdev_prior_weight: float = 2.0
    stdev_scale: float = 0.85  # 0: no scaling
    fpu_reduction: float = 0.2  # first-play urgency below the parent's value
    root_fpu_reduction: float = 0.1
    fpu_parent_pow: float = 2.0  # parent value = blend of average and own eval; < 0: average
    virtual_loss: float = 1.0  # weight of one virtual loss
    # utility: win/loss plus these shares of the score value
    static_score_utility: float = 0.1
    dynamic_score_utility: float = 0.3
    score_center_zero_weight: float = 0.2
    score_center_scale: float = 0.75
    # how a node's value comes from its children
    value_weight_exponent: float = 0.25  # 0: plain weighted average
    noise_pruning: bool = True
    noise_prune_scale: float = 0.15
    subtree_bias_factor: float = 0.45  # subtree value bias correction; 0: off
    subtree_bias_exponent: float = 0.85
    subtree_bias_free_prop: float = 0.8  # share of a discarded node's bias taken back
    # choosing the move
    lcb_stdevs: float = 5.0  # 0: no lower-confidence-bound check
    lcb_min_visit_prop: float = 0.15
    temperature: float = 0.0  # early-game temperature on the play-selection weights
    temperature_late: float = 0.0  # the temperature it decays to
    temperature_halflife: float = 0.0  # moves (on 19x19; scaled by 19/N) per halving; 0: none
    temperature_moves: int = 0  # without a halflife: `temperature` for the first K moves
    # root noise (self-play)
    dirichlet_alpha: float = 0.0  # > 0: Dirichlet noise on the root priors
    noise_fraction: float = 0.25
    # resignation
    resign_threshold: float = 0.0  # resign when the win rate stays below this (0: never)
    resign_consecutive: int = 3  # ... for this many of its own moves in a row
    resign_opening: float = 0.2  # never in the first resign_opening * N*N moves of a game
    # moves that only run a dead ladder (kosumi.go.ladder_planes.dead_ladder_escapes): their
    # prior is multiplied by this (then renormalised); 0: never searched, 1: off (KataGo's nets
    # read ladders from their inputs; kosumi's students do not)
    ladder_escape_prior: float = 0.0
    reuse_tree: bool = True
    graph_search: bool = True  # transpositions share one node (KataGo's useGraphSearch)
    seed: int | None = None

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise KosumiError naming the first setting out of range."""
        def need(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise KosumiError(f"search setting {name}={getattr(self, name)!r}: {what}")
        need(self.visits >= 0, "visits", "must be >= 0")
        need(self.batch >= 1, "batch", "must be >= 1")
        for name in ("c_puct", "c_puct_log", "stdev_scale", "fpu_reduction",
                     "root_fpu_reduction", "virtual_loss", "static_score_utility",
                     "dynamic_score_utility", "value_weight_exponent", "lcb_stdevs",
                     "lcb_min_visit_prop", "temperature", "temperature_late",
                     "temperature_halflife", "dirichlet_alpha", "subtree_bias_factor",
                     "subtree_bias_exponent"):
            need(getattr(self, name) >= 0, name, "must be >= 0")
        need(self.c_puct_base > 0, "c_puct_base", "must be > 0")
        need(self.stdev_prior > 0, "stdev_prior", "must be > 0")
        need(self.stdev_prior_weight >= 0, "stdev_prior_weight", "must be >= 0")
        need(self.noise_prune_scale > 0, "noise_prune_scale", "must be > 0")
        need(0 <= self.score_center_zero_weight <= 1, "score_center_zero_weight",
             "must be in [0, 1]")
        need(self.score_center_scale > 0, "score_center_scale", "must be > 0")
        need(0 <= self.noise_fraction <= 1, "noise_fraction", "must be in [0, 1]")
        need(0 <= self.ladder_escape_prior <= 1, "ladder_escape_prior", "must be in [0, 1]")
        need(0 <= self.resign_threshold < 1, "resign_threshold", "must be in [0, 1)")
        need(self.resign_consecutive >= 1, "resign_consecutive", "must be >= 1")
        need(self.resign_opening >= 0, "resign_opening", "must be >= 0")
        need(self.temperature_moves >= 0, "temperature_moves", "must be >= 0")

    def params(self) -> array[float]:
        """The settings ``puct.select_child`` and ``puct.update_node`` read, in their order."""
        values = {
            "c_puct": self.c_puct, "c_puct_log": self.c_puct_log,
            "c_puct_base": self.c_puct_base, "stdev_prior": self.stdev_prior,
            "stdev_prior_weight": self.stdev_prior_weight, "stdev_scale": self.stdev_scale,
            "fpu_reduction": self.fpu_reduction, "root_fpu_reduction": self.root_fpu_reduction,
            "fpu_parent_pow": self.fpu_parent_pow, "vl_weight": self.virtual_loss,
            "radius": self.utility_radius, "value_weight_exp": self.value_weight_exponent,
            "noise_prune": 1.0 if self.noise_pruning else 0.0,
            "noise_scale": self.noise_prune_scale, "bias_factor": self.subtree_bias_factor,
            "bias_exp": self.subtree_bias_exponent,
        }
        return array("d", [float(values[n]) for n in puct.PARAM_NAMES])

    @property
    def utility_radius(self) -> float:
        """The largest utility a position can have."""
        return 1.0 + self.static_score_utility + self.dynamic_score_utility

    def temperature_at(self, move_number: int, size: int) -> float:
        """The move-choice temperature at this move of the game: KataGo's schedule with a
        halflife (``late + (early - late) * 0.5 ** (moves / halflife * 19 / N)``), else
        ``temperature`` for the first ``temperature_moves`` moves and ``temperature_late``
        after."""
        if self.temperature_halflife > 0:
            halves = move_number / self.temperature_halflife * 19.0 / size
            return self.temperature_late + (self.temperature - self.temperature_late) \
                * 0.5 ** halves
        return self.temperature if move_number < self.temperature_moves \
            else self.temperature_late

    @classmethod
    def setting_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def with_settings(self, assignments: list[str]) -> SearchConfig:
        """A copy with ``name=value`` assignments applied (``kosumi gtp --set``); KosumiError
        names an unknown setting or a value that does not parse or is out of range."""
        import dataclasses

        types = {f.name: f.type for f in fields(self)}
        changes: dict[str, object] = {}
        for text in assignments:
            name, sep, value = text.partition("=")
            name, value = name.strip().replace("-", "_"), value.strip()
            if not sep or not name:
                raise KosumiError(f"search setting {text!r}: expected name=value")
            if name not in types:
                raise KosumiError(f"unknown search setting {name!r} (known: "
                                  f"{', '.join(self.setting_names())})")
            changes[name] = _parse_setting(name, str(types[name]), value)
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _parse_setting(name: str, kind: str, value: str) -> object:
    low = value.lower()
    try:
        if kind == "bool":
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind.startswith("int"):
            if kind.endswith("None") and low == "none":
                return None
            return int(value)
        return float(value)
    except ValueError:
        raise KosumiError(f"search setting {name}={value!r}: not a {kind}") from None


@dataclass
class MoveInfo:
    move: int
    visits: int
    winrate: float  # the root player's win probability after this move
    prior: float
    lcb: float  # a lower confidence bound on winrate
    pv: list[int] = field(default_factory=list)
    score_lead: float | None = None
    weight: float = 0.0  # KataGo's play-selection weight: what the move choice compares
    utility: float = 0.0  # the root player's utility after this move
    pv_visits: list[int] = field(default_factory=list)  # each pv node's visits (all its parents')
    pv_edge_visits: list[int] = field(default_factory=list)  # ... through the pv's own edges


@dataclass
class SearchResult:
    moves: list[MoveInfo]  # by play-selection weight, then visits: the first is the best
    root_winrate: float
    visits: int
    elapsed: float
    ownership: np.ndarray | None = None
    playouts: int = 0  # playouts done by this call (visits minus reused)
    score_lead: float | None = None  # the root player's expected lead


# what a tree belongs to: size, komi, rules, setup stones, the first player to move
GameKey = tuple[int, float, Rules, tuple[tuple[int, int], ...], int]

# An unexpanded node's child arrays: empty, shared, and never written (a node is expanded before
# anything indexes them). Typed as the arrays they become, they need no None check on each use.
_NO_MOVES: array[int] = array("h")
_NO_STATS: array[float] = array("d")


class Node:
    """A position in the tree: its children (sorted by prior), one record per child, its own
    record and its own evaluation (see ``kosumi.engine.puct``)."""

    __slots__ = (
        "agg",
        "bias",
        "bias_gen",
        "bias_key",
        "children",
        "first_parent",
        "gkey",
        "moves",
        "own",
        "own_key",
        "own_n",
        "own_sum",
        "parents",
        "pending",
        "priors",
        "score_stdev",
        "shared_slots",
        "sign",
        "st",
        "state",
        "terminal",
        "__weakref__",
    )

    def __init__(self, state: GameState):
        self.state = state
        self.moves = _NO_MOVES  # int16 policy indices of the children (N*N = pass)
        self.priors = _NO_STATS  # float64, summing to 1, highest first
        self.st = _NO_STATS  # NF float64 per child (array.array: a buffer for C, not GC-tracked)
        self.agg = puct.new_record()
        self.own = array("d", bytes(8 * puct.NOWN))
        self.own[O_W] = 1.0
        self.own_key = -1  # the search whose score center own[O_U] was computed with
        self.score_stdev = 0.0
        self.children: list[Node | None] = []
        self.sign = 1.0 if state.to_move == WHITE else -1.0
        self.terminal = False
        self.pending = False
        self.own_sum: np.ndarray | None = None
        self.own_n = 0
        self.bias_key: tuple | None = None  # its subtree value bias bucket (None: none)
        self.bias: array[float] | None = None  # that bucket in this search's table
        self.bias_gen = -1  # the table generation ``bias`` belongs to
        # graph search: the position's key in the transposition table (None: not in it), how
        # many parents link to it, the first one's (weak reference, slot: the tree holds no
        # reference cycles), and the slots of this node's children that have other parents
        # too (their records are edges: see _sync_edge)
        self.gkey: tuple | None = None
        self.parents = 1
        self.first_parent: tuple[weakref.ref[Node], int] | None = None
        self.shared_slots: list[int] | None = None

    @property
    def expanded(self) -> bool:
        return self.moves is not _NO_MOVES

    @property
    def visits(self) -> int:
        return int(self.agg[F_N])


#: the move before a game's first move, in a subtree value bias key
NO_MOVE = -3

#: the subtree value bias table starts afresh past this many buckets (memory bound)
BIAS_TABLE_MAX = 1_000_000


@functools.cache
def _windows(size: int) -> tuple[tuple[int, ...], ...]:
    """For each point, the 25 points of the 5x5 window around it (-1: off the board)."""
    out = []
    for p in range(size * size):
        x, y = p % size, p // size
        out.append(tuple((y + dy) * size + x + dx
                         if 0 <= x + dx < size and 0 <= y + dy < size else -1
                         for dy in range(-2, 3) for dx in range(-2, 3)))
    return tuple(out)


def bias_key(state: GameState, move: int, prev: int | None = None) -> tuple:
    """The subtree value bias bucket of the node that ``move`` makes from ``state``: the mover,
    the move, the move before it (``prev``: on the path the search took, which for a position
    reached by two move orders is not always ``state``'s own last move), the ko ban, and (not
    for a pass) the 5x5 window around the move before it was played, each stone marked when in
    atari (KataGo's buckets)."""
    pla = state.to_move
    if prev is None:
        prev = state.moves[-1][1] if state.moves else NO_MOVE
    ko = state.ko if state.ko_color == pla else -1
    if move == PASS:
        return (pla, move, prev, ko)
    board, head = state.board, state.head
    pattern = bytes(3 if q < 0 else board[q] | (4 if board[q] and state.in_atari(head[q]) else 0)
                    for q in _windows(state.size)[move])
    return (pla, move, prev, ko, pattern)


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
        self._params = self.config.params()
        self._root: Node | None = None
        self._root_key: tuple[GameKey, tuple[tuple[int, int], ...]] | None = None
        self._root_stale = False  # the reused root's evaluation saw another history
        self._search_id = 0
        self._ending_passes = 2  # passes in a row that end a game in the tree (see _search)
        self._center = 0.0
        # the subtree value bias buckets: kept while a node of the tree uses them (KataGo's
        # table; see _free_bias), a new generation on clear() or past BIAS_TABLE_MAX buckets
        self._bias_table: dict[tuple, array[float]] = {}
        self._bias_gen = 0
        self._nodes: dict[tuple, Node] = {}  # graph search: position key -> its node
        self._low_streak = 0  # own moves in a row with the win rate below resign_threshold

    # ------------------------------------------------------------------ tree reuse
    @staticmethod
    def _game_key(state: GameState) -> GameKey:
        return (state.size, state.komi, state.rules, tuple(state.setup), state.start_to_move)

    def clear(self) -> None:
        self._root = None
        self._root_key = None
        self._low_streak = 0
        self._nodes = {}
        self._new_bias_table()

    def _new_bias_table(self) -> None:
        self._bias_table = {}
        self._bias_gen += 1

    def _find_root(self, state: GameState) -> Node:
        cfg = self.config
        self._root_stale = False
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
            self._new_bias_table()
            self._nodes = {}
            if self._graph(state):
                root.gkey = self._graph_key(root.state)
                self._nodes[root.gkey] = root
        else:
            if self._root is not None and root is not self._root:
                self._free_bias(self._root, root)
            if root.state.moves != state.moves:  # a transposition: the game's own history
                root.state = state.copy()
                self._root_stale = True  # its evaluation saw the other move order's history
        self._root, self._root_key = root, key
        return root

    def _graph(self, state: GameState) -> bool:
        """Graph search for this game: on, and simple ko (under positional superko a position's
        legal moves depend on the path that reached it, so each path keeps its own node)."""
        return self.config.graph_search and state.rules.ko == KO_SIMPLE

    @staticmethod
    def _graph_key(state: GameState) -> tuple:
        """A position's transposition key: the stones (Zobrist hash), the side to move, the ko
        ban, the passes in a row and the move number (so the graph has no cycles: a repeated
        position later in the game is another node)."""
        return (state.hash, state.to_move, state.ko, state.ko_color, state.passes,
                len(state.moves))

    @staticmethod
    def _reachable(root: Node) -> list[Node]:
        """Every node under ``root``, each once (transpositions make the tree a graph)."""
        seen, out, stack = {id(root)}, [root], [root]
        while stack:
            for c in stack.pop().children:
                if c is not None and id(c) not in seen:
                    seen.add(id(c))
                    out.append(c)
                    stack.append(c)
        return out

    def _free_bias(self, old_root: Node, new_root: Node) -> None:
        """The tree moves down to ``new_root``: every node of the old tree that the new one does
        not reach is discarded and takes ``subtree_bias_free_prop`` of its share back from its
        bucket, and only the buckets a kept node still uses stay in the table (KataGo's
        subtreeValueBiasFreeProp and its table clean-up after the tree is pruned); the
        transposition table keeps the kept nodes. The new root leaves its bucket as a discarded
        node does: KataGo's root is a copy of the child without one, whose own evaluation no
        bucket corrects."""
        gen, free = self._bias_gen, self.config.subtree_bias_free_prop
        kept = self._reachable(new_root)[1:]  # the root first: it leaves its bucket
        kept_ids = {id(n) for n in kept}
        if free:
            for node in self._reachable(old_root):
                bias = node.bias
                if id(node) in kept_ids or bias is None or node.bias_gen != gen:
                    continue
                own = node.own
                bias[puct.B_DELTA] -= free * own[puct.O_BIAS_DELTA]
                bias[puct.B_WEIGHT] -= free * own[puct.O_BIAS_WEIGHT]
        new_root.bias_key = new_root.bias = None
        new_root.own[puct.O_BIAS_DELTA] = new_root.own[puct.O_BIAS_WEIGHT] = 0.0
        self._bias_table = {n.bias_key: n.bias for n in kept
                            if n.bias is not None and n.bias_gen == gen and n.bias_key is not None}
        self._nodes = {n.gkey: n for n in (new_root, *kept) if n.gkey is not None}

    # ------------------------------------------------------------------ evaluations
    def _own_utility(self, wl: float, mean: float, stdev: float, size: int) -> float:
        """Win/loss plus the score utility at this search's score center (White's view)."""
        cfg = self.config
        return wl + puct.score_utility(mean, stdev, self._center, cfg.static_score_utility,
                                       2.0 * size, cfg.dynamic_score_utility,
                                       cfg.score_center_scale * size)

    def _set_own(self, nodes: list[Node], evs: list[Evaluation]) -> None:
        """Each node's own evaluation, in White's view, with its utility at this search's
        score center."""
        key = self._search_id
        for node, ev in zip(nodes, evs, strict=True):
            sign = node.sign
            if ev.wdl is not None:
                wl = sign * (float(ev.wdl[0]) - float(ev.wdl[1]))
            else:
                wl = sign * (2.0 * float(ev.value) - 1.0)
            lead = 0.0 if ev.score_lead is None else float(ev.score_lead)
            mean = sign * (lead if ev.score_mean is None else float(ev.score_mean))
            sd = 0.0 if ev.score_stdev is None else float(ev.score_stdev)
            own = node.own
            own[puct.O_WL] = wl
            own[puct.O_SM] = mean
            own[puct.O_SM2] = mean * mean + sd * sd
            own[puct.O_LD] = sign * lead
            own[O_U] = self._own_utility(wl, mean, sd, node.state.size)
            node.score_stdev = sd
            node.own_key = key

    def _refresh_own(self, node: Node) -> None:
        """Recompute a node's own utility at this search's score center (a reused node)."""
        own = node.own
        own[O_U] = self._own_utility(own[puct.O_WL], own[puct.O_SM], node.score_stdev,
                                     node.state.size)
        node.own_key = self._search_id

    def _set_terminal(self, node: Node) -> None:
        """A finished game's own value: the area count, exactly."""
        node.terminal = True
        lead = -node.state.area_score()  # White's view
        own = node.own
        own[puct.O_WL] = 1.0 if lead > 0 else -1.0 if lead < 0 else 0.0
        own[puct.O_SM] = own[puct.O_LD] = lead
        own[puct.O_SM2] = lead * lead
        node.score_stdev = 0.0
        own[O_U] = self._own_utility(own[puct.O_WL], lead, 0.0, node.state.size)
        node.own_key = self._search_id

    # ------------------------------------------------------------------ expansion
    def _expand(self, node: Node, ev: Evaluation) -> None:
        # children: the moves with a prior > 0, and always pass (finished games must stay
        # reachable even when its prior underflowed to 0), sorted by prior, highest first
        # (noise pruning reads them in that order); see kosumi.engine.puct.children
        move_bytes, prior_bytes = puct.children(self._policy(node.state, ev))
        node.moves = moves = array("h")
        moves.frombytes(move_bytes)
        node.priors = priors = array("d")
        priors.frombytes(prior_bytes)
        node.st = array("d")  # records grow as playouts reach children (in prior order)
        node.children = [None] * len(moves)
        node.pending = False

    def _policy(self, state: GameState, ev: Evaluation) -> np.ndarray:
        """The net's policy, with the moves that run a dead ladder scaled by
        ``ladder_escape_prior`` (the net cannot read a ladder across the board; the search at
        a few hundred visits does not either)."""
        factor = self.config.ladder_escape_prior
        if factor >= 1.0:
            return ev.policy
        escapes = dead_ladder_escapes(state.board, state.size, state.to_move, state.ko)
        if not escapes:
            return ev.policy
        policy = np.array(ev.policy, dtype=np.float32)
        policy[list(escapes)] *= factor
        total = float(policy.sum())
        return policy / total if total > 0 else np.asarray(ev.policy, dtype=np.float32)

    def _add_noise(self, node: Node) -> None:
        cfg = self.config
        if cfg.dirichlet_alpha > 0 and node.expanded and len(node.priors) > 1:
            noise = self.rng.dirichlet([cfg.dirichlet_alpha] * len(node.priors))
            mixed = ((1 - cfg.noise_fraction) * np.frombuffer(node.priors)
                     + cfg.noise_fraction * noise)
            node.priors = array("d", (mixed / mixed.sum()).tobytes())

    # ------------------------------------------------------------------ selection
    def _descend(self, root: Node) -> tuple[list[tuple[Node, int]], Node | None]:
        """Walk down with virtual loss. Returns (path, leaf); leaf None on a collision."""
        select, params, key = puct.select_child, self._params, self._search_id
        path: list[tuple[Node, int]] = []
        node = root
        is_root = 1.0
        graph = self._graph(root.state)
        transposed = False  # the path has passed a node another move order made
        prev = root.state.moves[-1][1] if root.state.moves else NO_MOVE  # the move into ``node``
        while True:
            if node.own_key != key:
                self._refresh_own(node)
            i = select(node.st, node.priors, node.agg, params, node.own[O_U], node.sign,
                       is_root)
            if node.state.passes and node.agg[F_N] >= 3:
                i = self._try_both_endings(node, i)
            reached = len(node.st) // NF
            if i >= reached:  # a new child: its record (and any skipped before it)
                node.st.extend(puct.new_records(i + 1 - reached))
            node.st[i * NF + F_VL] += 1.0
            path.append((node, i))
            child = node.children[i]
            if child is None:
                st = node.state.copy()
                move = policy_move(int(node.moves[i]), st.size)
                st.play(move, trusted=True)
                if st.passes >= self._ending_passes:  # the game is over
                    child = node.children[i] = Node(st)
                    child.bias_key = bias_key(node.state, move, prev)
                    self._set_terminal(child)
                    return path, child
                gkey = self._graph_key(st) if graph else None
                other = None if gkey is None else self._nodes.get(gkey)
                if other is None or other.pending or not other.expanded:
                    if transposed:  # the net sees this path's history, not the other order's
                        st = self._replay_path(root, path)
                    child = node.children[i] = Node(st)
                    child.bias_key = bias_key(node.state, move, prev)
                    if graph:
                        child.first_parent = (weakref.ref(node), i)
                    if gkey is not None and other is None:
                        child.gkey = gkey
                        self._nodes[gkey] = child
                    child.pending = True
                    return path, child
                child = node.children[i] = other  # a transposition: this edge joins it
                self._link(node, i, other)
            if child.terminal:
                return path, child
            if child.pending:
                self._revert(path)
                return path, None
            if child.parents > 1:
                if node.st[i * NF + F_N] < child.agg[F_N]:
                    return path, child  # the edge catches up with the node: no evaluation
                transposed = True
            prev = policy_move(int(node.moves[i]), node.state.size)
            node = child
            is_root = 0.0

    @staticmethod
    def _link(parent: Node, slot: int, child: Node) -> None:
        """A second (third...) parent's edge to ``child``: the records of both the new edge and
        the first parent's are edges from now on (see _sync_edge)."""
        child.parents += 1
        first = child.first_parent
        first_parent = None if first is None else first[0]()
        links = [(parent, slot)]
        if first is not None and first_parent is not None:
            links.append((first_parent, first[1]))
        for up, i in links:
            if up.shared_slots is None:
                up.shared_slots = []
            if i not in up.shared_slots:
                up.shared_slots.append(i)

    @staticmethod
    def _replay_path(root: Node, path: list[tuple[Node, int]]) -> GameState:
        """The position at the end of ``path`` with this path's own history (moves, boards): the
        root's state and the path's moves played on it."""
        st = root.state.copy()
        size = st.size
        for n, i in path:
            st.play(policy_move(int(n.moves[i]), size), trusted=True)
        return st

    @staticmethod
    def _sync_edge(parent: Node, slot: int, child: Node, edge_visits: float) -> None:
        """The parent's record of a child that other parents share: the child's current
        statistics, with the edge's own visit count and the child's weights scaled to it
        (KataGo's graph search weighs a child by its edge's share of the child's visits; the
        summed squared weights by the square of that share, as KataGo's parent sums them)."""
        b = slot * NF
        st = parent.st
        vl = st[b + F_VL]
        st[b: b + NF] = child.agg
        st[b + F_VL] = vl
        n = child.agg[F_N]
        if 0.0 < edge_visits < n:
            share = edge_visits / n
            st[b + F_N] = edge_visits
            st[b + F_W] *= share
            st[b + F_W2] *= share * share

    @staticmethod
    def _try_both_endings(node: Node, i: int) -> int:
        """Where a pass ends the game, make sure both the pass and some other move get tried
        (KataGo's passing hack): the first-play urgency follows the parent's value, so a
        policy that loves passing would never look at the alternative, nor a policy that
        never passes at ending the game."""
        st = node.st
        pass_i = node.moves.index(node.state.size * node.state.size)
        tried = [j * NF < len(st) and (st[j * NF + F_N] > 0 or st[j * NF + F_VL] > 0)
                 for j in range(len(node.moves))]
        if not tried[pass_i] and i != pass_i:
            return pass_i
        if i == pass_i and not any(t for j, t in enumerate(tried) if j != pass_i):
            return next((j for j in range(len(node.moves)) if j != pass_i), i)
        return i

    @staticmethod
    def _revert(path: list[tuple[Node, int]]) -> None:
        for node, i in path:
            node.st[i * NF + F_VL] -= 1.0

    def _backup(self, path: list[tuple[Node, int]], leaf: Node, catchup: bool = False) -> None:
        """Recompute the leaf and every node above it, each from its children's records and
        its own evaluation, and release the path's virtual losses. ``catchup``: the leaf is a
        transposition reached by an edge with fewer visits than it has; the edge gains a visit
        of the leaf's current value and the leaf is left as it is (KataGo's graph search)."""
        update, params, key = puct.update_node, self._params, self._search_id
        gen = self._bias_gen
        # the visits of the path's edges into shared children, before this playout
        edges = [node.st[i * NF + F_N] if node.shared_slots and i in node.shared_slots else -1.0
                 for node, i in path]
        parent, slot = path[-1]
        if catchup:
            self._sync_edge(parent, slot, leaf, edges[-1] + 1.0)
            parent.st[slot * NF + F_VL] -= 1.0
        elif leaf.terminal:
            if leaf.own_key != key:
                self._set_terminal(leaf)
            self._terminal_visit(leaf, parent, slot)
        else:
            bias = leaf.bias if leaf.bias_gen == gen else self._bias_of(leaf)
            update(leaf.st, leaf.priors, leaf.own, params, leaf.sign, leaf.agg, parent.st,
                   slot, 1.0, bias)
            if edges[-1] >= 0.0:
                self._sync_edge(parent, slot, leaf, edges[-1] + 1.0)
        for j in range(len(path) - 1, -1, -1):
            node, through = path[j]
            if node.own_key != key:
                self._refresh_own(node)
            if node.shared_slots:  # the other parents' playouts may have moved these children
                children, st = node.children, node.st
                for k in node.shared_slots:
                    other = children[k]
                    if k != through and other is not None and k * NF < len(st):
                        self._sync_edge(node, k, other, st[k * NF + F_N])
            bias = node.bias if node.bias_gen == gen else self._bias_of(node)
            if j:
                up, i = path[j - 1]
                update(node.st, node.priors, node.own, params, node.sign, node.agg, up.st, i,
                       1.0, bias)
                if edges[j - 1] >= 0.0:
                    self._sync_edge(up, i, node, edges[j - 1] + 1.0)
            else:
                update(node.st, node.priors, node.own, params, node.sign, node.agg, None, 0,
                       0.0, bias)

    def _bias_of(self, node: Node) -> array[float] | None:
        """The node's subtree value bias bucket in the current table (a node from an earlier
        table starts a new share: its last share went with the old table)."""
        node.bias_gen = self._bias_gen
        node.own[puct.O_BIAS_DELTA] = node.own[puct.O_BIAS_WEIGHT] = 0.0
        if node.bias_key is None or not self.config.subtree_bias_factor:
            node.bias = None
        else:
            node.bias = self._bias_table.get(node.bias_key)
            if node.bias is None:
                node.bias = self._bias_table[node.bias_key] = array("d", bytes(8 * puct.NBIAS))
        return node.bias

    @staticmethod
    def _terminal_visit(leaf: Node, parent: Node, slot: int) -> None:
        """One more visit of a finished game: its record gains a visit of its exact value."""
        agg, own = leaf.agg, leaf.own
        agg[F_N] += 1.0
        agg[F_W] += 1.0
        agg[F_W2] += 1.0
        agg[puct.F_U] = own[O_U]
        agg[puct.F_U2] = own[O_U] * own[O_U]
        agg[F_WL] = own[puct.O_WL]
        agg[F_SM] = own[puct.O_SM]
        agg[puct.F_SM2] = own[puct.O_SM2]
        agg[F_LD] = own[puct.O_LD]
        b = slot * NF
        vl = parent.st[b + F_VL] - 1.0
        parent.st[b: b + NF] = agg
        parent.st[b + F_VL] = vl

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
            win, lead = terminal_value(state)
            return SearchResult([], win, 0, 0.0, score_lead=lead)
        start_visits = root.visits
        # KataGo's friendlyPassOk (chinese rules): two passes in a row need not end the game
        # in the tree, since the referee takes dead stones off; the net judges that position
        # (its features hide the history then) and a third pass ends it as it stands
        self._ending_passes = 3 if state.rules.friendly_pass_ok else 2
        self._prepare_root(root)
        next_cb = t0 + callback_interval
        batch = max(1, cfg.batch)
        while True:
            if root.visits >= target > 0:
                break
            # a deadline or a stop ends the search, but never before its first playout
            if deadline is not None and time.perf_counter() >= deadline and root.visits > 1:
                break
            if stop is not None and stop.is_set() and root.visits > 1:
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
        """Expand a fresh root (its evaluation is its first visit), set this search's score
        center from what the tree knows of the root, and add the root noise."""
        self._search_id += 1
        if len(self._bias_table) > BIAS_TABLE_MAX:
            self._new_bias_table()
        if not root.expanded:
            ev = self.evaluator.evaluate([root.state])[0]
            self._expand(root, ev)
            if ev.ownership is not None:
                root.own_sum, root.own_n = ev.ownership.astype(np.float64), 1
            self._center = 0.0
            self._set_own([root], [ev])
            mean = root.own[puct.O_SM]
        else:
            mean = root.agg[F_SM] if root.agg[F_N] > 0 else root.own[puct.O_SM]
        cfg = self.config
        self._center = puct.score_center(mean, root.state.size, cfg.score_center_zero_weight,
                                         cfg.score_center_scale)
        self._recompute_tree(root)
        if self._root_stale:
            self._reevaluate_root(root)
        self._add_noise(root)

    def _reevaluate_root(self, root: Node) -> None:
        """A reused root that the tree first reached by another move order: the net sees the
        last moves, so its evaluation is made again with the game's own history (KataGo
        re-evaluates a reused root at its first playout): its own value, from the first
        playout's backup on (its statistics stay as recomputed), and its children's priors, the
        children not yet reached re-sorted by the new ones (the next new child is the first)."""
        self._root_stale = False
        ev = self.evaluator.evaluate([root.state])[0]
        self._set_own([root], [ev])
        policy = np.asarray(self._policy(root.state, ev), dtype=np.float64)
        moves = list(root.moves)
        new = [max(float(policy[m]), 0.0) for m in moves]
        total = sum(new)
        if total <= 0.0:
            return
        new = [v / total for v in new]
        reached = len(root.st) // NF  # these keep their slots (records, children, shared slots)
        order = [*range(reached), *sorted(range(reached, len(moves)),
                                          key=lambda i: (-new[i], moves[i]))]
        root.moves = array("h", [moves[i] for i in order])
        root.priors = array("d", [new[i] for i in order])
        root.children = [root.children[i] for i in order]

    def _recompute_tree(self, root: Node) -> None:
        """Every node of the (reused) tree at this search's score center, children before
        parents: each node's own utility, its records of its children, its statistics (KataGo's
        recursivelyRecomputeStats at the start of a search). Without it, the children that this
        search does not visit again would keep utilities from the last search's center and be
        compared with those it does at another."""
        update, params, gen = puct.update_node, self._params, self._bias_gen
        for node in self._children_first(root):
            if node.terminal:
                self._refresh_own(node)  # its exact score, at the new center (no recount)
                agg, own = node.agg, node.own
                agg[puct.F_U], agg[puct.F_U2] = own[O_U], own[O_U] * own[O_U]
                continue
            st, shared, children = node.st, node.shared_slots or (), node.children
            leaf = True  # no child visited yet
            for k in range(len(st) // NF):  # the children reached (those with records)
                child = children[k]
                if child is None or st[k * NF + F_N] <= 0.0:
                    continue
                leaf = False
                if k in shared:
                    self._sync_edge(node, k, child, st[k * NF + F_N])
                else:
                    vl = st[k * NF + F_VL]
                    st[k * NF: (k + 1) * NF] = child.agg
                    st[k * NF + F_VL] = vl
            self._refresh_own(node)
            # a leaf is its own evaluation again, without the bias correction its first visit
            # had (KataGo recomputes leaves from their averages)
            bias = None if leaf else node.bias if node.bias_gen == gen else self._bias_of(node)
            update(st, node.priors, node.own, params, node.sign, node.agg, None, 0, 0.0, bias)

    @staticmethod
    def _children_first(root: Node) -> list[Node]:
        """The evaluated nodes under ``root`` (each once), every node after all its children."""
        order: list[Node] = []
        seen = {id(root)}
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, k = stack[-1]
            children = node.children
            reached = min(len(children), len(node.st) // NF)  # children exist only there
            child = None
            while k < reached:
                c = children[k]
                k += 1
                if c is not None and id(c) not in seen and (c.expanded or c.terminal):
                    child = c
                    break
            stack[-1] = (node, k)
            if child is not None:
                seen.add(id(child))
                stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)
        return order

    def _playouts(self, root: Node, want: int) -> None:
        """Up to ``want`` playouts: descend (virtual loss keeps them apart), evaluate the new
        leaves in one batch, expand them and back their values up."""
        leaves: list[tuple[list[tuple[Node, int]], Node]] = []
        for _ in range(want):
            path, leaf = self._descend(root)
            if leaf is None:
                break
            if leaf.terminal:
                self._backup(path, leaf)
                continue
            if not leaf.pending:  # a transposition the edge catches up with
                self._backup(path, leaf, catchup=True)
                continue
            leaves.append((path, leaf))
        if not leaves:
            return
        try:
            evals = self.evaluator.evaluate([leaf.state for _, leaf in leaves])
        except BaseException:
            for path, leaf in leaves:  # as if these playouts had never started
                self._revert(path)
                parent, i = path[-1]
                parent.children[i] = None
                if leaf.gkey is not None and self._nodes.get(leaf.gkey) is leaf:
                    del self._nodes[leaf.gkey]
            raise
        for (_, leaf), ev in zip(leaves, evals, strict=True):
            self._expand(leaf, ev)
        self._set_own([leaf for _, leaf in leaves], evals)
        own_rows: list[np.ndarray] = []
        own_signs: list[float] = []
        root_sign = root.sign
        for (path, leaf), ev in zip(leaves, evals, strict=True):
            self._backup(path, leaf)
            if ev.ownership is not None:
                own_rows.append(ev.ownership)
                own_signs.append(1.0 if leaf.sign == root_sign else -1.0)
        if own_rows:  # one matrix product per batch, not one sum per leaf
            self._add_ownership(root, own_rows, own_signs)

    # ------------------------------------------------------------------ reporting
    def _pv(self, node: Node | None, limit: int = 20
            ) -> tuple[list[int], list[int], list[int]]:
        """The principal variation below ``node`` (``choice.line_child`` at each node): its
        moves, each node's visits and each edge's (they differ where a transposition joins the
        line: KataGo's pvVisits and pvEdgeVisits)."""
        pv: list[int] = []
        visits: list[int] = []
        edges: list[int] = []
        cfg = self.config
        while node is not None and node.expanded and len(pv) < limit and node.visits > 1:
            i = choice.line_child(node.st, node.priors, node.sign, cfg.lcb_stdevs,
                                  cfg.lcb_min_visit_prop, cfg.utility_radius)
            child = None if i is None or i >= len(node.children) else node.children[i]
            if i is None or child is None:
                break
            pv.append(policy_move(int(node.moves[i]), node.state.size))
            visits.append(child.visits)
            edges.append(int(node.st[i * NF + F_N]))
            node = child
        return pv, visits, edges

    def _result(self, root: Node, t0: float, start_visits: int) -> SearchResult:
        size = root.state.size
        infos: list[MoveInfo] = []
        rs = root.sign
        if root.expanded:
            cfg = self.config
            sel = choice.play_selection(root.st, root.priors, root.agg, self._params, rs,
                                        cfg.lcb_stdevs, cfg.lcb_min_visit_prop,
                                        cfg.utility_radius)
            rec = choice.padded(root.st, len(root.priors))
            for i in np.lexsort((-np.frombuffer(root.priors), -rec[:, F_N], -sel.weights)):
                nv = rec[i, F_N]
                if nv <= 0 and sel.weights[i] <= 0:
                    continue
                mv = policy_move(int(root.moves[i]), size)
                winrate = 0.5 * (1.0 + rs * rec[i, F_WL]) if nv > 0 else 0.0
                child = root.children[i] if i < len(root.children) else None
                pv, pv_visits, pv_edges = self._pv(child)
                infos.append(MoveInfo(
                    move=mv, visits=int(nv), winrate=winrate, prior=float(root.priors[i]),
                    lcb=min(max(winrate - 0.5 * float(sel.radius[i]), 0.0), 1.0),
                    pv=[mv, *pv],
                    pv_visits=[int(nv) if child is None else child.visits, *pv_visits],
                    pv_edge_visits=[int(nv), *pv_edges],
                    score_lead=float(rs * rec[i, F_LD]) if nv > 0 else None,
                    weight=float(sel.weights[i]), utility=float(rs * rec[i, puct.F_U]),
                ))
        agg = root.agg
        own = (None if root.own_sum is None
               else (root.own_sum / max(root.own_n, 1)).astype(np.float32))
        return SearchResult(
            moves=infos, root_winrate=0.5 * (1.0 + rs * agg[F_WL]), visits=root.visits,
            elapsed=time.perf_counter() - t0, ownership=own,
            playouts=root.visits - start_visits, score_lead=float(rs * agg[F_LD]),
        )

    # ------------------------------------------------------------------ choosing a move
    def choose_move(self, state: GameState, result: SearchResult) -> int:
        cfg = self.config
        if not result.moves:
            return PASS
        candidates = [m for m in result.moves if m.weight > 0] or result.moves
        # Pass safety under area scoring: after the opponent passed, passing ends the game,
        # scored with the dead stones off (as the referee does; dead by the search's ownership)
        if state.passes >= 1:
            mine = self.score_if_ended(state, result)
            if mine > 0:
                return PASS  # passing wins now
            non_pass = ([m for m in candidates if m.move != PASS]
                        or [m for m in result.moves if m.move != PASS])
            if mine < 0 and non_pass:
                candidates = non_pass  # never end a game we would lose by passing
            # a draw if it ended now: the search's choice
        if self._resigns(state, result):
            return RESIGN
        temperature = cfg.temperature_at(len(state.moves), state.size)
        weights = np.array([max(m.weight, 0.0) for m in candidates], dtype=np.float64)
        if temperature > 1e-4 and weights.max() > 0:
            probs = choice.tempered(weights, temperature)
            return candidates[int(self.rng.choice(len(candidates), p=probs))].move
        return max(candidates, key=lambda m: (m.weight, m.visits, m.winrate)).move

    @staticmethod
    def score_if_ended(state: GameState, result: SearchResult) -> float:
        """The side to move's area score if the game ended now, the stones the search's
        ownership sees as dead taken off (``kosumi.go.dead_stones``; all alive without one)."""
        own = None
        if result.ownership is not None:
            own = np.asarray(result.ownership, dtype=np.float64)
            own = own if state.to_move == BLACK else -own
        lead = state.area_score(dead_stones(state, own))
        return lead if state.to_move == BLACK else -lead

    def _resigns(self, state: GameState, result: SearchResult) -> bool:
        """Resign when the win rate has stayed below the threshold for ``resign_consecutive``
        of our moves in a row, out of the opening, with at least a few visits behind it."""
        cfg = self.config
        if cfg.resign_threshold <= 0:
            return False
        if result.root_winrate < cfg.resign_threshold and result.visits >= min(cfg.visits, 32):
            self._low_streak += 1
        else:
            self._low_streak = 0
        opening = math.ceil(cfg.resign_opening * state.size * state.size)
        return self._low_streak >= cfg.resign_consecutive and len(state.moves) >= opening

    def genmove(self, state: GameState, *, visits: int | None = None,
                time_limit: float | None = None) -> tuple[int, SearchResult]:
        result = self.search(state, visits=visits, time_limit=time_limit)
        return self.choose_move(state, result), result
