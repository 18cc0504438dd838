"""Search on hand-checked positions, with a network-free evaluator (uniform policy, area value).

A uniform policy says nothing, and two of KataGo's rules lean on a good one (the first-play
urgency blended with the node's own evaluation, the exploration scaled by how much the values
disagree): the tactics tests search with both off (``NO_NET``)."""

import numpy as np
import pytest
from helpers import LADDER_BROKEN, LADDER_WORKS, play_moves

from kosumi.engine import puct
from kosumi.engine.mcts import MCTS, SearchConfig
from kosumi.engine.puct import F_N, NF
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, RESIGN, WHITE, point_to_vertex, vertex_to_point
from kosumi.runtime.evaluator import Evaluation, Evaluator, UniformEvaluator

NO_NET = {"stdev_scale": 0.0, "fpu_parent_pow": -1.0}


def best_move(state, visits, batch=8, seed=0):
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=visits, batch=batch, seed=seed, **NO_NET))
    move, result = mcts.genmove(state)
    return point_to_vertex(move, state.size), result


@pytest.mark.parametrize("batch", [1, 8])
def test_captures_in_a_capturing_race(batch):
    # black A6-C6 has one liberty (D6), white A5-C5 one (D5): white to move must capture at D6
    rows = ["X X X . . .", "O O O . . .", "X X X . . .", ". . . . . .", ". . . . . .",
            ". . . . . ."]
    state = GameState.from_rows(rows, komi=0.5, to_move=WHITE)
    move, _ = best_move(state, 300, batch)
    assert move == "D6"


def test_saves_a_stone_in_atari():
    rows = [". . . . .", ". . O . .", ". O X O .", ". . . . .", ". . . . ."]
    state = GameState.from_rows(rows, komi=0.5, to_move=BLACK)
    move, result = best_move(state, 1500)
    assert move == "C2", [(point_to_vertex(m.move, 5), m.visits) for m in result.moves[:5]]


def test_visits_batches_and_statistics_are_consistent():
    state = GameState(7, 7.5)
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=200, batch=16, seed=1))
    result = mcts.search(state)
    assert result.visits == 200  # the root's own evaluation is the first visit (KataGo's count)
    assert sum(m.visits for m in result.moves) == 199
    assert all(0.0 <= m.winrate <= 1.0 for m in result.moves)
    assert result.moves == sorted(result.moves, key=lambda m: (-m.weight, -m.visits))
    # priors of the uniform evaluator: 49 points + pass
    assert all(abs(m.prior - 1 / 50) < 1e-6 for m in result.moves)


def test_tree_is_reused_after_a_move():
    state = GameState(7, 7.5)
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=300, batch=4, seed=2))
    move, result = mcts.genmove(state)
    child_visits = next(m.visits for m in result.moves if m.move == move)
    state.play(move)
    again = mcts.search(state, visits=child_visits)  # all visits already in the tree
    assert again.playouts == 0 and again.visits == child_visits


class PassLovingEvaluator(Evaluator):
    """Prefers pass strongly: checks the engine does not pass away a lost game."""

    def evaluate(self, states):
        out = []
        for s in states:
            pol = np.zeros(s.num_points + 1, dtype=np.float32)
            pol[:-1] = s.legal_mask() * 0.001
            pol[-1] = 1.0
            out.append(Evaluation(policy=pol / pol.sum(), value=0.5))
        return out


def test_never_passes_away_a_lost_game_and_passes_to_win():
    # white passed; black is behind on the board: passing would lose, so black must play
    losing = GameState(5, 0.5)
    losing.play(vertex_to_point("C3", 5), WHITE)
    losing.to_move = BLACK
    losing.play(PASS, WHITE)  # white passes, black to move
    mcts = MCTS(PassLovingEvaluator(), SearchConfig(visits=50, seed=0))
    move, _ = mcts.genmove(losing)
    assert move != PASS
    winning = GameState(5, 0.5)
    winning.play(vertex_to_point("C3", 5), BLACK)
    winning.play(PASS, WHITE)
    move, _ = MCTS(UniformEvaluator(), SearchConfig(visits=50, seed=0)).genmove(winning)
    assert move == PASS  # black owns the whole board; passing ends the game with a win


