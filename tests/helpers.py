"""Helpers shared by the tests (import them with ``from helpers import ...``: pytest puts tests/
on sys.path, see ``pythonpath`` in pyproject.toml). Fixtures live in conftest.py; no test file
imports another test file (tests/test_house_rules.py checks it).

Tests that need files from ../shared (the KataGo teacher, its reference outputs) or peer
programs (GNU Go, Leela Zero) skip with a clear reason when they are absent, and FAIL instead
when KOSUMI_REQUIRE_REFERENCE=1 (CI sets it), so a missing install never passes silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kosumi.distill.positions import Position
from kosumi.go.board import GameState
from kosumi.go.coords import BLACK, PASS, parse_color, vertex_to_point
from kosumi.runtime.evaluator import Evaluation, Evaluator

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
#: KataGo's g170 6-block net and the real engine's outputs for it, relative to ``SHARED``
KATAGO_MODEL = "models/g170-b6c96-s175395328-d26788732.bin.gz"
REFERENCE = "reference/katago-g170-b6c96/raw_nn.jsonl"
REFERENCE_JSONL = SHARED / REFERENCE
#: a fake GTP engine run as a subprocess (``python fake_gtp.py BEHAVIOUR SEED PASS_AFTER``)
FAKE_GTP = Path(__file__).resolve().parent / "engines" / "fake_gtp.py"
GNUGO = "/usr/games/gnugo"
LEELAZ = "/usr/games/leelaz"


def require_reference() -> bool:
    return os.environ.get("KOSUMI_REQUIRE_REFERENCE") == "1"


def missing(reason: str) -> None:
    """Skip (or fail under KOSUMI_REQUIRE_REFERENCE=1) because something is absent."""
    if require_reference():
        pytest.fail(f"{reason} (required: KOSUMI_REQUIRE_REFERENCE=1)")
    pytest.skip(reason)


def shared_path(relative: str) -> Path:
    """A file under ../shared, or skip/fail when it is absent."""
    path = SHARED / relative
    if not path.exists():
        missing(f"{path} is absent (the shared models/reference folder beside the repository)")
    return path


#: the Debian package of each peer program the tests run (``.ci/run`` installs them)
PACKAGES = {"gnugo": "gnugo", "leelaz": "leela-zero", "chromium": "chromium"}


def require_program(path: str) -> str:
    """A peer program (e.g. /usr/games/gnugo), or skip/fail when it is not installed."""
    found = path if os.access(path, os.X_OK) else shutil.which(Path(path).name)
    if not found:
        package = PACKAGES.get(Path(path).name, Path(path).name)
        missing(f"{path} is not installed (apt-get install {package})")
    return found


def replay_reference(record: dict) -> GameState:
    """A reference position (raw_nn.jsonl) as a GameState: its move list played under its rules
    by ``GameState.play`` alone (no kosumi reader of the format in between)."""
    n = record["board_size"]
    state = GameState(n, record["komi"], record.get("rules", "chinese"))
    for color, vertex in record["moves"]:
        state.play(vertex_to_point(vertex, n), parse_color(color))
    return state


KATAGO_ENGINE = "engines/katago-v1.17.2-eigen"


def katago_raw_nn(model: Path, records: Sequence[dict], workdir: Path) -> list[dict]:
    """The real KataGo engine's ``kata-raw-nn 0`` for each position (records as in
    raw_nn.jsonl: board_size, komi, rules, moves), parsed into raw_nn.jsonl's ``katago_raw_nn``
    fields. Skips (fails in CI) when the engine is absent or cannot run (libzip4)."""
    engine = shared_path(KATAGO_ENGINE)
    config = shared_path("engines/katago-gtp.cfg")
    lines = []
    for r in records:
        lines += [f"boardsize {r['board_size']}", "clear_board", f"komi {r['komi']}",
                  f"kata-set-rules {r.get('rules', 'chinese')}"]
        lines += [f"play {c} {v}" for c, v in r["moves"]]
        lines.append("kata-raw-nn 0")
    lines.append("quit")
    try:
        proc = subprocess.run(
            [str(engine), "gtp", "-model", str(model), "-config", str(config),
             "-override-config", f"logDir={workdir}/katago-logs,logToStderr=false"],
            input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300)
    except OSError as e:
        missing(f"KataGo cannot run: {e}")
    if "error while loading shared libraries" in proc.stderr:
        missing(f"KataGo cannot run (apt-get install -y libzip4): {proc.stderr.strip()}")
    answers = [a for a in proc.stdout.split("\n\n") if a.strip().startswith("= symmetry")]
    if len(answers) != len(records):
        raise AssertionError(f"KataGo answered {len(answers)} of {len(records)} positions: "
                             f"{proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    return [_parse_raw_nn(a, r["board_size"]) for a, r in zip(answers, records, strict=True)]


def _parse_raw_nn(text: str, n: int) -> dict:
    toks = text.replace("=", " ", 1).split()
    out: dict = {}
    i = 0
    while i < len(toks):
        key = toks[i]
        if key in ("policy", "whiteOwnership"):
            vals = toks[i + 1 : i + 1 + n * n]
            out[key] = [None if v == "NAN" else float(v) for v in vals]
            i += 1 + n * n
        else:
            out[key] = float(toks[i + 1])
            i += 2
    return out


def katago_policy(record: dict) -> np.ndarray:
    """KataGo's policy over the points and pass of a reference position (0 at illegal points,
    which the file writes as null)."""
    k = record["katago_raw_nn"]
    return np.array([0.0 if p is None else p for p in k["policy"]] + [k["policyPass"]])


def read_reference_positions() -> list[dict]:
    """The 300 records of raw_nn.jsonl (skip/fail when the file is absent)."""
    path = shared_path(REFERENCE)
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def randomise_bn(net, g) -> None:
    """Non-trivial statistics and affine parameters for every BatchNorm2d of ``net`` (drawn from
    the torch generator ``g``), so that exporters' BN mappings are really exercised."""
    import torch

    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.3)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.2)


