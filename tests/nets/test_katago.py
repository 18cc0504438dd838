"""KataGo model files (kosumi.nets.katago) and the KataGo evaluator against the real engine."""

from __future__ import annotations

import gzip
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import katago_raw_nn, replay_reference, shared_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from katago_writer import MODERN, KataGoWriter

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import WHITE, apply_symmetry, parse_color, vertex_to_point
from kosumi.nets.checkpoint import build_net
from kosumi.nets.features import get_feature_set
from kosumi.nets.katago import (
    describe_katago,
    is_katago_file,
    katago_checkpoint,
    parse_katago,
    read_katago,
    read_katago_model,
)
from kosumi.runtime.agreement import kl
from kosumi.runtime.evaluator import Evaluator
from kosumi.runtime.loader import load_evaluator
from kosumi.runtime.net_evaluator import NetEvaluator

torch.set_num_threads(1)




# ---------------------------------------------------------------------------- a tiny writer
_Writer = KataGoWriter


def tiny_model(tmp_path: Path, binary: bool = True, gz: bool = True, **kw) -> Path:
    data = _Writer(binary).model(**kw)
    path = tmp_path / ("tiny" + (".bin" if binary else ".txt") + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def one_line_error(exc: pytest.ExceptionInfo, *words: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, msg
    return msg


# ---------------------------------------------------------------------------- reader
def test_tiny_model_all_encodings_agree(tmp_path):
    descs = []
    for binary in (True, False):
        for gz in (True, False):
            path = tiny_model(tmp_path, binary=binary, gz=gz)
            assert is_katago_file(path)
            d = read_katago(path)
            assert (d.binary, d.gzipped) == (binary, gz)
            descs.append(d)
    w = [np.concatenate([layer_arrays(x) for x in d.all_layers()]) for d in descs]
    for other in w[1:]:
        np.testing.assert_allclose(other, w[0], rtol=1e-6)
    d = descs[0]
    assert [b.kind for b in d.blocks] == ["ordinary", "gpool"]
    assert d.blocks[0].conv1.weight.shape == (8, 8, 3, 3)  # [oc, ic, ky, kx]
    # parameters: convs + matmuls + biases + BN scale/bias (hasScale, hasBias)
    expected = (5 * 5 * 22 * 8 + 19 * 8 + (2 * 8 + 9 * 64 + 2 * 8 + 9 * 64)
                + (2 * 8 + 9 * 8 * 6 + 9 * 8 * 4 + 2 * 4 + 12 * 6 + 2 * 6 + 9 * 6 * 8)
                + 2 * 8 + (8 * 4 + 8 * 4 + 2 * 4 + 12 * 4 + 2 * 4 + 4 + 12)
                + (8 * 4 + 2 * 4 + 12 * 5 + 5 + 5 * 3 + 3 + 5 * 4 + 4 + 4))
    assert d.num_parameters == expected


def layer_arrays(layer) -> np.ndarray:
    parts = [getattr(layer, k) for k in ("weight", "mean", "var", "scale", "bias")
             if isinstance(getattr(layer, k, None), np.ndarray)]
    return np.concatenate([p.ravel() for p in parts])


def test_tiny_net_forward(tmp_path):
    net = build_net(read_katago_model(tiny_model(tmp_path)))
    for n in (9, 19):
        x = torch.zeros(2, 22, n, n)
        x[:, 0] = 1
        out = net(x, torch.zeros(2, 19))
        assert out["policy"].shape == (2, n * n + 1)
        assert out["value"].shape == (2, 3) and out["score"].shape == (2, 4)
        assert out["ownership"].shape == (2, n * n)
        assert all(torch.isfinite(t).all() for t in out.values())


@pytest.mark.parametrize("version", [7, 18])
def test_version_rejected_naming_found_and_supported(tmp_path, version):
    path = tmp_path / f"v{version}.bin.gz"
    path.write_bytes(gzip.compress(_Writer(True).model(version=8).replace(
        b"tiny-test-net\n8\n", f"tiny-test-net\n{version}\n".encode(), 1)))
    with pytest.raises(KosumiError) as e:
        read_katago(path)
    one_line_error(e, str(path), f"version {version}", "supported: 8, 9, 10")
    assert is_katago_file(path)  # still recognised as KataGo, so the user gets this message


def test_nan_and_inf_name_the_layer(tmp_path):
    data = _Writer(True).model()
    i = data.index(b"rconv1/w1\n")
    j = data.index(b"@BIN@", i) + 5 + 4 * 7
    for bad in (np.float32("nan"), np.float32("inf")):
        mutated = data[:j] + np.array([bad], "<f4").tobytes() + data[j + 4 :]
        with pytest.raises(KosumiError) as e:
            parse_katago(mutated, "m.bin")
        one_line_error(e, "m.bin", "rconv1/w1", "value 8 of")


def test_inconsistent_shapes_name_the_layer(tmp_path):
    data = _Writer(True).model()
    bad = data.replace(b"rconv1/w2\n3\n3\n8\n8", b"rconv1/w2\n3\n3\n7\n8")
    with pytest.raises(KosumiError) as e:
        parse_katago(bad, "m.bin")
    one_line_error(e, "rconv1/w2", "7 input channels, expected 8")
    bad = data.replace(b"v3/w\n5\n3", b"v3/w\n5\n2")
    with pytest.raises(KosumiError) as e:
        parse_katago(bad, "m.bin")
    one_line_error(e, "v3/w", "2 output channels, expected 3")


def test_truncated_and_garbage_files(tmp_path):
    data = _Writer(True).model()
    gz = gzip.compress(data)
    for cut in (10, len(gz) // 2, len(gz) - 3):
        path = tmp_path / "cut.bin.gz"
        path.write_bytes(gz[:cut])
        with pytest.raises(KosumiError) as e:
            read_katago(path)
        one_line_error(e, str(path))
    raw = tmp_path / "cut.bin"
    raw.write_bytes(data[: len(data) - 10])  # inside the last layer's floats
    with pytest.raises(KosumiError) as e:
        read_katago(raw)
    one_line_error(e, "vownership", "truncated")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 10)
    assert not is_katago_file(junk)
    with pytest.raises(KosumiError):
        read_katago(junk)
    with pytest.raises(KosumiError) as e:
        read_katago(tmp_path / "missing.bin.gz")
    one_line_error(e, "missing.bin.gz")
    assert not is_katago_file(tmp_path / "missing.bin.gz")


# ---------------------------------------------------------------------------- the real net
@pytest.fixture(scope="module")
def model_path(katago_model) -> Path:
    return katago_model


@pytest.fixture(scope="module")
def model_bytes(model_path) -> bytes:
    return gzip.decompress(model_path.read_bytes())


def test_real_model_description(model_path):
    info = describe_katago(model_path)
    assert info["version"] == 8
    assert info["parameters"] == 1_027_911  # what KataGo itself reports for this net
    assert info["blocks"] == 6 and info["block_kinds"] == {"ordinary": 4, "gpool": 2}
    assert info["channels"]["trunk"] == 96
    assert info["input_features"] == {"name": "katago_v7", "spatial": 22, "global": 19}
    assert info["format"] == "KataGo binary (gzip)"
    assert set(info["heads"]) == {"policy", "value", "score", "ownership"}
    assert 9 in info["board_sizes"] and 19 in info["board_sizes"]
    assert is_katago_file(model_path)
    assert not is_katago_file(model_path.parent / "README.md")


def test_real_model_ungzipped(tmp_path, model_bytes):
    path = tmp_path / "net.bin"
    path.write_bytes(model_bytes)
    assert is_katago_file(path)
    assert read_katago(path).num_parameters == 1_027_911


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_model_bytes_fail_cleanly(tmp_path, model_bytes, model_path, data):
    """Mutated model files: a KosumiError with one line naming the file, or success -- never
    another exception, never a hang."""
    compressed = data.draw(st.booleans())
    src = model_path.read_bytes() if compressed else model_bytes
    buf = bytearray(src)
    for _ in range(data.draw(st.integers(1, 4))):
        # half the time near the start, where the header and the first layers are
        hi = len(buf) - 1 if data.draw(st.booleans()) else min(len(buf) - 1, 4096)
        pos = data.draw(st.integers(0, hi))
        buf[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        buf = buf[: data.draw(st.integers(0, len(buf)))]
    path = tmp_path / ("fuzz.bin.gz" if compressed else "fuzz.bin")
    path.write_bytes(bytes(buf))
    t = time.perf_counter()
    try:
        read_katago(path)
    except KosumiError as e:
        assert "\n" not in str(e) and str(path) in str(e)
    assert time.perf_counter() - t < 10
    is_katago_file(path)  # never raises


# ---------------------------------------------------------------------------- evaluator
BACKENDS = ["torch", "onnxruntime", "numpy"]


@pytest.fixture(scope="module", params=BACKENDS)
def evaluator(request, model_path) -> Evaluator:
    return load_evaluator(model_path, backend=request.param, threads=1, cache=False)


def test_agreement_with_katago(evaluator, reference_positions):
    """All reference positions, on every backend: policy KL, top-1, winrate, score lead and
    ownership errors against the real KataGo engine."""
    states = [replay_reference(r) for r in reference_positions]
    outs = []
    for i in range(0, len(states), 50):
        outs.extend(evaluator.evaluate(states[i : i + 50]))
    summary = {}
    for n in (19, 9):
        kls, top1, dwin, dlead, down = [], [], [], [], []
        for r, s, o in zip(reference_positions, states, outs, strict=True):
            if r["board_size"] != n:
                continue
            k = r["katago_raw_nn"]
            ref = np.array([np.nan if x is None else x for x in k["policy"]] + [k["policyPass"]])
            legal = ~np.isnan(ref)
            assert np.array_equal(legal[:-1], s.legal_mask()), r["id"]  # same illegal points
            assert (o.policy[~legal] == 0).all()
            p, q = ref[legal], o.policy[legal].astype(np.float64)
            kls.append(kl(p, q))
            top1.append(int(np.nanargmax(ref)) == int(np.argmax(o.policy)))
            w = o.white_view(s.to_move)
            ref_value = (k["whiteWin"] if s.to_move == WHITE else k["whiteLoss"]) \
                + 0.5 * k["noResult"]
            dwin.append(abs(o.value - ref_value))
            dlead.append(abs(w["whiteLead"] - k["whiteLead"]))
            down.append(float(np.mean(np.abs(w["whiteOwnership"] - np.array(k["whiteOwnership"])))))
        summary[n] = (np.mean(kls), np.max(kls), np.mean(top1), np.mean(dwin), np.mean(dlead),
                      np.mean(down))
        mean_kl, max_kl, top1_rate, win_mae, lead_mae, own_mae = summary[n]
        assert mean_kl <= 0.002 and max_kl <= 0.02, (n, mean_kl, max_kl)
        assert top1_rate >= 0.99, (n, top1_rate)
        assert win_mae <= 0.002, (n, win_mae)
        assert lead_mae <= 0.05, (n, lead_mae)
        assert own_mae <= 0.005, (n, own_mae)
    print(f"\nKataGo agreement on {evaluator.backend.name} (mean KL, max KL, top-1, winrate MAE, "
          "lead MAE, ownership MAE):")
    for n, row in summary.items():
        print(f"  {n}x{n}: " + ", ".join(f"{x:.6f}" for x in row))


def test_evaluation_conventions(evaluator, reference_positions):
    r = next(x for x in reference_positions if x["id"] == "dev-19x19-0000")
    s = replay_reference(r)  # White to move: E19 captures
    assert isinstance(evaluator, NetEvaluator)
    e = evaluator.evaluate_one(s)
    assert e.policy.shape == (362,) and math.isclose(float(e.policy.sum()), 1.0, rel_tol=1e-5)
    assert (e.policy[:361][~s.legal_mask()] == 0).all()
    assert int(np.argmax(e.policy)) == vertex_to_point("E19", 19)
    win, _loss, no_result = e.wdl
    assert e.value == pytest.approx(win + no_result / 2)
    assert e.value == pytest.approx(r["katago_raw_nn"]["whiteWin"]
                                    + r["katago_raw_nn"]["noResult"] / 2, abs=1e-4)
    assert e.score_lead == pytest.approx(r["katago_raw_nn"]["whiteLead"], abs=0.01)
    w = e.white_view(s.to_move)
    assert w["whiteScoreSelfplay"] == pytest.approx(
        r["katago_raw_nn"]["whiteScoreSelfplay"], abs=0.01)
    assert w["whiteScoreSelfplaySq"] == pytest.approx(
        r["katago_raw_nn"]["whiteScoreSelfplaySq"], rel=1e-3)
    # positional superko: KataGo reports no "no result"
    s.rules = s.rules.__class__(ko="positional")
    assert evaluator.evaluate_one(s).wdl[2] == 0.0


def test_symmetry_averaging_is_equivariant(tmp_path):
    ev = load_evaluator(tiny_model(tmp_path), backend="torch", symmetries=8, cache=False)
    moves = [("B", "C3"), ("W", "G7"), ("B", "D7"), ("W", "F3")]
    s = GameState(9, 7.0)
    for c, x in moves:
        s.play(vertex_to_point(x, 9), parse_color(c))
    base = ev.evaluate_one(s)
    for sym in (1, 5, 6):
        t = GameState(9, 7.0)
        for c, x in moves:
            p = int(apply_symmetry(np.eye(81, dtype=np.int8)[vertex_to_point(x, 9)], 9,
                                   sym).argmax())
            t.play(p, parse_color(c))
        e = ev.evaluate_one(t)
        np.testing.assert_allclose(e.policy, apply_symmetry(base.policy, 9, sym), atol=2e-6)
        np.testing.assert_allclose(e.ownership, apply_symmetry(base.ownership, 9, sym),
                                   atol=2e-6)
        assert e.value == pytest.approx(base.value, abs=1e-6)
        assert e.score_lead == pytest.approx(base.score_lead, abs=1e-5)


def test_bad_symmetries_and_sizes(tmp_path):
    path = tiny_model(tmp_path)
    with pytest.raises(KosumiError):
        load_evaluator(path, symmetries=9)
    ev = load_evaluator(path, backend="numpy")
    assert ev.supports_size(9) and ev.supports_size(19) and not ev.supports_size(25)


def _header_fields(model_bytes: bytes) -> list[tuple[int, int, str]]:
    """(offset, length, what) of every channel count in the layer headers of a binary model,
    found by walking it the way the format lays it out."""
    out = []
    pos = 0
    toks = []
    n = len(model_bytes)
    while pos < n:  # tokens up to the first float block, then jump over each block
        while pos < n and model_bytes[pos] in b" \t\r\n":
            pos += 1
        if model_bytes.startswith(b"@BIN@", pos):
            break
        end = pos
        while end < n and model_bytes[end] not in b" \t\r\n":
            end += 1
        toks.append((pos, end - pos, model_bytes[pos:end]))
        pos = end
    # header: name version nin nglob trunk blocks trunkC midC regC dilC gpoolC conv1 ky kx ic oc
    for i, what in ((6, "trunk channels"), (7, "mid channels"), (8, "regular channels"),
                    (9, "dilated channels"), (10, "gpool channels"), (14, "initial conv in"),
                    (15, "initial conv out")):
        out.append((toks[i][0], toks[i][1], what))
    return out


def test_header_that_contradicts_itself_is_refused(model_bytes, tmp_path):
    """What KataGo checks, kosumi checks: every trunk channel count of the real net changed to 7
    in turn (mid != regular + dilated, a block conv that is not as wide as the header says, an
    initial conv that does not output the trunk's width) is refused with one line naming the
    layer."""
    fields = _header_fields(model_bytes)
    assert len(fields) == 7
    for off, length, _what in fields:
        mutated = model_bytes[:off] + b"7" + model_bytes[off + length:]
        path = tmp_path / "bad.bin"
        path.write_bytes(mutated)
        with pytest.raises(KosumiError) as e:
            read_katago(path)
        one_line_error(e, str(path))
    path.write_bytes(model_bytes.replace(b"trunk\n6\n96\n96\n64\n32\n32",
                                         b"trunk\n6\n96\n96\n64\n16\n32", 1))
    with pytest.raises(KosumiError) as e:
        read_katago(path)
    one_line_error(e, "midNumChannels (96) != regularNumChannels (64) + dilatedNumChannels (16)")


# ============================================================================ model versions 9-17
# Oracles: the real KataGo engine (../shared/engines, v1.17.2) evaluating small random nets that
# these tests write in KataGo's format (tests/katago_writer.py: every block kind -- nested
# bottleneck, transformer attention with learned, fixed or no rotary embedding and grouped KV
# heads, gated feed-forward, ordinary and global-pooling blocks inside and outside nested ones
# --, each activation, the header of every version from 9 to 17), and KataGo's own outputs for
# the b10c384 transformer net that KaTrain ships (../shared/reference/katago-b10c384h6nbttflrs/,
# 300 positions). The post-processing of the heads that kosumi's evaluator does not report
# (short-term errors, time left) is KataGo's, written out here from its documented formulas.
B10 = "models/b10c384h6nbttflrs.bin.gz"
B10_REFERENCE = "reference/katago-b10c384h6nbttflrs/raw_nn.jsonl"

#: positions for the tiny nets: 9x9 and 13x13 (the rotary angles depend on the board's width)
POSITIONS = [
    {"board_size": 9, "komi": 7.0, "moves": []},
    {"board_size": 9, "komi": 7.0, "moves": [["B", "E5"], ["W", "C3"], ["B", "G7"],
                                              ["W", "D4"], ["B", "pass"]]},
    {"board_size": 13, "komi": 7.5, "moves": [["B", "D4"], ["W", "K10"], ["B", "C11"]]},
]
#: (version, writer keyword arguments): one net per version, the new parts of each
CASES = [
    (9, {}),                                                  # 6 score outputs
    (10, {}),                                                 # sqrt short-term errors
    (11, {"activation": "mish"}),                             # activation kinds
    (12, {}),                                                 # optimistic policy channel
    (13, {"post": (18.0, 22.0, 19.0, 21.0, 35.0, 0.3, 140.0)}),  # multipliers in the header
    (14, {"blocks": MODERN}),                                 # (KataGo reads blocks by kind)
    (15, {"blocks": MODERN}),                                 # pass MLP, RMS tip (spatial)
    (15, {"blocks": MODERN, "activation": "mish", "rms_tip": False}),
    (16, {"blocks": MODERN}),                                 # 4 policy channels
    (17, {"blocks": MODERN, "policy_out": 2}),                # header options
]


def softplus(x: float) -> float:
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


def extra_heads(raw: np.ndarray, version: int, post: dict) -> dict[str, float]:
    """KataGo's varTimeLeft and short-term errors from the raw score outputs (nneval.cpp)."""
    if version >= 14:
        wl = math.sqrt(softplus(raw[4] * 0.5) ** 2 * post["shortterm_value_error"])
        sc = math.sqrt(softplus(raw[5] * 0.5) ** 2 * post["shortterm_score_error"])
    elif version >= 10:
        wl = math.sqrt(softplus(raw[4]) * post["shortterm_value_error"])
        sc = math.sqrt(softplus(raw[5]) * post["shortterm_score_error"])
    else:
        wl, sc = softplus(raw[4]), softplus(raw[5]) * 10.0
    return {"varTimeLeft": softplus(raw[3]) * post["variance_time"],
            "shorttermWinlossError": wl, "shorttermScoreError": sc}


def compare(rec: dict, k: dict, evaluation, tol: dict[str, float]) -> dict[str, float]:
    """Differences between kosumi's evaluation and KataGo's answer ``k`` for position ``rec``."""
    s = replay_reference(rec)
    ref = np.array([np.nan if x is None else x for x in k["policy"]] + [k["policyPass"]])
    legal = ~np.isnan(ref)
    assert np.array_equal(legal[:-1], s.legal_mask())
    assert (evaluation.policy[~legal] == 0).all()
    w = evaluation.white_view(s.to_move)
    ref_value = (k["whiteWin"] if s.to_move == WHITE else k["whiteLoss"]) + 0.5 * k["noResult"]
    d = {"policy": float(np.abs(evaluation.policy[legal] - ref[legal]).max()),
         "kl": kl(ref[legal], evaluation.policy[legal].astype(np.float64)),
         "top1": float(int(np.nanargmax(ref)) == int(np.argmax(evaluation.policy))),
         "value": abs(evaluation.value - ref_value),
         "lead": abs(w["whiteLead"] - k["whiteLead"]),
         "ownership": float(np.abs(w["whiteOwnership"] - np.array(k["whiteOwnership"])).mean())}
    for key, limit in tol.items():
        assert d[key] <= limit, (rec, key, d[key])
    return d


# ---------------------------------------------------------------------------- tiny nets
@pytest.mark.parametrize("version,kw", CASES, ids=[f"v{v}-{i}" for i, (v, _) in enumerate(CASES)])
def test_tiny_nets_of_every_version_match_katago(tmp_path, version, kw):
    path = tmp_path / f"v{version}.bin.gz"
    path.write_bytes(gzip.compress(KataGoWriter(True, seed=version, scale=0.5).model(
        version=version, **kw)))
    answers = katago_raw_nn(path, POSITIONS, tmp_path)
    ck = read_katago_model(path)
    lay = ck.config.katago
    assert lay["model_version"] == version
    net = build_net(ck)
    fs = get_feature_set("katago_v7")
    tol = {"policy": 1e-5, "value": 1e-5, "lead": 0.01, "ownership": 2e-5}
    for backend in BACKENDS:
        ev = load_evaluator(path, backend=backend, cache=False)
        evals = [ev.evaluate_one(replay_reference(r)) for r in POSITIONS]
        for rec, k, e in zip(POSITIONS, answers, evals, strict=True):
            compare(rec, k, e, tol)
    for rec, k in zip(POSITIONS, answers, strict=True):  # the heads the evaluator leaves out
        planes, glob = fs.encode([replay_reference(rec)])
        with torch.no_grad():
            raw = net(torch.from_numpy(planes), torch.from_numpy(glob))["score"][0].double()
        extra = extra_heads(raw.numpy(), version, lay["post"])
        for key, value in extra.items():
            assert value == pytest.approx(k[key], abs=2e-3, rel=1e-4), (key, version)


def test_policy_optimism_mixes_the_two_policy_channels(tmp_path):
    """With two policy channels, the net's one policy output is KataGo's rootPolicyOptimism mix
    (0.2, what kata-raw-nn answers with); another optimism is another net."""
    path = tmp_path / "v12.bin.gz"
    path.write_bytes(gzip.compress(KataGoWriter(True, seed=3, scale=0.8).model(version=12)))
    desc = read_katago(path)
    assert desc.policy_out_channels == 2
    fs = get_feature_set("katago_v7")
    planes, glob = fs.encode([replay_reference(POSITIONS[1])])
    logits = {}
    for opt in (0.0, 0.2, 1.0):
        ck = katago_checkpoint(desc, opt)
        assert ck.config.katago["policy_optimism"] == opt
        with torch.no_grad():
            logits[opt] = build_net(ck)(torch.from_numpy(planes),
                                        torch.from_numpy(glob))["policy"][0].double().numpy()
    np.testing.assert_allclose(logits[0.2], logits[0.0] + 0.2 * (logits[1.0] - logits[0.0]),
                               atol=1e-5)
    assert np.abs(logits[1.0] - logits[0.0]).max() > 1e-3


# ---------------------------------------------------------------------------- bad files
def _modern(**kw) -> bytes:
    return KataGoWriter(True, seed=1).model(version=15, blocks=MODERN, **kw)


@pytest.mark.parametrize("old,new,words", [
    (b"transformer_ffn_block\n", b"transformer_xyz_block\n", ["unknown block kind",
                                                            "transformer_xyz_block"]),
    (b"ACTIVATION_SILU", b"ACTIVATION_GELU", ["unknown activation", "ACTIVATION_GELU"]),
    (b"rconv1.blockstack.0.q_proj\n6\n8", b"rconv1.blockstack.0.q_proj\n6\n9",
     ["rconv1.blockstack.0.q_proj", "9 output channels, expected 8"]),
    (b"rconv1.blockstack.0\n2\n1\n4\n3", b"rconv1.blockstack.0\n2\n3\n4\n3",
     ["rconv1.blockstack.0", "not a multiple of numKVHeads"]),
    (b"rconv1.blockstack.0\n2\n1\n4\n3", b"rconv1.blockstack.0\n2\n1\n5\n3",
     ["rconv1.blockstack.0", "must be even when RoPE is used"]),
    (b"rconv1.blockstack.0.rope_freqs\n1\n2\n2", b"rconv1.blockstack.0.rope_freqs\n1\n3\n2",
     ["rope_freqs", "expected 1x2x2"]),
    (b"rconv1.blockstack.1\n6\n10\n1", b"rconv1.blockstack.1\n7\n10\n1",
     ["rconv1.blockstack.1", "7 channels, expected 6"]),
    (b"trunk/norm\n8\n1e-06\n1\n0", b"trunk/norm\n8\n1e-06\n1\n4",
     ["trunk/norm", "grouped rms norm"]),
    (b"tiny-test-net\n15\n22\n19\n20.0\n20.0\n20.0\n20.0\n40.0\n0.25\n150.0\n0\n",
     b"tiny-test-net\n15\n22\n19\n20.0\n20.0\n20.0\n20.0\n40.0\n0.25\n150.0\n1\n",
     ["metaEncoderVersion 1", "human"]),
    (b"150.0\n0\n0\n0\n0\n0\n0\n0\n0\n", b"150.0\n0\n0\n0\n0\n0\n0\n0\n3\n",
     ["model option H is 3"]),
    (b"trunk\n5\n8\n8\n6\n2\n4\n1\n0\n", b"trunk\n5\n8\n8\n6\n2\n4\n2\n0\n",
     ["trunk norm kind = 2"]),
    (b"20.0\n20.0\n20.0\n20.0\n40.0", b"20.0\n20.0\n-20.0\n20.0\n40.0",
     ["score_stdev multiplier -20.0"]),
])
def test_bad_modern_headers_are_one_line_errors_naming_the_layer(old, new, words):
    data = _modern()
    assert old in data, old
    with pytest.raises(KosumiError) as e:
        parse_katago(data.replace(old, new, 1), "m.bin")
    msg = str(e.value)
    assert "\n" not in msg and "m.bin" in msg
    for w in words:
        assert w in msg, msg


def test_mixed_activations_and_truncation_are_refused():
    data = _modern()
    i = data.index(b"ACTIVATION_SILU", data.index(b"p1/actv"))
    with pytest.raises(KosumiError) as e:
        parse_katago(data[:i] + b"ACTIVATION_MISH" + data[i + 15:], "m.bin")
    assert "p1/actv" in str(e.value) and "one activation" in str(e.value)
    cut = data.index(b"ffn_linear_gate")
    with pytest.raises(KosumiError) as e:
        parse_katago(data[:cut + 40], "m.bin")
    assert "truncated" in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------------------- the b10c384
@pytest.fixture(scope="module")
def b10_path() -> Path:
    return shared_path(B10)


@pytest.fixture(scope="module")
def b10_reference() -> list[dict]:
    import json

    with open(shared_path(B10_REFERENCE)) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_b10c384_description(b10_path):
    info = describe_katago(b10_path)
    assert info["version"] == 15 and info["arch"] == "b10c384"
    assert info["block_kinds"] == {"nested": 10, "attention": 20, "ffn": 20}
    assert info["kind"] == "nbt transformer" and info["activation"] == "silu"
    assert info["parameters"] == 10_545_753  # KataGo v1.17.2 loading it: "10545753 params"


@pytest.mark.parametrize("backend", BACKENDS)
def test_b10c384_agrees_with_katago_on_every_backend(b10_path, b10_reference, backend):
    """The 300 development positions: policy KL mean <= 1e-4 (max <= 2e-3), top move 100%,
    winrate and ownership mean absolute error <= 2e-3, score lead <= 0.05."""
    ev = load_evaluator(b10_path, backend=backend, threads=2, cache=False)
    rows = {}
    for n in (19, 9):
        recs = [r for r in b10_reference if r["board_size"] == n]
        evals = []
        for i in range(0, len(recs), 25):
            evals.extend(ev.evaluate([replay_reference(r) for r in recs[i:i + 25]]))
        ds = [compare(r, r["katago_raw_nn"], e, {}) for r, e in zip(recs, evals, strict=True)]
        kls = [d["kl"] for d in ds]
        rows[n] = {"kl_mean": float(np.mean(kls)), "kl_max": float(np.max(kls)),
                   "top1": float(np.mean([d["top1"] for d in ds])),
                   "value": float(np.mean([d["value"] for d in ds])),
                   "lead": float(np.mean([d["lead"] for d in ds])),
                   "ownership": float(np.mean([d["ownership"] for d in ds]))}
    print(f"\nb10c384 vs KataGo on {backend}: {rows}")
    for n, r in rows.items():
        assert r["kl_mean"] <= 1e-4 and r["kl_max"] <= 2e-3, (n, r)
        assert r["top1"] == 1.0, (n, r)
        assert r["value"] <= 2e-3 and r["ownership"] <= 2e-3 and r["lead"] <= 0.05, (n, r)