class WhiteOwnsAll(PassLovingEvaluator):
    """Loves passing and says White owns every point (Black's stones are all dead)."""

    def evaluate(self, states):
        out = super().evaluate(states)
        for s, ev in zip(states, out, strict=True):
            ev.ownership = np.full(s.num_points, 1.0 if s.to_move == WHITE else -1.0,
                                   dtype=np.float32)
            ev.value = 0.9 if s.to_move == WHITE else 0.1
        return out


def test_does_not_pass_into_a_loss_once_its_dead_stones_are_taken_off():
    """Black A5 B5, White E1, komi 0.5, White passed. As the stones stand (Tromp-Taylor) Black
    wins by 0.5 if it passes too; the referee takes dead stones off, and by the search's
    ownership Black's two are dead: Black must play on. White, in the mirror case, passes."""
    state = GameState.from_rows(["X X . . .", ". . . . .", ". . . . .", ". . . . .",
                                 ". . . . O"], komi=0.5, to_move=WHITE)
    state.play(PASS)
    assert state.area_score() == 0.5
    mcts = MCTS(WhiteOwnsAll(), SearchConfig(visits=30, seed=0))
    move, result = mcts.genmove(state)
    assert MCTS.score_if_ended(state, result) == -25.5 and move != PASS
    state = GameState.from_rows(["X X . . .", ". . . . .", ". . . . .", ". . . . .",
                                 ". . . . O"], komi=0.5, to_move=BLACK)
    state.play(PASS)  # Black passed, White to move: White wins by 25.5 with Black's stones off
    move, result = MCTS(WhiteOwnsAll(), SearchConfig(visits=30, seed=0)).genmove(state)
    assert MCTS.score_if_ended(state, result) == 25.5 and move == PASS


def test_two_passes_in_the_tree_do_not_end_the_game_under_chinese_rules():
    """KataGo's friendlyPassOk: under chinese rules the search looks past two passes (the net
    judges that position); under Tromp-Taylor two passes end the game in the tree."""
    for rules, terminal in (("chinese", False), ("tromp-taylor", True)):
        state = GameState(5, 0.5, rules)
        state.play(vertex_to_point("C3", 5))
        state.play(PASS)
        mcts = MCTS(PassLovingEvaluator(), SearchConfig(visits=20, seed=0))
        mcts.search(state)
        root = mcts._root
        child = root.children[root.moves.index(25)]  # Black's pass
        assert child is not None and child.terminal is terminal


LOST = [". O O O O", "O O O O O", "O O O O O", "O O O O O", "O O O O ."]


def test_resigns_only_below_the_threshold():
    state = GameState.from_rows(LOST, komi=0.5, to_move=BLACK)
    cfg = SearchConfig(visits=64, resign_threshold=0.1, resign_consecutive=1, resign_opening=0,
                       seed=0)
    move, result = MCTS(UniformEvaluator(), cfg).genmove(state)
    assert result.root_winrate < 0.1 and move == RESIGN
    cfg = SearchConfig(visits=64, resign_threshold=0.0, seed=0)
    move, _ = MCTS(UniformEvaluator(), cfg).genmove(state)
    assert move != RESIGN


def test_resigns_after_several_lost_moves_in_a_row_and_never_in_the_opening():
    """Black cannot win (White owns the board): with the default three moves in a row, the
    first two searches play on and the third resigns; an opening of 25 moves forbids it."""
    state = GameState.from_rows(LOST, komi=0.5, to_move=BLACK)
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=32, resign_threshold=0.05,
                                                 resign_opening=0, seed=0))
    assert [mcts.genmove(state)[0] == RESIGN for _ in range(3)] == [False, False, True]
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=32, resign_threshold=0.05,
                                                 resign_opening=1.0, seed=0))
    assert not any(mcts.genmove(state)[0] == RESIGN for _ in range(5))  # 5x5: 25 moves


def test_a_won_position_never_resigns():
    won = GameState.from_rows([o.replace("O", "X") for o in LOST], komi=0.5, to_move=BLACK)
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=32, resign_threshold=0.5,
                                                 resign_opening=0, resign_consecutive=1, seed=0))
    move, result = mcts.genmove(won)
    assert result.root_winrate > 0.5 and move != RESIGN