def random_net_file(path: Path, arch: str = "b2c16", features: str = "basic", head: str = "conv",
                    board_sizes=(9, 19), seed: int = 0, bn: bool = True, **config) -> Path:
    """A random kosumi net written as a checkpoint; ``bn`` randomises its BatchNorm statistics
    and affine parameters so that folding them is really exercised."""
    import torch

    from kosumi.nets.checkpoint import save_checkpoint
    from kosumi.nets.config import NetConfig
    from kosumi.nets.resnet import KosumiNet

    if head == "lz":
        config.setdefault("value", "tanh")
        config.setdefault("score_lead", False)
        config.setdefault("ownership", False)
        board_sizes = (19,)
    cfg = NetConfig(arch=arch, features=features, head=head, board_sizes=list(board_sizes),
                    **config)
    net = KosumiNet.random(cfg, seed)
    if bn:
        randomise_bn(net, torch.Generator().manual_seed(seed + 100))
    save_checkpoint(path, net)
    return path


def quantized_net_files(root: Path, seed: int, positions: int = 64) -> tuple[Path, Path, Path]:
    """(float net, calibration positions, its int8 net made by ``kosumi quantize``): a random
    9x9 b2c16 quantized the way a user would."""
    from typer.testing import CliRunner

    from kosumi.cli import app
    from kosumi.distill.positions import Position, write_positions
    from kosumi.runtime.bench import bench_states

    net = random_net_file(root / "net.safetensors", arch="b2c16", board_sizes=(9,), seed=seed)
    calib = root / "calib"
    write_positions(calib, [Position.from_state(s, f"c:{i}") for i, s in
                            enumerate(bench_states(9, positions, seed=seed - 2))])
    q = root / "q.safetensors"
    r = CliRunner().invoke(app, ["quantize", str(net), "--calib", str(calib), "--out", str(q)])
    assert r.exit_code == 0, r.output
    return net, calib, q


