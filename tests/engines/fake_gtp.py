#!/usr/bin/env python3
"""A tiny misbehaving GTP engine for arena tests: ``fake_gtp.py BEHAVIOUR``.

Behaviours (what ``genmove`` does):
  illegal  always answers A1 (illegal once A1 is occupied)
  garbage  answers an unparsable vertex (Z99)
  crash    exits with status 3 at the first genmove
  hang     never answers genmove (sleeps)
  resign   resigns at once
  noisy    writes 2 MB to stderr, then passes (blocks unless the client drains stderr)
  random   a random legal move (kosumi's rules), in lower case; PASS in upper case
           after PASS_AFTER (default 20) moves of its own
  script   the moves of SCRIPT = "M1,M2,...;C1,C2,..." in order, then C1, C2, ... forever
  meet     at its first genmove, creates the file MARK, waits up to 10 s until COUNT files are
           in MARK's folder (COUNT engines have got there), then resigns; exits 4 if they never
           are (two such engines meet only when two games are played at once)
Usage: fake_gtp.py BEHAVIOUR [SEED [PASS_AFTER]]  or  fake_gtp.py script SCRIPT  or
       fake_gtp.py meet MARK COUNT
It answers the setup commands (boardsize, komi, clear_board, play, ...) normally.
"""

import os
import random
import sys
import time

behaviour = sys.argv[1] if len(sys.argv) > 1 else "random"
script, cycle = [], []
if behaviour == "script":
    head, _, tail = sys.argv[2].partition(";")
    script, cycle = head.split(","), tail.split(",")
meet = sys.argv[2:4] if behaviour == "meet" else None
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 and not (script or meet) else 1)
pass_after = int(sys.argv[3]) if len(sys.argv) > 3 and not meet else 20
state = None
size, komi = 19, 7.5
own_moves = 0


def new_state():
    from kosumi.go.board import GameState

    return GameState(size, komi)


def reply(text="", ok=True):
    sys.stdout.write(("= " if ok else "? ") + text + "\n\n")
    sys.stdout.flush()


for line in sys.stdin:
    parts = line.split()
    if not parts:
        continue
    cmd, args = parts[0].lower(), parts[1:]
    if cmd == "quit":
        reply()
        break
    if cmd == "name":
        reply(f"fake-{behaviour}")
    elif cmd == "protocol_version":
        reply("2")
    elif cmd == "version":
        reply("0")
    elif cmd == "boardsize":
        size = int(args[0])
        reply()
    elif cmd == "komi":
        komi = float(args[0])
        reply()
    elif cmd == "clear_board":
        state, own_moves = None, 0
        reply()
    elif cmd == "play":
        if behaviour == "random":
            from kosumi.go.coords import parse_color, vertex_to_point

            state = state or new_state()
            state.play(vertex_to_point(args[1], size), parse_color(args[0]))
        reply()
    elif cmd == "genmove":
        if behaviour == "illegal":
            reply("A1")
        elif behaviour == "garbage":
            reply("Z99")
        elif behaviour == "crash":
            sys.stderr.write("fake engine: segmentation fault (not really)\n")
            sys.stderr.flush()
            sys.exit(3)
        elif behaviour == "hang":
            time.sleep(3600)
        elif behaviour == "resign":
            reply("resign")
        elif behaviour == "meet":
            mark, count = meet[0], int(meet[1])
            open(mark, "w").close()
            deadline = time.monotonic() + 10.0
            while len(os.listdir(os.path.dirname(mark))) < count:
                if time.monotonic() > deadline:
                    sys.exit(4)
                time.sleep(0.05)
            reply("resign")
        elif behaviour == "script":
            reply(script[own_moves] if own_moves < len(script)
                  else cycle[(own_moves - len(script)) % len(cycle)])
            own_moves += 1
        elif behaviour == "noisy":
            for i in range(20000):
                sys.stderr.write(f"noise line {i} " + "x" * 90 + "\n")
            sys.stderr.flush()
            reply("pass")
        else:
            from kosumi.go.coords import parse_color, point_to_vertex

            state = state or new_state()
            color = parse_color(args[0])
            legal = [int(p) for p in state.legal_mask(color).nonzero()[0]]
            own_moves += 1
            if own_moves > pass_after or not legal:
                state.play(-1, color)
                reply("PASS")
            else:
                p = rng.choice(legal)
                state.play(p, color)
                reply(point_to_vertex(p, size).lower())
    else:
        reply("unknown command", ok=False)