def test_root_noise_and_temperature_are_seeded():
    state = GameState(7, 7.5)
    cfg = SearchConfig(visits=64, dirichlet_alpha=0.3, temperature=1.0, temperature_moves=10,
                       seed=5)
    a = MCTS(UniformEvaluator(), cfg).genmove(state)[0]
    b = MCTS(UniformEvaluator(), cfg).genmove(state)[0]
    assert a == b


class FailingEvaluator(UniformEvaluator):
    """Raises on its ``fail_on``-th call (a crashed backend, say), works otherwise."""

    def __init__(self, fail_on: int):
        super().__init__()
        self.calls, self.fail_on = 0, fail_on

    def evaluate(self, states):
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("backend failure")
        return super().evaluate(states)


def test_a_failed_evaluation_leaves_a_tree_that_searches_on():
    """The leaves of a batch whose evaluation raised are undone (virtual loss, pending
    children), so the next search on the same position reaches its visits."""
    state = GameState(7, 7.5)
    mcts = MCTS(FailingEvaluator(fail_on=3), SearchConfig(visits=400, batch=8, seed=1))
    with pytest.raises(RuntimeError, match="backend failure"):
        mcts.search(state)
    result = mcts.search(state, time_limit=30.0)  # a stuck tree would spin until then
    assert result.visits == 400 and sum(m.visits for m in result.moves) == 399


def test_a_search_out_of_time_still_makes_one_playout():
    """With no time left (time_limit 0) the search still makes its first playouts: a move is
    chosen from visits, not a pass for want of any."""
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=0, batch=8, seed=1))
    _, result = mcts.genmove(GameState(9, 7.0), time_limit=0.0)
    assert result.visits >= 1 and result.moves


def _all_nodes(root):
    """Every node under ``root`` once (a transposition has two parents): the test's own walk."""
    seen, stack = {}, [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(c for c in node.children if c is not None)
    return list(seen.values())


def _bias_shares(root):
    """Each bucket's shares, summed over the nodes of the graph under ``root``."""
    shares = {}
    for node in _all_nodes(root):
        if node.bias is not None:
            d, w = shares.get(id(node.bias), (0.0, 0.0))
            shares[id(node.bias)] = (d + node.own[puct.O_BIAS_DELTA],
                                     w + node.own[puct.O_BIAS_WEIGHT])
    return shares


def test_the_subtree_bias_buckets_follow_the_tree():
    """Like KataGo's table: each bucket holds the sum of its nodes' shares; when the tree moves
    down a move, the discarded nodes take 80% of their shares back (subtreeValueBiasFreeProp)
    and only the buckets a kept node uses stay; a new game starts a new table; with the factor
    0 no bucket is made. The new root leaves its bucket as a discarded node does (KataGo's root
    is a copy without one)."""
    state = GameState(7, 7.5)
    state.play(vertex_to_point("D4", 7))
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=200, seed=1, **NO_NET))
    move, _ = mcts.genmove(state)
    old_root = mcts._root
    chosen = old_root.children[list(old_root.moves).index(move)]
    assert chosen.bias is not None and chosen.own[puct.O_BIAS_WEIGHT] > 0
    before = _bias_shares(old_root)
    buckets = {id(b): b for b in mcts._bias_table.values()}
    assert set(before) == set(buckets)
    for k, (d, w) in before.items():  # a bucket is the sum of its shares
        assert buckets[k][0] == pytest.approx(d, abs=1e-9)
        assert buckets[k][1] == pytest.approx(w, abs=1e-9)
    state.play(move)
    mcts._find_root(state)
    kept = _bias_shares(mcts._root)
    assert mcts._root is chosen and kept
    assert chosen.bias is None and chosen.bias_key is None
    assert chosen.own[puct.O_BIAS_DELTA] == chosen.own[puct.O_BIAS_WEIGHT] == 0.0
    assert {id(b) for b in mcts._bias_table.values()} == set(kept)
    assert len(kept) < len(before)  # buckets of the discarded moves only are gone
    for k, (d, w) in kept.items():
        gone_d, gone_w = before[k][0] - d, before[k][1] - w
        assert buckets[k][0] == pytest.approx(d + 0.2 * gone_d, abs=1e-9)
        assert buckets[k][1] == pytest.approx(w + 0.2 * gone_w, abs=1e-9)
    mcts.genmove(state)
    mcts.clear()
    assert mcts._bias_table == {}
    off = MCTS(UniformEvaluator(), SearchConfig(visits=50, seed=1, subtree_bias_factor=0.0))
    off.search(GameState(7, 7.5))
    assert off._bias_table == {}