# ============================================================================ rules oracles
def oracle_neighbours(p: int, size: int) -> list[int]:
    """The points next to ``p``, from its coordinates (not kosumi's neighbour table)."""
    x, y = p % size, p // size
    return [y2 * size + x2 for x2, y2 in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1))
            if 0 <= x2 < size and 0 <= y2 < size]


def oracle_flood(board: bytes, size: int, p: int) -> set[int]:
    """The connected set of points around ``p`` that hold what ``p`` holds (a chain, or an
    empty region)."""
    block, todo = {p}, [p]
    while todo:
        for q in oracle_neighbours(todo.pop(), size):
            if board[q] == board[p] and q not in block:
                block.add(q)
                todo.append(q)
    return block


def oracle_chain_liberties(board: bytes, size: int) -> list[int]:
    """Set-based oracle: distinct empty points next to the chain of each stone."""
    out = [None] * (size * size)
    for p in range(size * size):
        if not board[p]:
            out[p] = 0
        elif out[p] is None:
            chain = oracle_flood(board, size, p)
            libs = min(255, len({q for s in chain for q in oracle_neighbours(s, size)
                                 if board[q] == 0}))
            for s in chain:
                out[s] = libs
    return out


def oracle_area(board: bytes, size: int) -> list[int]:
    """Set-based oracle for Tromp-Taylor ownership: an empty point belongs to a colour when the
    empty region around it reaches stones of that colour only."""
    out = [None] * (size * size)
    for p in range(size * size):
        if board[p]:
            out[p] = board[p]
        elif out[p] is None:
            region = oracle_flood(board, size, p)
            reached = {board[q] for s in region for q in oracle_neighbours(s, size)} - {0}
            owner = reached.pop() if len(reached) == 1 else 0
            for s in region:
                out[s] = owner
    return out


# ============================================================================ peers
def fake_gtp(behaviour: str, seed: int = 1, pass_after: int = 20) -> list[str]:
    """The command line of the fake GTP engine (tests/engines/fake_gtp.py)."""
    return [sys.executable, str(FAKE_GTP), behaviour, str(seed), str(pass_after)]


def gnugo_final_score(sgf: Path) -> float:
    """A fresh GNU Go loads the SGF and scores its final position (Chinese rules)."""
    from kosumi.engine.match_results import parse_score

    script = f"loadsgf {sgf}\nfinal_score\nquit\n"
    out = subprocess.run([require_program(GNUGO), "--mode", "gtp", "--chinese-rules"],
                         input=script, capture_output=True, check=False, text=True,
                         timeout=120).stdout
    replies = [b.strip() for b in out.split("\n\n") if b.strip()]
    assert replies[0].startswith("="), out
    return parse_score(replies[1].lstrip("= "))


# ============================================================================ distillation data
def random_game(size: int, length: int, rng: random.Random, start: GameState | None = None,
                pass_prob: float = 0.03) -> list[tuple[int, int]]:
    """A random legal move sequence (occasional passes, never two in a row)."""
    state = start.copy() if start is not None else GameState(size, 7.0)
    moves: list[tuple[int, int]] = []
    for _ in range(length):
        legal = np.flatnonzero(state.legal_mask())
        last_pass = bool(moves) and moves[-1][1] == PASS
        if len(legal) == 0 or (rng.random() < pass_prob and not last_pass):
            p = PASS
        else:
            p = int(legal[rng.randrange(len(legal))])
        color = state.to_move
        state.play(p, color)
        moves.append((color, p))
    return moves


def game_positions(size: int, games: int, length: int, seed: int, komi: float = 7.0,
                   every: int = 1, prefix: str = "g") -> list[Position]:
    """Every ``every``-th prefix of ``games`` random games, sources ``sgf:<prefix><k>``."""
    rng = random.Random(seed)
    out = []
    for g in range(games):
        moves = random_game(size, length, rng)
        for t in range(0, length + 1, every):
            out.append(Position(board_size=size, komi=komi, rules="chinese", setup=(),
                                to_move_at_start=BLACK, moves=tuple(moves[:t]),
                                source=f"sgf:{prefix}{g}"))
    return out


