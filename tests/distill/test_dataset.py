"""Labels -> training arrays: replay once, encode, cache, augment, split, batch order.

The random games, the in-memory label store and the synthetic teacher's label folder are in
helpers.py (the trainer's and DDP's tests use them too).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import (
    FakeRecord,
    SyntheticTeacher,
    fake_store,
    game_positions,
    make_label_folder,
    oracle_chain_liberties,
    random_game,
    synthetic_outputs,
)

from kosumi.distill import dataset as D
from kosumi.distill.positions import Position
from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, WHITE, transform_point
from kosumi.nets.features import get_feature_set

torch.set_num_threads(1)


# ============================================================================ replay
def _tricky_positions() -> list[Position]:
    """Shared openings, branches at several depths, duplicates, passes, setup, other komi."""
    rng = random.Random(5)
    base = random_game(9, 30, rng)
    positions = []
    for t in (0, 3, 3, 10, 17, 30):
        positions.append(Position(9, 7.0, "chinese", (), BLACK, tuple(base[:t]), "sgf:a"))
    # branches off the main line at depths 5 and 12 (continue from those states)
    for depth, seed in ((5, 11), (12, 12), (12, 13)):
        st = GameState(9, 7.0)
        for c, p in base[:depth]:
            st.play(p, c)
        branch = base[:depth] + random_game(9, 8, random.Random(seed), start=st)
        for t in (depth + 1, depth + 4, depth + 8):
            positions.append(Position(9, 7.0, "chinese", (), BLACK, tuple(branch[:t]),
                                      f"sgf:b{depth}-{seed}"))
    # a handicap game (setup stones, White first) and a different komi with the same moves
    setup = ((BLACK, 20), (BLACK, 60))
    st = GameState(9, 0.5)
    st.place_setup(BLACK, [20, 60])
    hmoves = random_game(9, 12, random.Random(3), start=st)
    for t in (0, 6, 12):
        positions.append(Position(9, 0.5, "chinese", setup, WHITE, tuple(hmoves[:t]), "sgf:h"))
    positions.append(Position(9, 6.5, "chinese", (), BLACK, tuple(base[:10]), "sgf:k"))
    rng.shuffle(positions)
    return positions


def test_replay_matches_to_state_and_plays_each_move_about_once(monkeypatch):
    positions = _tricky_positions()
    calls = {"n": 0}
    real_play = GameState.play

    def counting_play(self, p, color=None, trusted=False):
        calls["n"] += 1
        return real_play(self, p, color, trusted)

    seen = {}
    monkeypatch.setattr(GameState, "play", counting_play)
    for i, state in D.replay_positions(positions):
        assert i not in seen
        seen[i] = (bytes(state.board), list(state.moves), state.to_move, state.ko,
                   list(state.boards), state.komi, list(state.setup))
    replayed_moves = calls["n"]
    monkeypatch.setattr(GameState, "play", real_play)
    assert sorted(seen) == list(range(len(positions)))
    for i, p in enumerate(positions):
        ref = p.to_state()
        assert seen[i] == (bytes(ref.board), list(ref.moves), ref.to_move, ref.ko,
                           list(ref.boards), ref.komi, list(ref.setup)), p.source
    # distinct trie edges: the moves of the union of all move sequences, per root
    edges = {(D._root_key(p), p.moves[:t]) for p in positions for t in range(1, len(p.moves) + 1)}
    naive = sum(len(p.moves) for p in positions)
    assert replayed_moves <= len(edges) + 10 < naive


def boards_of(p: Position) -> list[bytes]:
    """The boards of a position's game, oldest first (after the setup, then after each move),
    replayed move by move here: the oracle for the history planes."""
    state = GameState(p.board_size, p.komi, p.rules)
    for color, points in itertools.groupby(p.setup, key=lambda cp: cp[0]):
        state.place_setup(color, [q for _, q in points])
    boards = [bytes(state.board)]
    first = p.to_move_at_start
    for k, (color, q) in enumerate(p.moves):
        assert color == (first if k % 2 == 0 else 3 - first)
        state.play(q, color)
        boards.append(bytes(state.board))
    return boards


def side_to_move(p: Position) -> int:
    return p.to_move_at_start if len(p.moves) % 2 == 0 else 3 - p.to_move_at_start


def test_encoded_lz18_planes_are_the_last_eight_boards(tmp_path):
    """lz18 planes of ``encode_records`` against the game's boards replayed here: own and
    opponent stones of the last 8 boards (newest first, empty before the game's start), and
    the side to move; targets kept in record order, games by source."""
    positions = _tricky_positions()
    store = fake_store(tmp_path / "labels", positions)
    data = D.encode_records(store.records(9), "lz18", 9)
    assert data.planes.dtype == np.uint8 and data.planes.shape == (len(positions), 18, 9, 9)
    assert data.globals is None
    for i, p in enumerate(positions):
        me = side_to_move(p)
        history = boards_of(p)[::-1][:8]
        history += [bytes(81)] * (8 - len(history))
        for t, board in enumerate(history):
            b = np.frombuffer(board, np.uint8).reshape(9, 9)
            np.testing.assert_array_equal(data.planes[i, t], b == me, err_msg=f"{i} T-{t}")
            np.testing.assert_array_equal(data.planes[i, 8 + t], b == 3 - me)
        assert (data.planes[i, 16] == (me == BLACK)).all()
        assert (data.planes[i, 17] == (me == WHITE)).all()
    for i, r in enumerate(store._records):
        np.testing.assert_allclose(data.policy[i], r.policy)
        assert data.game_keys[i] == f"9:{r.position.source}"
        assert data.has_score[i] and data.score[i] == pytest.approx(r.score_lead)
        np.testing.assert_array_equal(data.ownership[i], r.ownership)


def test_encoded_basic_planes_by_the_rules(tmp_path):
    """basic planes and globals of ``encode_records`` against what the position says: stones
    from the replayed board, liberties from a flood fill (helpers.oracle_chain_liberties), the
    last four moves and the last pass from the move list, komi from the side to move's view."""
    positions = _tricky_positions()
    data = D.encode_records(fake_store(tmp_path / "labels", positions).records(9), "basic", 9)
    assert data.planes.dtype == np.uint8 and data.planes.shape == (len(positions), 11, 9, 9)
    for i, p in enumerate(positions):
        me = side_to_move(p)
        board = boards_of(p)[-1]
        b = np.frombuffer(board, np.uint8)
        planes = data.planes[i].reshape(11, 81)
        assert (planes[0] == 1).all()
        np.testing.assert_array_equal(planes[1], b == me)
        np.testing.assert_array_equal(planes[2], b == 3 - me)
        libs = np.array(oracle_chain_liberties(board, 9))
        for k, want in enumerate([libs == 1, libs == 2, libs >= 3]):
            np.testing.assert_array_equal(planes[3 + k], (b > 0) & want, err_msg=f"{i} {k}")
        for k in range(4):
            want = np.zeros(81, bool)
            if len(p.moves) > k and p.moves[-1 - k][1] != PASS:
                want[p.moves[-1 - k][1]] = True
            np.testing.assert_array_equal(planes[7 + k], want, err_msg=f"{i} move -{k + 1}")
        komi = p.komi if me == WHITE else -p.komi
        last_pass = bool(p.moves) and p.moves[-1][1] == PASS
        np.testing.assert_allclose(data.globals[i], [me == BLACK, me == WHITE, komi / 15,
                                                     last_pass], rtol=1e-6)


def test_positions_without_source_are_grouped_by_game_prefix_chains(tmp_path):
    a = game_positions(7, 1, 10, seed=1, prefix="a")
    b = game_positions(7, 1, 10, seed=2, prefix="b")
    positions = [replace(p, source="") for p in a[2:] + b[2:]]  # skip shared early prefixes
    data = D.encode_records(fake_store(tmp_path / "l", positions).records(7), "basic", 7)
    keys = data.game_keys
    assert len(set(keys[: len(a) - 2])) == 1 and len(set(keys[len(a) - 2 :])) == 1
    assert keys[0] != keys[-1]


def test_bad_labels_are_clear_errors(tmp_path):
    pos = game_positions(7, 1, 4, seed=1)[2]
    bad_policy = FakeRecord(pos, np.ones(49, np.float32), np.array([1, 0, 0], np.float32))
    with pytest.raises(KosumiError, match=r"sgf:g0.*policy has 49 entries.*needs 50"):
        D.encode_records([bad_policy], "basic", 7)
    neg = FakeRecord(pos, -np.ones(50, np.float32), np.array([1, 0, 0], np.float32))
    with pytest.raises(KosumiError, match="not a probability distribution"):
        D.encode_records([neg], "basic", 7)
    bad_move = replace(pos, moves=(*pos.moves, (pos.to_move, pos.moves[0][1])))
    rec = FakeRecord(bad_move, np.full(50, 1 / 50, np.float32), np.array([1, 0, 0], np.float32))
    with pytest.raises(KosumiError, match="sgf:g0"):
        D.encode_records([rec], "basic", 7)


# ============================================================================ cache
def test_cache_is_written_reused_and_keyed(tmp_path):
    positions = game_positions(7, 3, 12, seed=4) + game_positions(9, 2, 8, seed=5)
    store = fake_store(tmp_path / "labels", positions)
    cache = tmp_path / "cache"
    first = D.load_dataset(store, "basic", cache_dir=cache)
    assert store.reads == 2 and sorted(first.sizes) == [7, 9]
    files = sorted(cache.glob("*.npz"))
    assert len(files) == 2
    with np.load(files[0], allow_pickle=False) as npz:  # plain arrays, no pickle needed
        assert "planes" in npz.files
    second = D.load_dataset(store, "basic", cache_dir=cache)
    assert store.reads == 2  # nothing re-encoded
    for n in (7, 9):
        for k, v in first.sizes[n].to_arrays().items():
            np.testing.assert_array_equal(v, second.sizes[n].to_arrays()[k])
    # read back memory-mapped (training reads what it samples; DDP ranks share the pages),
    # read-only, and equal to what numpy's own reader finds in the file
    planes = second.sizes[7].planes
    assert isinstance(planes, np.memmap) and not planes.flags.writeable
    with pytest.raises(ValueError):
        planes[0, 0, 0, 0] = 1
    path7 = next(f for f in files if np.load(f)["planes"].shape[-1] == 7)
    with np.load(path7, allow_pickle=False) as npz:
        for k in ("planes", "policy", "value", "ownership", "games"):
            np.testing.assert_array_equal(npz[k], getattr(second.sizes[7], k))
    D.load_dataset(store, "lz18", board_sizes=[7], cache_dir=cache)  # other feature set
    assert store.reads == 3 and len(list(cache.glob("*.npz"))) == 3
    # changed label content -> other hash -> encoded again
    (store.path / "manifest.json").write_text("changed")
    D.load_dataset(store, "basic", board_sizes=[9], cache_dir=cache)
    assert store.reads == 4
    # a damaged cache file is rebuilt, not trusted
    files[0].write_bytes(b"garbage")
    again = D.load_dataset(store, "basic", cache_dir=cache, content_hash=first.content_hash)
    assert len(again.sizes[7]) == len(first.sizes[7])
    for f in files:  # and so is a truncated one (a zip without its central directory)
        good = f.read_bytes()
        f.write_bytes(good[: len(good) // 2])
    again = D.load_dataset(store, "basic", cache_dir=cache, content_hash=first.content_hash)
    assert [len(again.sizes[n]) for n in (7, 9)] == [len(first.sizes[n]) for n in (7, 9)]


# ============================================================================ augmentation
@pytest.mark.parametrize("sym", range(8))
def test_augment_moves_a_marked_point_where_the_symmetry_sends_it(sym):
    n, p = 7, 3 * 7 + 1  # an asymmetric point (x=1, y=3)
    planes = torch.zeros(1, 3, n, n)
    planes[0, 1].view(-1)[p] = 1.0
    policy = torch.zeros(1, n * n + 1)
    policy[0, p] = 0.75
    policy[0, n * n] = 0.25  # pass
    own = torch.zeros(1, n * n)
    own[0, p] = -1.0
    ap, apol, aown = D.augment(planes, policy, own, np.array([sym]), n)
    q = transform_point(p, n, sym)
    assert int(ap[0, 1].reshape(-1).argmax()) == q and float(ap.sum()) == 1.0
    assert int(apol[0, : n * n].argmax()) == q and float(apol[0, q]) == 0.75
    assert float(apol[0, n * n]) == 0.25
    assert int(aown[0].argmin()) == q


@pytest.mark.parametrize("sym", range(8))
def test_augmented_features_equal_features_of_the_transformed_game(sym):
    """Oracle: replaying the game with every move transformed gives the augmented planes."""
    n = 9
    moves = random_game(n, 40, random.Random(9), pass_prob=0.0)
    orig, tran = GameState(n, 7.0), GameState(n, 7.0)
    for c, p in moves:
        orig.play(p, c)
        tran.play(transform_point(p, n, sym), c)
    fs = get_feature_set("basic")
    planes, _ = fs.encode([orig])
    want, _ = fs.encode([tran])
    pol = np.zeros((1, n * n + 1), np.float32)
    pol[0, moves[-3][1]] = 1.0
    ap, apol, _ = D.augment(torch.from_numpy(planes), torch.from_numpy(pol), None,
                            np.array([sym]), n)
    np.testing.assert_array_equal(ap.numpy(), want)
    assert int(apol[0].argmax()) == transform_point(moves[-3][1], n, sym)


# ============================================================================ split / order
def test_split_keeps_games_whole_and_is_deterministic(tmp_path):
    positions = game_positions(7, 20, 6, seed=2)
    data = D.encode_records(fake_store(tmp_path / "l", positions).records(7), "basic", 7)
    ds = D.DistillDataset("basic", "x", {7: data})
    train, val = D.split_by_game(ds, 0.25, seed=3)
    keys = data.game_keys
    assert set(keys[train[7]]).isdisjoint(set(keys[val[7]]))
    assert len(set(keys[val[7]])) == 5 and len(train[7]) + len(val[7]) == len(data)
    _, val2 = D.split_by_game(ds, 0.25, seed=3)
    np.testing.assert_array_equal(val[7], val2[7])
    _, val3 = D.split_by_game(ds, 0.25, seed=4)
    assert not np.array_equal(val[7], val3[7])
    _, none = D.split_by_game(ds, 0.0, seed=3)
    assert len(none[7]) == 0
    # every board size is split on its own: both sides get games of each size
    small = D.encode_records(fake_store(tmp_path / "m", game_positions(9, 3, 4, seed=5))
                             .records(9), "basic", 9)
    both = D.DistillDataset("basic", "x", {7: data, 9: small})
    tr, va = D.split_by_game(both, 0.25, seed=3)
    assert len(set(small.game_keys[va[9]])) == 1 and len(set(small.game_keys[tr[9]])) == 2
    np.testing.assert_array_equal(va[7], val[7])


def test_games_of_one_sgf_collection_are_split_as_games(tmp_path):
    """20 games in ONE collection file are 20 games for the held-out split, not one."""
    from kosumi.distill.positions import PositionStore
    from kosumi.distill.sgf_import import import_sgf
    from kosumi.go.sgf import state_to_sgf

    rng = random.Random(8)
    trees = []
    for _ in range(20):
        s = GameState(7, 7.0)
        for color, p in random_game(7, 10, rng, pass_prob=0.0):
            s.play(p, color)
        trees.append(state_to_sgf(s).strip())
    (tmp_path / "collection.sgf").write_bytes(b"\n".join(trees) + b"\n")
    import_sgf([tmp_path / "collection.sgf"], tmp_path / "pos")
    store = PositionStore(tmp_path / "pos")
    positions = [p for entry in store.shards for _, p in store.read_shard(entry)]
    data = D.encode_records(fake_store(tmp_path / "l", positions).records(7), "basic", 7)
    train, val = D.split_by_game(D.DistillDataset("basic", "x", {7: data}), 0.25, seed=1)
    assert len(set(data.game_keys[val[7]])) == 5 and len(set(data.game_keys[train[7]])) == 15


def test_batch_plan_is_a_pure_function_of_seed_and_step():
    counts = {9: 100, 19: 37}
    plan = D.BatchPlan(counts, 16, seed=7)
    assert plan.batches_per_epoch == 7 + 3
    forward = [plan.batch(s) for s in range(25)]
    other = D.BatchPlan(counts, 16, seed=7)
    for s in (24, 3, 17, 0, 11):  # any order, a fresh object: the same batches
        size, idx, syms = other.batch(s)
        assert size == forward[s][0]
        np.testing.assert_array_equal(idx, forward[s][1])
        np.testing.assert_array_equal(syms, forward[s][2])
    # one epoch visits every sample of every size
    seen = {9: set(), 19: set()}
    for size, idx, syms in forward[:10]:
        assert len(idx) == 16 and idx.max() < counts[size] and 0 <= syms.min() <= syms.max() < 8
        seen[size].update(idx.tolist())
    assert seen == {9: set(range(100)), 19: set(range(37))}
    different = D.BatchPlan(counts, 16, seed=8).batch(0)
    assert not np.array_equal(different[1], forward[0][1]) or different[0] != forward[0][0]


def test_batch_plan_size_weights():
    """Oracle: counting. A weight of 1 is the plain plan, batch for batch; weight 3 on 19x19
    makes ceil(3 * 37 / 16) = 7 of its batches an epoch, every sample three or four times (three
    full orders, cut short); weight 0.5 on 9x9 makes ceil(50 / 16) = 4, all distinct samples."""
    counts = {9: 100, 19: 37}
    plain = D.BatchPlan(counts, 16, seed=7)
    same = D.BatchPlan(counts, 16, seed=7, weights={9: 1.0, 19: 1.0})
    for s in range(12):
        a, b = plain.batch(s), same.batch(s)
        assert a[0] == b[0] and np.array_equal(a[1], b[1])
    plan = D.BatchPlan(counts, 16, seed=7, weights={9: 0.5, 19: 3.0})
    assert plan.per_size == {9: 4, 19: 7} and plan.batches_per_epoch == 11
    epoch = [plan.batch(s) for s in range(11)]
    n19 = np.concatenate([idx for size, idx, _ in epoch if size == 19])
    n9 = np.concatenate([idx for size, idx, _ in epoch if size == 9])
    assert len(n19) == 112 and set(np.bincount(n19, minlength=37).tolist()) <= {3, 4}
    assert len(n9) == 64 and len(set(n9.tolist())) == 64 and n9.max() < 100


def test_real_label_folder_round_trip(tmp_path):
    from kosumi.distill.labels import LabelStore

    lab, _ = make_label_folder(tmp_path, size=7, games=3, length=8)
    store = LabelStore(lab)
    data = D.load_dataset(store, "basic", cache_dir=tmp_path / "cache")
    d = data.sizes[7]
    assert len(d) == len(store) and d.has_ownership.all() and d.has_score.all()
    # every stored target is the synthetic teacher's on the replayed position
    recs = list(store.records(7))
    order = {r.position: i for i, r in enumerate(recs)}
    for r in recs[:20]:
        i = order[r.position]
        pol, v, lead, _ = synthetic_outputs(r.position.to_state())
        np.testing.assert_allclose(d.policy[i], pol, atol=1e-6)
        assert d.value[i][0] == pytest.approx(v, abs=1e-6) and d.score[i] == pytest.approx(lead)


# ============================================================================ streamed encoding
def _sharded_label_folder(root: Path, games: int, chunk: int, size: int = 7, length: int = 24,
                          seed: int = 1) -> Path:
    """A real label folder of ``games`` random games in label shards of ``chunk`` positions."""
    from kosumi.distill.labels import label_positions
    from kosumi.distill.positions import write_positions

    write_positions(root / "positions", game_positions(size, games, length, seed, every=1))
    info = {"name": "teacher.bin", "format": "synthetic", "sha256": "cd" * 32, "symmetries": 1}
    label_positions(SyntheticTeacher(), root / "positions", root / "labels", teacher_info=info,
                    batch=512, chunk_size=chunk)
    return root / "labels"


@pytest.fixture(scope="module")
def sharded_folders(tmp_path_factory) -> dict[int, Path]:
    """Label folders of 12 and 48 games (about 290 and 1150 7x7 positions), shards of 64."""
    root = tmp_path_factory.mktemp("sharded")
    return {g: _sharded_label_folder(root / f"g{g}", games=g, chunk=64) for g in (12, 48)}


def _cache_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_streamed_cache_equals_the_label_shards_and_the_in_memory_encoding(
        tmp_path, monkeypatch, sharded_folders):
    """Oracles: the label shards' own arrays, read with ``LabelStore.read_shard`` (targets);
    each position encoded on its own from ``Position.to_state`` (planes, no replay); and the
    whole size encoded in memory as one group (every array, game indices included)."""
    from kosumi.distill.labels import LabelStore

    monkeypatch.setattr(D, "GROUP_ROWS", 50)  # groups cut across label shards and games
    store = LabelStore(sharded_folders[48])
    calls = []
    data = D.load_dataset(store, "basic", cache_dir=tmp_path / "cache",
                          progress=lambda done, total: calls.append((done, total))).sizes[7]
    assert isinstance(data.planes, np.memmap) and len(data) == store.count(7) > 20 * 50
    assert _cache_files(tmp_path / "cache") == [D.cache_path(
        tmp_path / "cache", store.content_hash(), "basic", 7).name]  # no temporary leftovers
    assert calls[-1] == (len(data), len(data)) and [c[0] for c in calls] == sorted(
        c[0] for c in calls)
    row = 0
    fs = get_feature_set("basic")
    for entry in store.dir.shards:
        shard = store.read_shard(entry)
        rows = slice(row, row + len(shard))
        np.testing.assert_allclose(data.policy[rows], shard.policy, rtol=1e-6)
        np.testing.assert_allclose(data.value[rows], shard.value, rtol=1e-6)
        np.testing.assert_array_equal(data.score[rows], shard.score_lead)
        np.testing.assert_array_equal(data.ownership[rows], shard.ownership)
        assert list(data.game_keys[rows]) == [f"7:{p.source}" for p in shard.positions]
        for i in range(0, len(shard), 7):
            planes, _ = fs.encode([shard.positions[i].to_state()])
            np.testing.assert_array_equal(data.planes[row + i], planes[0])
        row += len(shard)
    assert row == len(data)
    whole = D.encode_records(store.records(7), "basic", 7)
    for k, v in whole.to_arrays().items():
        np.testing.assert_array_equal(getattr(data, k), v, err_msg=k)


def _peak_traced(fn) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_of_encoding_does_not_grow_with_the_folder(tmp_path, monkeypatch,
                                                               sharded_folders):
    """4x the positions (4x the label shards and groups): about the same peak of traced
    allocations (numpy's included), where holding the folder would take 4x."""
    from kosumi.distill import dataset_cache
    from kosumi.distill.labels import LabelStore

    monkeypatch.setattr(D, "GROUP_ROWS", 64)
    monkeypatch.setattr(dataset_cache, "COPY_BLOCK", 1 << 14)
    D.load_dataset(LabelStore(sharded_folders[12]), "basic", cache_dir=tmp_path / "warm-up")
    peaks, counts = {}, {}
    for games, folder in sharded_folders.items():
        store = LabelStore(folder)
        counts[games] = store.count(7)
        peaks[games] = _peak_traced(lambda s=store, g=games: D.load_dataset(
            s, "basic", cache_dir=tmp_path / f"cache{g}"))
    assert counts[48] > 3.5 * counts[12]
    assert peaks[48] < 1.5 * peaks[12], (peaks, counts)


class _Interrupting:
    """A label store whose record ``bad`` has a broken policy (or, with ``stop``, whose
    progress callback raises KeyboardInterrupt after ``bad`` positions)."""

    def __init__(self, store, bad: int):
        self.store, self.bad = store, bad
        self.path = store.path

    def board_sizes(self):
        return self.store.board_sizes()

    def count(self, board_size=None):
        return self.store.count(board_size)

    def records(self, board_size=None):
        for k, rec in enumerate(self.store.records(board_size)):
            yield replace(rec, policy=np.full_like(rec.policy, np.nan)) if k == self.bad else rec


def test_an_interrupted_encode_leaves_no_cache_entry_and_the_next_run_rebuilds(
        tmp_path, monkeypatch, sharded_folders):
    from kosumi.distill.labels import LabelStore

    monkeypatch.setattr(D, "GROUP_ROWS", 64)
    store = LabelStore(sharded_folders[12])
    cache = tmp_path / "cache"
    source = list(store.records(7))[100].position.source  # in the second group
    with pytest.raises(KosumiError) as err:
        D.load_dataset(_Interrupting(store, bad=100), "basic", cache_dir=cache)
    assert str(err.value) == (f"{store.path}: record 100 ({source}): policy is not a "
                              "probability distribution")
    assert _cache_files(cache) == []  # no entry, no temporary folder

    def stop(done, total):
        if done > 150:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        D.load_dataset(store, "basic", cache_dir=cache, progress=stop)
    assert _cache_files(cache) == []
    data = D.load_dataset(store, "basic", cache_dir=cache).sizes[7]
    assert len(data) == store.count(7) and isinstance(data.planes, np.memmap)
    assert len(_cache_files(cache)) == 1
    # a half-written entry (as a killed copy would leave under the final name) is rebuilt
    entry = cache / _cache_files(cache)[0]
    half = entry.read_bytes()[: entry.stat().st_size // 3]
    entry.unlink()  # a new file: ``data`` still maps the old one
    entry.write_bytes(half)
    again = D.load_dataset(store, "basic", cache_dir=cache).sizes[7]
    np.testing.assert_array_equal(again.planes, data.planes)


def test_sourceless_games_cut_by_groups_stay_one_game_each(tmp_path, monkeypatch):
    """Positions without a source, stored game after game, encoded in groups of 7: a game that
    straddles groups keeps one game key (so the split keeps it whole), as in memory."""
    games = [game_positions(7, 1, 12, seed=s, prefix=f"x{s}")[2:] for s in range(6)]
    truth = [g for g, ps in enumerate(games) for _ in ps]
    positions = [replace(p, source="") for ps in games for p in ps]
    monkeypatch.setattr(D, "GROUP_ROWS", 7)
    streamed = D.load_dataset(fake_store(tmp_path / "l", positions), "basic",
                              cache_dir=tmp_path / "cache").sizes[7]
    whole = D.encode_records(fake_store(tmp_path / "m", positions).records(7), "basic", 7)

    def partition(keys):
        return sorted(sorted(np.flatnonzero(keys == k).tolist()) for k in set(keys))

    want = partition(np.array(truth))
    assert partition(streamed.game_keys) == partition(whole.game_keys) == want


def test_an_unwritable_cache_folder_encodes_in_memory(tmp_path, sharded_folders):
    from kosumi.distill.labels import LabelStore

    store = LabelStore(sharded_folders[12])
    (tmp_path / "not-a-folder").write_text("")
    data = D.load_dataset(store, "basic", cache_dir=tmp_path / "not-a-folder").sizes[7]
    assert not isinstance(data.planes, np.memmap)
    want = D.load_dataset(store, "basic", cache_dir=tmp_path / "cache").sizes[7]
    for k, v in want.to_arrays().items():
        np.testing.assert_array_equal(getattr(data, k), v, err_msg=k)


def test_one_teachers_records_of_a_mixed_folder_report_their_total(tmp_path):
    """The progress total of a ``TeacherFilter`` is that teacher's count, not the folder's."""
    from kosumi.distill.labels import LabelStore, label_positions
    from kosumi.distill.positions import write_positions
    from kosumi.distill.train_state import TeacherFilter

    for t, games in ((0, 3), (1, 2)):
        write_positions(tmp_path / f"pos{t}", game_positions(7, games, 8, seed=10 + t))
        info = {"name": f"t{t}", "format": "synthetic", "sha256": f"{t}" * 64, "symmetries": 1}
        label_positions(SyntheticTeacher(), tmp_path / f"pos{t}", tmp_path / "labels",
                        teacher_info=info, allow_mixed_teachers=True)
    store = LabelStore(tmp_path / "labels")
    second = TeacherFilter(store, 1)
    assert 0 < second.count(7) == store.count(7, teacher=1) < store.count(7)
    calls = []
    data = D.load_dataset(second, "basic", cache_dir=tmp_path / "cache",
                          content_hash="x" * 64, progress=lambda *a: calls.append(a))
    assert calls[-1] == (second.count(7), second.count(7)) == (len(data.sizes[7]),) * 2