class CountingEvaluator(UniformEvaluator):
    """UniformEvaluator that counts the positions it evaluates, and their keys."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[tuple] = []

    def evaluate(self, states):
        self.keys += [(bytes(s.board), s.to_move, s.ko, s.passes, len(s.moves)) for s in states]
        return super().evaluate(states)


def test_graph_search_shares_transpositions_and_evaluates_each_position_once():
    """On an open 5x5 board moves commute, so many positions are reached by two move orders.
    With graph search each position is evaluated once (the oracle: the evaluator's own log of
    boards), a node reached twice has two parents, each parent's record of it is an edge (no
    more visits than the node, the node's current values), and every node's visits are its
    own evaluation plus its edges'. Without it the same positions are evaluated again."""
    counts = {}
    for graph in (True, False):
        ev = CountingEvaluator()
        mcts = MCTS(ev, SearchConfig(visits=600, batch=1, seed=3, graph_search=graph, **NO_NET))
        mcts.search(GameState(5, 0.5))
        nodes = _all_nodes(mcts._root)
        counts[graph] = (len(ev.keys), len(set(ev.keys)))
        shared = [n for n in nodes if n.parents > 1]
        if not graph:
            assert not shared
            continue
        assert len(ev.keys) == len(set(ev.keys))  # no position evaluated twice
        assert shared
        for node in nodes:
            assert node.agg[F_N] == 1 + sum(node.st[k * NF + F_N]
                                             for k in range(len(node.st) // NF))
            for k, child in enumerate(node.children):
                if child is None or child.parents == 1 or k * NF >= len(node.st):
                    continue
                rec = node.st[k * NF: (k + 1) * NF]
                assert 0 < rec[F_N] <= child.agg[F_N]
                assert rec[puct.F_U] == pytest.approx(child.agg[puct.F_U], abs=1e-12)
                # KataGo's edge: the weight scaled by the edge's share of the node's visits,
                # the summed squared weights by its square (as KataGo's parent sums them)
                share = rec[F_N] / child.agg[F_N]
                assert rec[puct.F_W] == pytest.approx(child.agg[puct.F_W] * share)
                assert rec[puct.F_W2] == pytest.approx(child.agg[puct.F_W2] * share * share)
    assert counts[False][0] > counts[False][1]  # the tree evaluates transpositions again
    assert counts[True][0] < counts[False][0]


def test_graph_search_keeps_transpositions_through_tree_reuse():
    """After a move the transposition table holds exactly the kept nodes."""
    state = GameState(5, 0.5)
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=300, batch=1, seed=4, **NO_NET))
    move, _ = mcts.genmove(state)
    state.play(move)
    mcts._find_root(state)
    kept = _all_nodes(mcts._root)
    assert {id(n) for n in mcts._nodes.values()} <= {id(n) for n in kept}
    assert all(mcts._nodes[n.gkey] is n for n in kept if n.gkey is not None)
    assert mcts._nodes[mcts._graph_key(state)] is mcts._root


def _paths_to(root, target, limit=4):
    """Up to ``limit`` move sequences (policy indices) from ``root`` to ``target``."""
    out, stack = [], [(root, [])]
    while stack and len(out) < limit:
        node, moves = stack.pop()
        if node is target:
            out.append(moves)
            continue
        for k, child in enumerate(node.children):
            if child is not None:
                stack.append((child, [*moves, int(node.moves[k])]))
    return out


def test_a_transposition_keeps_each_path_history():
    """A shared node's state holds the move order that made it; reached as the game's root by
    the other order, the root takes the game's own history (the net's last-move planes), and a
    new leaf under a shared node is the path's own position. Under positional superko, where
    the path decides which moves are legal, there is no sharing."""
    state = GameState(5, 0.5)
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=800, batch=1, seed=3, **NO_NET))
    mcts.search(state)
    shared = [n for n in _all_nodes(mcts._root) if n.parents > 1 and n.expanded]
    node = max(shared, key=lambda n: n.agg[F_N])
    orders = [p for p in _paths_to(mcts._root, node) if
              [(c, m) for c, m in node.state.moves] !=
              [(BLACK if k % 2 == 0 else WHITE, m) for k, m in enumerate(p)]]
    assert orders, "a second move order to the shared node"
    game = state.copy()
    for m in orders[0]:
        game.play(m)
    root = mcts._find_root(game)
    assert root is node and root.state.moves == game.moves
    assert bytes(root.state.board) == bytes(game.board)
    leaf = MCTS._replay_path(mcts._root, [])
    assert leaf.moves == game.moves
    superko = MCTS(UniformEvaluator(), SearchConfig(visits=400, batch=1, seed=3, **NO_NET))
    superko.search(GameState(5, 0.5, "tromp-taylor"))
    assert not any(n.parents > 1 for n in _all_nodes(superko._root)) and not superko._nodes