class FakeRecord:
    def __init__(self, position, policy, value, score_lead=None, ownership=None, teacher=0):
        self.position, self.policy, self.value = position, policy, value
        self.score_lead, self.ownership, self.teacher = score_lead, ownership, teacher


class FakeStore:
    """An in-memory label store with the ``LabelStore`` interface (counts record reads)."""

    def __init__(self, path: Path, records: Sequence[FakeRecord], teacher: dict | None = None):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "manifest.json").write_text(f"fake {len(records)} {id(self)}")
        self._records = list(records)
        self.teacher = teacher or {"name": "fake", "format": "test", "sha256": "ab" * 32,
                                   "symmetries": 1}
        self.teachers = [self.teacher]
        self.reads = 0

    def __len__(self) -> int:
        return len(self._records)

    def board_sizes(self, teacher: int | None = None) -> list[int]:
        return sorted({r.position.board_size for r in self._records
                       if teacher is None or r.teacher == teacher})

    def content_hash(self) -> str:
        from kosumi.distill.dataset import label_content_hash

        return label_content_hash(self.path)

    def records(self, board_size=None):
        self.reads += 1
        return (r for r in self._records
                if board_size is None or r.position.board_size == board_size)


def previous_own_move_target(state: GameState) -> int:
    """The synthetic teacher's move: where the side to move itself last played (the move
    before the last one), pass if there is none or it was a pass. Equivariant under the 8
    symmetries, and visible in the ``basic`` features (plane 8), so a tiny net can learn it."""
    n = state.size
    if len(state.moves) >= 2 and state.moves[-2][1] >= 0:
        return state.moves[-2][1]
    return n * n


def synthetic_outputs(state: GameState) -> tuple[np.ndarray, float, float, np.ndarray]:
    """(one-hot policy, win prob, score lead, ownership) of the synthetic teacher."""
    n = state.size
    pol = np.zeros(n * n + 1, dtype=np.float32)
    pol[previous_own_move_target(state)] = 1.0
    black = state.to_move == BLACK
    board = np.frombuffer(bytes(state.board), dtype=np.uint8)
    own = np.where(board == state.to_move, 1.0, np.where(board == 0, 0.0, -1.0))
    return pol, (0.7 if black else 0.3), (2.0 if black else -2.0), own.astype(np.float32)


class SyntheticTeacher(Evaluator):
    """A fixed, hand-written teacher (see ``synthetic_outputs``)."""

    name = "synthetic"

    def evaluate(self, states):
        out = []
        for s in states:
            pol, v, lead, own = synthetic_outputs(s)
            out.append(Evaluation(policy=pol, value=v, score_lead=lead, ownership=own))
        return out


def fake_store(path: Path, positions: Sequence[Position]) -> FakeStore:
    recs = []
    for p in positions:
        pol, v, lead, own = synthetic_outputs(p.to_state())
        recs.append(FakeRecord(p, pol, np.array([v, 1 - v, 0], np.float32), lead, own))
    return FakeStore(path, recs)


def make_label_folder(root: Path, size: int = 7, games: int = 40, length: int = 24,
                      seed: int = 1, teacher_file_bytes: bytes = b"synthetic teacher v1"
                      ) -> tuple[Path, Path]:
    """A REAL label folder (positions -> kosumi.distill.labels) labelled by the synthetic
    teacher; returns (label folder, teacher file whose sha256 the manifest records)."""
    from kosumi.distill.labels import label_positions
    from kosumi.distill.positions import write_positions

    root.mkdir(parents=True, exist_ok=True)
    teacher_file = root / "teacher.bin"
    teacher_file.write_bytes(teacher_file_bytes)
    pos_dir, lab_dir = root / "positions", root / "labels"
    write_positions(pos_dir, game_positions(size, games, length, seed, every=1))
    info = {"name": "teacher.bin", "format": "synthetic",
            "sha256": hashlib.sha256(teacher_file_bytes).hexdigest(), "symmetries": 1}
    label_positions(SyntheticTeacher(), pos_dir, lab_dir, teacher_info=info, batch=512)
    return lab_dir, teacher_file


