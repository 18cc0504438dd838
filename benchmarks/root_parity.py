"""Ruling out plain faults: kosumi's search and KataGo's, same net, same positions, same visits.

    python benchmarks/root_parity.py [--model PATH] [--visits 100] [--positions 40]
                                     [--sizes 9,19] [--baseline] [--out report.json]

On KataGo's reference positions (``../shared/reference``), both engines search each position
with ``kata-genmove_analyze`` (kosumi gtp with the g170 net read by kosumi's loader; KataGo with
its GTP config and ``maxVisits``), and their final root statistics are compared: the chosen
move, the best move's win rate and score lead (for the side to move), the share of visits on
it. The raw net is compared beside it (``kata-raw-nn 0`` against kosumi's evaluator at the
identity symmetry): a sign, side-to-move, komi or no-result slip in how kosumi's search reads
KataGo's heads would show as win rates or leads that disagree in sign or size. KataGo evaluates
each node under a random symmetry, so the searches differ by noise even where nothing is wrong;
``--baseline`` measures that noise: a second KataGo process in kosumi's place (the "kosumi"
columns are then that KataGo's).
Prints one JSON object (and writes it to ``--out``). KataGo needs ``apt-get install -y libzip4``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from emit import emit

from kosumi.engine.gtp_client import EngineError, GTPProcess
from kosumi.go.board import GameState
from kosumi.go.coords import parse_color, vertex_to_point
from kosumi.runtime import load_evaluator

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
KATAGO = SHARED / "engines" / "katago-v1.17.2-eigen"
KATAGO_CFG = SHARED / "engines" / "katago-gtp.cfg"
G170 = SHARED / "models" / "g170-b6c96-s175395328-d26788732.bin.gz"
REFERENCE = SHARED / "reference" / "katago-g170-b6c96" / "raw_nn.jsonl"


def last_info(reply: str) -> list[dict]:
    """The moves of the last ``info`` line of a kata-genmove_analyze reply."""
    lines = [ln for ln in reply.splitlines() if ln.startswith("info ")]
    if not lines:
        return []
    moves = []
    for chunk in lines[-1].split("info ")[1:]:
        tok = chunk.split()
        rec: dict = {}
        i = 0
        while i < len(tok):
            if tok[i] == "pv":
                break
            rec[tok[i]] = tok[i + 1]
            i += 2
        moves.append(rec)
    return moves


def setup(proc: GTPProcess, record: dict) -> None:
    n = record["board_size"]
    for cmd in (f"boardsize {n}", f"komi {record['komi']:g}", "clear_board"):
        proc.send(cmd, timeout=60)
    for c, v in record["moves"]:
        proc.send(f"play {c} {v}", timeout=60)


def search(proc: GTPProcess, record: dict) -> dict:
    """The search's root statistics (it plays its move: set the position up again after)."""
    setup(proc, record)
    color = record["to_move"]
    reply = proc.send(f"kata-genmove_analyze {color} 100000", timeout=600)
    moves = last_info(reply)
    played = reply.strip().splitlines()[-1].split()[-1]
    best = moves[0] if moves else {}
    total = sum(int(m["visits"]) for m in moves) or 1
    return {"move": played.upper(), "best_winrate": float(best.get("winrate", "nan")),
            "best_lead": float(best.get("scoreLead", "nan")),
            "best_share": int(best.get("visits", 0)) / total}


def raw_katago(proc: GTPProcess, record: dict) -> dict:
    setup(proc, record)
    reply = proc.send("kata-raw-nn 0", timeout=60)
    tok = reply.split()
    vals = {tok[i]: tok[i + 1] for i in range(len(tok) - 1) if tok[i] in ("whiteWin",
                                                                          "whiteLead")}
    white = record["to_move"] == "W"
    win = float(vals["whiteWin"])
    lead = float(vals["whiteLead"])
    return {"winrate": win if white else 1.0 - win, "lead": lead if white else -lead}