class LastMoveEvaluator(UniformEvaluator):
    """Uniform policy; the side to move's win probability from the last move alone (what a
    net's history planes add to a position): an evaluation that tells move orders apart."""

    @staticmethod
    def win(state: GameState) -> float:
        return 0.2 + 0.6 * ((state.moves[-1][1] * 7919) % 101) / 100.0 if state.moves else 0.5

    def evaluate(self, states):
        return [Evaluation(policy=e.policy, value=self.win(s))
                for e, s in zip(super().evaluate(states), states, strict=True)]


def test_a_root_reached_by_another_move_order_is_evaluated_again():
    """A shared node becomes the game's root by the other move order: its own evaluation is
    made again with the game's history (KataGo re-evaluates a reused root), not kept from the
    order that made it; the oracle is the evaluator's value of the game's last move."""
    ev = LastMoveEvaluator()
    state = GameState(5, 0.5)
    mcts = MCTS(ev, SearchConfig(visits=800, batch=1, seed=3, **NO_NET))
    mcts.search(state)
    shared = [n for n in _all_nodes(mcts._root) if n.parents > 1 and n.expanded]
    node = max(shared, key=lambda n: n.agg[F_N])
    made_by = node.state.copy()
    orders = [p for p in _paths_to(mcts._root, node) if
              [(c, m) for c, m in node.state.moves] !=
              [(BLACK if k % 2 == 0 else WHITE, m) for k, m in enumerate(p)]]
    game = state.copy()
    for m in orders[0]:
        game.play(m)
    assert ev.win(game) != ev.win(made_by)  # the two orders end with different moves
    sign = 1.0 if game.to_move == WHITE else -1.0
    assert node.own[puct.O_WL] == pytest.approx(sign * (2 * ev.win(made_by) - 1))
    mcts.search(game, visits=node.visits + 1)
    assert mcts._root is node
    assert node.own[puct.O_WL] == pytest.approx(sign * (2 * ev.win(game) - 1))


def test_the_graph_holds_no_reference_cycles():
    """The search runs with the cyclic GC off: an old tree must go by reference counting alone
    once the tree moves down (parents are linked weakly)."""
    import gc
    import weakref

    state = GameState(5, 0.5)
    mcts = MCTS(UniformEvaluator(), SearchConfig(visits=200, batch=8, seed=5, **NO_NET))
    enabled = gc.isenabled()
    gc.disable()
    try:
        move, _ = mcts.genmove(state)
        old = weakref.ref(mcts._root)
        for _ in range(3):
            state.play(move)
            move, _ = mcts.genmove(state)
        assert old() is None
    finally:
        if enabled:
            gc.enable()


class LeadingEvaluator(Evaluator):
    """Uniform policy; White leads by 3 points per white stone more than Black's, with a
    spread of 6: the expected score moves with every move, so each search has its own score
    center."""

    def evaluate(self, states):
        out = []
        for s in states:
            board = np.frombuffer(s.boards[-1], np.uint8)
            white_lead = 3.0 * (int((board == WHITE).sum()) - int((board == BLACK).sum()))
            lead = white_lead if s.to_move == WHITE else -white_lead
            pol = np.append(s.legal_mask().astype(np.float32), 1.0)
            win = 0.5 + 0.4 * float(np.tanh(lead / 10.0))
            out.append(Evaluation(policy=(pol / pol.sum()).astype(np.float32), value=win,
                                  score_lead=lead,
                                  wdl=np.array([win, 1.0 - win, 0.0]), score_mean=lead,
                                  score_stdev=6.0))
        return out