def distill_options(labels: tuple[Path, Path], out: Path, **kw):  # -> DistillOptions
    """A small, fast ``kosumi distill`` run on ``make_label_folder``'s labels (a b1c8 student,
    20 steps of 16, 1 thread, CPU); ``kw`` overrides any option."""
    from kosumi.distill.train import DistillOptions

    lab, teacher = labels
    base = {"data": lab, "out": out, "teacher": str(teacher), "student": "b1c8", "steps": 20,
            "batch": 16, "lr": 3e-3, "val_fraction": 0.2, "eval_every": 10, "threads": 1,
            "device": "cpu", "cache_dir": out.parent / "cache", "progress": False,
            "argv": ["distill", "test"]}
    base.update(kw)
    return DistillOptions(**base)


# ============================================================================ positions by hand
def play_moves(moves: list[tuple[str, str]], size: int = 19, komi: float = 7.5) -> GameState:
    """A game of (colour, vertex) moves, e.g. [("B", "C16"), ("W", "D16")]."""
    s = GameState(size, komi)
    for color, vertex in moves:
        s.play(vertex_to_point(vertex, size), parse_color(color))
    return s


# The two constructed ladder positions of KataGo's reference file (dev-19x19-0001/0002): white
# D16 (liberties D15, E16) under black C16 D17 E17; the ladder D15 runs down-right towards Q4.
LADDER = [("B", "C16"), ("W", "D16"), ("B", "D17"), ("W", "Q16"), ("B", "E17")]

LADDER_WORKS = [*LADDER, ("W", "C4")]   # C4 is far from the ladder's path

LADDER_BROKEN = [*LADDER, ("W", "Q4")]  # Q4 sits on the path: a ladder breaker


# ============================================================================ small random nets
def lz_config(arch: str = "b1c8"):
    """A Leela Zero shaped config: lz18 features, lz head, 19x19, tanh value."""
    from kosumi.nets.config import NetConfig

    return NetConfig(arch=arch, features="lz18", head="lz", board_sizes=[19], value="tanh",
                     score_lead=False, ownership=False)


def random_inputs(config, size: int, batch: int = 2, seed: int = 0):
    """Random binary planes (and normal globals) for ``config``'s feature set, as torch tensors."""
    import torch

    from kosumi.nets.features import get_feature_set

    g = torch.Generator().manual_seed(seed)
    fs = get_feature_set(config.features)
    planes = (torch.rand(batch, fs.num_planes, size, size, generator=g) > 0.7).float()
    glob = torch.randn(batch, fs.num_globals, generator=g) if fs.num_globals else None
    return planes, glob