def replay(record: dict) -> GameState:
    n = record["board_size"]
    s = GameState(n, record["komi"], "chinese")
    for c, v in record["moves"]:
        s.play(vertex_to_point(v, n), parse_color(c))
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=G170)
    ap.add_argument("--visits", type=int, default=100)
    ap.add_argument("--positions", type=int, default=40, help="per board size")
    ap.add_argument("--sizes", default="9,19")
    ap.add_argument("--baseline", action="store_true",
                    help="a second KataGo in kosumi's place: the agreement of KataGo with itself")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not KATAGO.exists() or not REFERENCE.exists():
        print(f"root_parity: error: needs {KATAGO} and {REFERENCE}", file=sys.stderr)
        return 2
    records = [json.loads(line) for line in REFERENCE.read_text().splitlines()]
    kosumi_cmd = [sys.executable, "-m", "kosumi", "gtp", "--model", str(args.model), "--visits",
                  str(args.visits), "--batch", "1", "--threads", "1",
                  "--resign-threshold", "0",
                  "--set", "ladder_escape_prior=1"]  # KataGo has no such rule
    katago_cmd = [str(KATAGO), "gtp", "-model", str(args.model), "-config", str(KATAGO_CFG),
                  "-override-config", f"maxVisits={args.visits}"]
    if args.baseline:
        kosumi_cmd = katago_cmd
    ev = load_evaluator(str(args.model), threads=1, cache=False)
    report: dict = {"model": args.model.name, "visits": args.visits,
                    "first": "katago" if args.baseline else "kosumi"}
    try:
        with GTPProcess(kosumi_cmd, name="kosumi") as kos, \
                GTPProcess(katago_cmd, name="katago") as kata:
            for size in (int(x) for x in args.sizes.split(",")):
                recs = [r for r in records if r["board_size"] == size
                        and r.get("selected_as") != "constructed"][: args.positions]
                rows = []
                for r in recs:
                    a, b = search(kos, r), search(kata, r)
                    raw_k = raw_katago(kata, r)
                    e = ev.evaluate([replay(r)])[0]
                    rows.append({"id": r["id"], "kosumi": a, "katago": b, "raw": raw_k,
                                 "raw_winrate_diff": e.value - raw_k["winrate"],
                                 "raw_lead_diff": float(e.score_lead) - raw_k["lead"]})
                report[f"{size}x{size}"] = summarize(rows)
    except EngineError as e:
        print(f"root_parity: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    return emit(report, args.out)


def worst(rows: list[dict], k: int = 3) -> list[dict]:
    """The positions where the two searches' win rates differ most."""
    rows = sorted(rows, key=lambda r: -abs(r["kosumi"]["best_winrate"]
                                           - r["katago"]["best_winrate"]))
    return [{"id": r["id"], "kosumi": r["kosumi"], "katago": r["katago"],
             "raw_winrate": round(r["raw"]["winrate"], 4)} for r in rows[:k]]


def summarize(rows: list[dict]) -> dict:
    def mean(xs: list[float]) -> float:
        return round(statistics.fmean(xs), 4)

    same = [r["kosumi"]["move"] == r["katago"]["move"] for r in rows]
    dw = [abs(r["kosumi"]["best_winrate"] - r["katago"]["best_winrate"]) for r in rows]
    dl = [abs(r["kosumi"]["best_lead"] - r["katago"]["best_lead"]) for r in rows]
    side = [(r["kosumi"]["best_winrate"] > 0.5) == (r["katago"]["best_winrate"] > 0.5)
            for r in rows]
    return {
        "positions": len(rows),
        "same_move": mean([float(x) for x in same]),
        "best_winrate_abs_diff_mean": mean(dw), "best_winrate_abs_diff_max": round(max(dw), 4),
        "best_lead_abs_diff_mean": mean(dl), "best_lead_abs_diff_max": round(max(dl), 2),
        "winrate_same_side_of_half": mean([float(x) for x in side]),
        "best_visit_share": {"kosumi": mean([r["kosumi"]["best_share"] for r in rows]),
                             "katago": mean([r["katago"]["best_share"] for r in rows])},
        "raw_winrate_abs_diff_max": round(max(abs(r["raw_winrate_diff"]) for r in rows), 6),
        "raw_lead_abs_diff_max": round(max(abs(r["raw_lead_diff"]) for r in rows), 4),
        "most_different": worst(rows),
    }


if __name__ == "__main__":
    sys.exit(main())