def _expected_atan(mean, stdev, center, scale):
    """E[2/pi atan((X - center) / scale)], X ~ N(mean, stdev^2), by a fine numerical integral
    (the test's own, independent of the search's quadrature)."""
    x = np.linspace(mean - 8 * stdev, mean + 8 * stdev, 20001)
    w = np.exp(-0.5 * ((x - mean) / stdev) ** 2)
    return float((w * np.arctan((x - center) / scale)).sum() / w.sum() * 2 / np.pi)


def test_a_reused_tree_is_revalued_at_the_new_score_center():
    """KataGo recomputes the whole reused tree when a search starts (recursivelyRecomputeStats):
    the dynamic score utility is centred on the new root's expected score, so every node's own
    utility, and every record built from it, must be at that center, not the last search's --
    also the nodes this search does not visit again."""
    # the dead-ladder rule off: this 5x5 tree (seed 3) is the one with leaves to check
    cfg = SearchConfig(visits=400, batch=1, seed=3, ladder_escape_prior=1.0)
    mcts = MCTS(LeadingEvaluator(), cfg)
    state = GameState(5, 0.5)
    state.play(vertex_to_point("C3", 5))
    first = mcts.search(state)
    old_center = mcts._center
    move = first.moves[0].move
    state.play(move)
    child_visits = first.moves[0].visits
    again = mcts.search(state, visits=child_visits)  # no playout: only the start of a search
    assert again.playouts == 0
    center, n = mcts._center, state.size
    assert abs(center - old_center) > 1.0  # the center moved
    nodes = [x for x in _all_nodes(mcts._root) if x.expanded and not x.terminal]
    assert len(nodes) > 20
    biased_leaves = 0
    for node in nodes:
        wl, mean, sd = node.own[puct.O_WL], node.own[puct.O_SM], node.score_stdev
        want = (wl + cfg.static_score_utility * _expected_atan(mean, sd, 0.0, 2.0 * n)
                + cfg.dynamic_score_utility * _expected_atan(mean, sd, center, 0.75 * n))
        assert node.own[puct.O_U] == pytest.approx(want, abs=2e-4)
        if not any(node.st[k * NF + F_N] > 0 for k in range(len(node.st) // NF)):
            # a leaf is its own evaluation again, without its first visit's bias correction
            assert node.agg[puct.F_U] == pytest.approx(node.own[puct.O_U], abs=1e-12)
            biased_leaves += node.bias is not None and node.bias[puct.B_WEIGHT] > 0.001
        for k, child in enumerate(node.children):  # each record is its child's statistics
            if child is not None and (k + 1) * NF <= len(node.st) and node.st[k * NF + F_N] > 0:
                assert node.st[k * NF + puct.F_U] == pytest.approx(child.agg[puct.F_U])
    assert biased_leaves  # leaves whose bucket would correct them (the case KataGo undoes)


class _Favours(UniformEvaluator):
    """Uniform, except that one point takes most of the prior (a net that likes it)."""

    def __init__(self, point: int):
        super().__init__(value=0.5)
        self.point = point

    def evaluate(self, states):
        out = super().evaluate(states)
        for ev in out:
            if ev.policy[self.point] > 0:
                ev.policy[self.point] += 10.0
                ev.policy /= ev.policy.sum()
        return out


def test_a_dead_ladder_escape_is_not_searched_when_its_prior_is_scaled_to_zero():
    escape = vertex_to_point("E16", 19)  # white D16 in atari after D15; E16 runs the ladder

    def searched(moves, factor):
        state = play_moves([*moves, ("B", "D15")])
        cfg = SearchConfig(visits=40, batch=4, seed=1, ladder_escape_prior=factor, **NO_NET)
        _, result = MCTS(_Favours(escape), cfg).genmove(state)
        return {m.move: m.visits for m in result.moves}

    assert searched(LADDER_WORKS, 1.0).get(escape, 0) > 20  # the net's favourite, by default
    assert escape not in searched(LADDER_WORKS, 0.0)  # a dead run: never searched
    assert searched(LADDER_BROKEN, 0.0).get(escape, 0) > 20  # Q4 breaks it: a real escape


def test_the_ladder_escape_prior_must_be_a_fraction():
    with pytest.raises(KosumiError, match="ladder_escape_prior"):
        SearchConfig(ladder_escape_prior=1.5)
