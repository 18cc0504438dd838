"""KataGo model files (kosumi.nets.katago) and the KataGo evaluator against the real engine."""

from __future__ import annotations

import gzip
import io
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import replay_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kosumi.errors import KosumiError
from kosumi.go.board import GameState
from kosumi.go.coords import WHITE, apply_symmetry, parse_color, vertex_to_point
from kosumi.nets.checkpoint import build_net
from kosumi.nets.katago import (
    describe_katago,
    is_katago_file,
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
class _Writer:
    """Writes a random version-8 KataGo model (binary or text float blocks)."""

    def __init__(self, binary: bool, seed: int = 0):
        self.binary = binary
        self.rng = np.random.default_rng(seed)
        self.out = io.BytesIO()

    def tok(self, *items) -> None:
        self.out.write(("\n".join(str(i) for i in items) + "\n").encode())

    def floats(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype="<f4").ravel()
        if self.binary:
            self.out.write(b"@BIN@" + values.tobytes() + b"\n")
        else:
            self.out.write((" ".join(repr(float(x)) for x in values) + "\n").encode())

    def conv(self, name, k, ic, oc) -> None:
        self.tok(name, k, k, ic, oc, 1, 1)
        self.floats(self.rng.normal(0, 0.3, (k, k, ic, oc)))

    def bn(self, name, c) -> None:
        self.tok(name, c, 1e-20, 1, 1)
        self.floats(np.zeros(c))
        self.floats(np.ones(c))
        self.floats(self.rng.uniform(0.5, 1.5, c))
        self.floats(self.rng.normal(0, 0.1, c))

    def act(self, name) -> None:
        self.tok(name)

    def matmul(self, name, ic, oc) -> None:
        self.tok(name, ic, oc)
        self.floats(self.rng.normal(0, 0.3, (ic, oc)))

    def bias(self, name, c) -> None:
        self.tok(name, c)
        self.floats(self.rng.normal(0, 0.1, c))

    def model(self, version: int = 8, c: int = 8, blocks=("ordinary", "gpool")) -> bytes:
        # mid = regular + dilated, as KataGo requires: ordinary blocks output c, gpool blocks 6
        self.tok("tiny-test-net", version, 22, 19, "trunk", len(blocks), c, c, 6, c - 6, 4)
        self.conv("conv1", 5, 22, c)
        self.matmul("ginputs", 19, c)
        for i, kind in enumerate(blocks):
            name = f"rconv{i + 1}"
            self.tok(f"{kind}_block", name)
            self.bn(f"{name}/norm1", c)
            self.act(f"{name}/actv1")
            if kind == "ordinary":
                self.conv(f"{name}/w1", 3, c, c)
                self.bn(f"{name}/norm2", c)
                self.act(f"{name}/actv2")
                self.conv(f"{name}/w2", 3, c, c)
            else:
                self.conv(f"{name}/w1a", 3, c, 6)
                self.conv(f"{name}/w1b", 3, c, 4)
                self.bn(f"{name}/norm1b", 4)
                self.act(f"{name}/actv1b")
                self.matmul(f"{name}/w1r", 12, 6)
                self.bn(f"{name}/norm2", 6)
                self.act(f"{name}/actv2")
                self.conv(f"{name}/w2", 3, 6, c)
        self.bn("trunk/norm", c)
        self.act("trunk/actv")
        self.tok("policyhead")
        self.conv("p1/intermediate_conv", 1, c, 4)
        self.conv("g1", 1, c, 4)
        self.bn("g1/norm", 4)
        self.act("g1/actv")
        self.matmul("matmulg2w", 12, 4)
        self.bn("p1/norm", 4)
        self.act("p1/actv")
        self.conv("p2", 1, 4, 1)
        self.matmul("matmulpass", 12, 1)
        self.tok("valuehead")
        self.conv("v1", 1, c, 4)
        self.bn("v1/norm", 4)
        self.act("v1/actv")
        self.matmul("v2/w", 12, 5)
        self.bias("v2/b", 5)
        self.act("v2/actv")
        self.matmul("v3/w", 5, 3)
        self.bias("v3/b", 3)
        self.matmul("sv3/w", 5, 4)
        self.bias("sv3/b", 4)
        self.conv("vownership", 1, 4, 1)
        return self.out.getvalue()


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


def test_version_rejected_naming_found_and_supported(tmp_path):
    path = tmp_path / "v9.bin.gz"
    path.write_bytes(gzip.compress(_Writer(True).model(version=9)))
    with pytest.raises(KosumiError) as e:
        read_katago(path)
    one_line_error(e, str(path), "version 9", "supported: 8")
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