# ============================================================================ one-line errors
def one_line(fn, *needles: str) -> str:
    """``fn()`` raises a one-line KosumiError holding every needle; returns the message."""
    from kosumi.errors import KosumiError

    with pytest.raises(KosumiError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg, msg
    for n in needles:
        assert n in msg, msg
    return msg


# ============================================================================ the CLI
def cli(*args):
    """``kosumi ARGS...`` in process (typer's CliRunner), stdout and stderr apart."""
    from typer.testing import CliRunner

    from kosumi.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_line_error(result, *needles: str) -> None:
    """A CLI result that failed with exit 2 and one ``kosumi: error:`` line holding the needles."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("kosumi: error:"), err
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in err, err


# ============================================================================ SGF files
SGF_9 = b"(;GM[1]FF[4]SZ[9]KM[6.5];B[ee];W[cc];B[gc];W[tt];B[ge])"

SGF_13 = b"(;GM[1]FF[4]SZ[13]KM[0.5]HA[2]AB[dd][jj];W[gg];B[];W[])"

SGF_COLLECTION = b"(;SZ[9];B[aa];W[bb])(;SZ[9];B[ii])"


def write_sgfs(root: Path) -> Path:
    """A folder of SGF files (one in a subfolder, one collection of two games) and a non-SGF."""
    root.mkdir()
    (root / "a.sgf").write_bytes(SGF_9)
    (root / "sub").mkdir()
    (root / "sub" / "b.SGF").write_bytes(SGF_13)
    (root / "sub" / "collection.sgf").write_bytes(SGF_COLLECTION)
    (root / "notes.txt").write_text("not an sgf")
    return root


def export_onnx(model, out: Path, *extra: str) -> str:
    """``kosumi export MODEL --format onnx --out OUT`` (must succeed); its output."""
    r = cli("export", model, "--format", "onnx", "--out", out, *extra)
    assert r.exit_code == 0, r.output
    return r.output


# ------------------------------------------------------------------------- search records
def records(rows: list[dict]) -> array:
    """Search-node child records (kosumi.engine.puct) from dicts of field values: n, vl, w
    (default n), w2 (default n), u, u2 (default u^2), wl (default u); the rest 0."""
    from kosumi.engine import puct

    st = puct.new_records(len(rows))
    for i, r in enumerate(rows):
        n = r.get("n", 0.0)
        u = r.get("u", 0.0)
        vals = {puct.F_N: n, puct.F_VL: r.get("vl", 0.0), puct.F_W: r.get("w", n),
                puct.F_W2: r.get("w2", n), puct.F_U: u, puct.F_U2: r.get("u2", u * u),
                puct.F_WL: r.get("wl", u)}
        for f, v in vals.items():
            st[i * puct.NF + f] = v
    return st


def own(u: float, w: float = 1.0) -> array:
    """A node's own evaluation of utility ``u`` (win/loss alike) and weight ``w``."""
    from kosumi.engine import puct

    o = array("d", bytes(8 * puct.NOWN))
    o[puct.O_U] = u
    o[puct.O_WL] = u
    o[puct.O_W] = w
    return o


def agg_of(n: float, u: float, u2: float | None = None, w: float | None = None) -> array:
    """A node's own record: ``n`` visits (weight ``w``, default n), utility ``u``."""
    from kosumi.engine import puct

    a = puct.new_record()
    a[puct.F_N], a[puct.F_U], a[puct.F_W] = n, u, n if w is None else w
    a[puct.F_U2] = u * u if u2 is None else u2
    return a


# ------------------------------------------------------------------ boards for the C kernels
def board_diagram(*rows: str) -> tuple[int, bytearray]:
    """Rows from the top: 'X' black, 'O' white, '.' empty (spaces ignored)."""
    grid = [r.replace(" ", "") for r in rows]
    n = len(grid)
    assert all(len(r) == n for r in grid)
    return n, bytearray(".XO".index(c) for r in grid for c in r)


def state_ko(state: GameState, color: int) -> int:
    """The point ``color`` may not play for ko (-1: none)."""
    return state.ko if color == state.ko_color else -1


def random_legal_game(size: int, num_moves: int, rng: random.Random, rules="chinese"
                      ) -> GameState:
    """A random legal game (random empty points until one is legal; 3% passes)."""
    s = GameState(size, rules=rules)
    for _ in range(num_moves):
        empties = [p for p in range(size * size) if s.board[p] == 0]
        rng.shuffle(empties)
        move = next((p for p in empties if s.is_legal(p)), PASS)
        if rng.random() < 0.03:
            move = PASS
        s.play(move)
        if s.is_game_over():
            break
    return s


def random_board_positions(count: int, seed: int):
    """(size, board bytes, ko) from random games on sizes 2..19 at every stage, plus arbitrary
    random stone patterns (chains without liberties included)."""
    from kosumi.go.board import Rules

    rng = random.Random(seed)
    for i in range(count):
        size = 2 + i % 18
        if i % 4 == 3:
            fill = rng.random()
            board = bytes(rng.choice((0, 1, 2)) if rng.random() < fill else 0
                          for _ in range(size * size))
            yield size, board, rng.randrange(-1, size * size)
        else:
            s = random_legal_game(size, rng.randrange(0, 2 * size * size + 2), rng,
                                  rules=Rules(suicide=rng.random() < 0.5))
            yield size, bytes(s.board), state_ko(s, s.to_move)
