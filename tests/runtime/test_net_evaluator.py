"""NetEvaluator over a backend (kosumi.runtime.net_evaluator): masking, values, symmetries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import apply_symmetry, transform_point, vertex_to_point
from kosumi.nets.checkpoint import save_checkpoint
from kosumi.nets.config import NetConfig
from kosumi.nets.resnet import KosumiNet
from kosumi.runtime import (
    Backend,
    NetEvaluator,
    load_evaluator,
)

torch.set_num_threads(1)


def transformed(s: GameState, sym: int) -> GameState:
    """The same game with every move transformed by symmetry ``sym``."""
    t = GameState(s.size, s.komi)
    for color, p in s.moves:
        t.play(transform_point(p, s.size, sym), color)
    return t


@pytest.fixture
def model_file(plain_b1c8):
    return plain_b1c8


@pytest.fixture(scope="module")
def lz_model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "lz.kosumi"
    cfg = NetConfig(arch="b1c8", features="lz18", head="lz", board_sizes=[19], value="tanh",
                    score_lead=False, ownership=False)
    save_checkpoint(path, KosumiNet.random(cfg, 6))
    return path


# ----------------------------------------------------------------------------- reference oracle
def test_policy_masks_exactly_the_illegal_points_of_katago(reference_positions, reference_states,
                                                           model_file, lz_model_file):
    """KataGo printed NAN (null) exactly at illegal points: kosumi's policy must be 0 there and
    only there, sum to 1, and the value must be a probability."""
    ev = load_evaluator(model_file, cache=False)
    lz = load_evaluator(lz_model_file, cache=False)
    states = reference_states
    evals = ev.evaluate(states)  # one mixed 9x9/19x19 batch
    lz_idx = [i for i, s in enumerate(states) if s.size == 19]
    lz_evals = dict(zip(lz_idx, lz.evaluate([states[i] for i in lz_idx]), strict=True))
    assert len(states) == 300
    for i, (rec, s, e) in enumerate(zip(reference_positions, states, evals, strict=True)):
        n2 = s.num_points
        illegal = np.array([v is None for v in rec["katago_raw_nn"]["policy"]])
        assert illegal.shape == (n2,)
        for evaluation in [e] + ([lz_evals[i]] if i in lz_evals else []):
            pol = evaluation.policy
            assert pol.shape == (n2 + 1,) and pol.dtype == np.float32
            assert np.all(pol[:n2][illegal] == 0.0), rec["id"]
            assert np.all(pol[:n2][~illegal] > 0.0), rec["id"]
            assert pol[n2] > 0.0
            assert abs(float(pol.sum(dtype=np.float64)) - 1.0) < 1e-5
            assert 0.0 <= evaluation.value <= 1.0
        assert e.ownership is not None and e.ownership.shape == (n2,)
        assert np.all(np.abs(e.ownership) <= 1.0) and e.score_lead is not None


# ----------------------------------------------------------------------------- symmetries
@pytest.mark.parametrize("size,moves", [
    (9, "E5 C3 G7 C7 G3 D4 F6 B2 pass"),
    (19, "D4 Q16 C17 R3 K10 pass F3"),
])
def test_eight_symmetry_average_is_equivariant(model_file, size, moves):
    s = GameState(size, 7.5)
    for v in moves.split():
        s.play(vertex_to_point(v, size))
    ev8 = load_evaluator(model_file, symmetries=8, cache=False)
    ev1 = load_evaluator(model_file, symmetries=1, cache=False)
    base8, base1 = ev8.evaluate_one(s), ev1.evaluate_one(s)
    not_equivariant = 0
    for sym in range(1, 8):
        t = transformed(s, sym)
        e8 = ev8.evaluate_one(t)
        np.testing.assert_allclose(e8.policy, apply_symmetry(base8.policy, size, sym),
                                   atol=2e-6)
        np.testing.assert_allclose(e8.ownership, apply_symmetry(base8.ownership, size, sym),
                                   atol=2e-6)
        assert abs(e8.value - base8.value) < 1e-6
        assert abs(e8.score_lead - base8.score_lead) < 1e-4
        e1 = ev1.evaluate_one(t)
        not_equivariant += not np.allclose(e1.policy, apply_symmetry(base1.policy, size, sym),
                                           atol=1e-4)
    assert not_equivariant > 0  # the test can fail: a single symmetry is not equivariant


@pytest.mark.parametrize("sym", [1, 4, 6])
def test_one_chosen_symmetry_is_the_net_on_the_transformed_board(model_file, sym):
    """symmetries=(j,) must give the identity evaluation of the game replayed with every move
    transformed by j, mapped back: the oracle is the transformed replay, not the permutation."""
    s = GameState(9, 7.5)
    for v in ["E5", "C3", "G7", "C7", "G3", "D4", "F6", "B2"]:
        s.play(vertex_to_point(v, 9))
    ev1 = load_evaluator(model_file, symmetries=1, cache=False)
    one = NetEvaluator(ev1.backend, ev1.config, symmetries=(sym,)).evaluate_one(s)
    t = ev1.evaluate_one(transformed(s, sym))
    np.testing.assert_allclose(apply_symmetry(one.policy, 9, sym), t.policy, atol=2e-6)
    np.testing.assert_allclose(apply_symmetry(one.ownership, 9, sym), t.ownership, atol=2e-6)
    assert abs(one.value - t.value) < 1e-6
    assert not np.allclose(one.policy, ev1.evaluate_one(s).policy, atol=1e-4)
    with pytest.raises(KosumiError, match=r"indices 0\.\.7"):
        NetEvaluator(ev1.backend, ev1.config, symmetries=(8,))


def test_a_random_symmetry_is_the_drawn_one_mapped_back(model_file):
    """symmetries=0 draws one symmetry per position and evaluation (KataGo's nnRandomize): each
    position's result must be the chosen-symmetry evaluation of that symmetry (oracle: the
    (j,) evaluator, itself checked against the transformed replay above), and the draws vary."""
    states = []
    for k in range(12):
        s = GameState(9, 7.5)
        for v in ["E5", "C3", "G7", "C7", "G3", "D4", "F6", "B2", "H8", "A1"][: 2 + k % 8]:
            s.play(vertex_to_point(v, 9))
        states.append(s)
    ev1 = load_evaluator(model_file, symmetries=1, cache=False)
    rnd = NetEvaluator(ev1.backend, ev1.config, symmetries=0)
    drawn = np.random.default_rng(0).integers(0, 8, len(states))  # the evaluator's own seed
    got = rnd.evaluate(states)
    for s, sym, e in zip(states, drawn, got, strict=True):
        want = NetEvaluator(ev1.backend, ev1.config, symmetries=(int(sym),)).evaluate_one(s)
        np.testing.assert_allclose(e.policy, want.policy, atol=2e-6)
        np.testing.assert_allclose(e.ownership, want.ownership, atol=2e-6)
        assert abs(e.value - want.value) < 1e-6
    assert len(set(drawn.tolist())) > 3


class EchoBackend(Backend):
    """A fake, exactly equivariant 'network': policy logits = 3 * own stones + 1 * opponent
    stones (+ a fixed pass logit), value/score/ownership fixed or derived from the planes."""

    name = "echo"

    def __init__(self, value):
        self.value = np.asarray(value, dtype=np.float32)
        self.calls = []

    def forward(self, planes, globals):
        b, _, n, _ = planes.shape
        self.calls.append(planes.shape)
        flat = planes.reshape(b, planes.shape[1], n * n)
        pol = np.concatenate([3 * flat[:, 1] + flat[:, 2], np.full((b, 1), 0.5)], axis=1)
        own = 2.0 * (flat[:, 1] - flat[:, 2])
        return {"policy": pol.astype(np.float32),
                "value": np.tile(self.value, (b, 1)),
                "score_lead": np.full(b, 1.5, np.float32),
                "ownership": own.astype(np.float32)}


def test_symmetry_transforms_invert_exactly():
    """With an equivariant 'net', averaging over 8 symmetries must change nothing: any mistake
    in transforming the inputs or inverse-transforming the outputs would show."""
    cfg = NetConfig(arch="b1c8", board_sizes=[7])
    s = GameState(7)
    for v in ["C3", "E5", "B6", "F2", "D4"]:
        s.play(vertex_to_point(v, 7))
    one = NetEvaluator(EchoBackend([0, 0, 0]), cfg).evaluate_one(s)
    backend = EchoBackend([0, 0, 0])
    eight = NetEvaluator(backend, cfg, symmetries=8).evaluate_one(s)
    assert backend.calls == [(8, 11, 7, 7)]  # the 8 symmetric copies in one forward call
    np.testing.assert_allclose(eight.policy, one.policy, atol=1e-7)
    np.testing.assert_allclose(eight.ownership, one.ownership, atol=1e-7)
    # and the echo semantics by hand: own stones (White to move: E5, F2) have logit 3 but are
    # occupied -> 0; empty points share the rest
    assert one.policy[vertex_to_point("E5", 7)] == 0.0
    np.testing.assert_allclose(one.ownership[vertex_to_point("E5", 7)], np.tanh(2.0), rtol=1e-6)
    np.testing.assert_allclose(one.ownership[vertex_to_point("C3", 7)], np.tanh(-2.0), rtol=1e-6)


# ----------------------------------------------------------------------------- values, masking
def test_wdl_value_and_masked_softmax_by_hand():
    cfg = NetConfig(arch="b1c8", board_sizes=[5])
    logits = np.log([0.6, 0.3, 0.1])  # win, loss, noResult
    ev = NetEvaluator(EchoBackend(logits), cfg)
    s = GameState(5)
    s.play(vertex_to_point("C3", 5))  # White to move: C3 is Black's (logit 1, illegal)
    e = ev.evaluate_one(s)
    assert e.value == pytest.approx(0.6 + 0.5 * 0.1, abs=1e-6)
    assert e.score_lead == pytest.approx(1.5)
    # all 24 empty points have logit 0, pass 0.5: p(point) = 1 / (24 + e^0.5)
    z = 24 + np.exp(0.5)
    assert e.policy[vertex_to_point("C3", 5)] == 0.0
    np.testing.assert_allclose(np.delete(e.policy[:25], 12), 1 / z, rtol=1e-6)
    assert e.policy[25] == pytest.approx(np.exp(0.5) / z, rel=1e-6)


def test_tanh_value_by_hand():
    cfg = NetConfig(arch="b1c8", features="basic", value="tanh", board_sizes=[5])
    e = NetEvaluator(EchoBackend([0.3]), cfg).evaluate_one(GameState(5))
    assert e.value == pytest.approx((1 + np.tanh(0.3)) / 2, abs=1e-7)


def test_ko_point_is_masked():
    cfg = NetConfig(arch="b1c8", board_sizes=[5])
    s = GameState(5)
    for v in ["B5", "C5", "A4", "D4", "B3", "C3", "E1", "B4", "C4"]:  # Black takes a ko at B4
        s.play(vertex_to_point(v, 5))
    e = NetEvaluator(EchoBackend([0, 0, 0]), cfg).evaluate_one(s)
    assert e.policy[vertex_to_point("B4", 5)] == 0.0
    assert e.policy[vertex_to_point("A5", 5)] == 0.0  # suicide for White
    assert e.policy[vertex_to_point("D5", 5)] > 0.0


def test_mixed_sizes_keep_order_and_unsupported_size_fails(model_file):
    ev = load_evaluator(model_file, cache=False)
    states = [GameState(19), GameState(9), GameState(19), GameState(9)]
    out = ev.evaluate(states)
    assert [len(e.policy) for e in out] == [362, 82, 362, 82]
    np.testing.assert_array_equal(out[0].policy, out[2].policy)
    with pytest.raises(KosumiError, match="does not play 13x13"):
        ev.evaluate([GameState(13)])
    assert ev.supports_size(9) and not ev.supports_size(13)


def test_a_net_with_attention_bounds_its_batches_by_the_board_size(tmp_path):
    """Attention's score matrices grow with the points squared: at most 16 19x19 positions
    (73 13x13, max_batch 9x9) per forward pass; a convolutional net keeps max_batch."""
    import gzip

    from katago_writer import MODERN, KataGoWriter

    from kosumi.runtime.bench import bench_states

    net = tmp_path / "v15.bin.gz"
    net.write_bytes(gzip.compress(KataGoWriter(True, seed=7).model(version=15, blocks=MODERN)))
    ev = load_evaluator(net, backend="numpy", cache=False)
    assert [ev.batch_for(n) for n in (19, 13, 9)] == [16, 16 * 361 * 361 // 169 ** 2, 256]
    seen = []
    forward = ev.backend.forward
    ev.backend.forward = lambda planes, glob: (seen.append(len(planes)), forward(planes, glob))[1]
    assert len(ev.evaluate(bench_states(19, 40, seed=1))) == 40
    assert seen == [16, 16, 8]
    conv = tmp_path / "v8.bin.gz"
    conv.write_bytes(gzip.compress(KataGoWriter(True, seed=7).model(version=8)))
    assert load_evaluator(conv, backend="numpy", cache=False).batch_for(19) == 256
