"""Pass-alive groups and territory (Benson's algorithm), and KataGo's area map built on them.

Benson's algorithm, for one colour P:

- A *region* is a maximal connected set of points that are empty or hold the opponent's stones
  and that contains at least one empty point (opponent-only chains are not regions).
- A region is *vital* to a P chain when every empty point of the region is adjacent to that chain
  (with multi-stone suicide legal: every point of the region, opponent stones included).
- Repeatedly remove every P chain with fewer than two vital regions, together with every region
  adjacent to a removed chain. The chains that remain are *pass-alive*: the opponent cannot
  capture them even if P always passes.
- A region bordered only by pass-alive chains is P's *pass-alive territory* when at most one of its
  points is not adjacent to a P stone, or when it holds no opponent stone at all.

``area_map`` is the area KataGo feeds its nets (input planes 18/19 under area scoring) and uses
for area counting: Black's analysis, then White's; pass-alive stones and pass-alive territory are
marked unconditionally (a region's opponent stones are dead and marked as P's); an empty region
bordered only by P stones (no opponent stone inside) is marked P if nothing claimed it already;
finally every unmarked stone counts for its own colour. Everything else is 0 (dame, or empty
points next to both colours).

Boards are N*N buffers (bytes/bytearray/uint8 numpy) row-major from the top-left, 0 empty,
1 black, 2 white.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kosumi.go.coords import neighbor_table

EMPTY, BLACK, WHITE = 0, 1, 2


@dataclass(frozen=True)
class PassAlive:
    """Benson's result for one colour (bool [N*N] arrays).

    stones      the colour's pass-alive stones
    territory   points of regions that are pass-alive territory (empty points and the opponent's
                dead stones inside them)
    big         points of empty regions (no opponent stone) bordered only by the colour, whether
                or not its chains are pass-alive ("unsafe big territory" in KataGo's terms)
    """

    stones: np.ndarray
    territory: np.ndarray
    big: np.ndarray


def _analyse(b: bytes, size: int, pla: int, suicide_legal: bool
             ) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """(pass-alive stones, pass-alive-territory regions, other empty-only regions bordered by pla).

    The last list excludes regions already in the second."""
    nb = neighbor_table(size)
    nn = size * size
    opp = 3 - pla

    # P chains
    chain_of = [-1] * nn
    chains: list[list[int]] = []
    for p in range(nn):
        if b[p] == pla and chain_of[p] < 0:
            cid = len(chains)
            stones = [p]
            chain_of[p] = cid
            i = 0
            while i < len(stones):
                s = stones[i]
                i += 1
                for q in nb[s]:
                    if b[q] == pla and chain_of[q] < 0:
                        chain_of[q] = cid
                        stones.append(q)
            chains.append(stones)
    if not chains:
        return [], [], []

    # regions: seeded at empty points, grown through empty and opponent points
    region_of = [-1] * nn
    regions: list[list[int]] = []
    vital: list[list[int]] = []
    internal: list[int] = []
    has_opp: list[bool] = []
    for p in range(nn):
        if b[p] != EMPTY or region_of[p] >= 0:
            continue
        rid = len(regions)
        members = [p]
        region_of[p] = rid
        cand = {chain_of[q] for q in nb[p] if chain_of[q] >= 0}
        n_internal = 0
        opp_inside = False
        i = 0
        while i < len(members):
            s = members[i]
            i += 1
            touches = False
            for q in nb[s]:
                if b[q] == pla:
                    touches = True
                elif region_of[q] < 0:
                    region_of[q] = rid
                    members.append(q)
            if b[s] == opp:
                opp_inside = True
            if not touches:
                n_internal += 1
            if cand and (suicide_legal or b[s] == EMPTY):
                # vital only to chains next to every (empty) point of the region
                cand = cand & {chain_of[q] for q in nb[s] if chain_of[q] >= 0} if touches \
                    else set()
        regions.append(members)
        vital.append(sorted(cand))
        internal.append(n_internal)
        has_opp.append(opp_inside)

    # Benson's iteration
    count = [0] * len(chains)
    for v in vital:
        for cid in v:
            count[cid] += 1
    killed = [False] * len(chains)
    bad_region = [False] * len(regions)
    changed = True
    while changed:
        changed = False
        for cid, stones in enumerate(chains):
            if killed[cid] or count[cid] >= 2:
                continue
            killed[cid] = True
            changed = True
            for s in stones:
                for q in nb[s]:
                    rid = region_of[q]
                    if rid >= 0 and not bad_region[rid]:
                        bad_region[rid] = True
                        for c2 in vital[rid]:
                            count[c2] -= 1

    alive = [s for cid, stones in enumerate(chains) if not killed[cid] for s in stones]
    territory: list[list[int]] = []
    big: list[list[int]] = []
    for rid, members in enumerate(regions):
        if not bad_region[rid] and (internal[rid] <= 1 or not has_opp[rid]):
            territory.append(members)
        elif not has_opp[rid]:
            big.append(members)
    return alive, territory, big


def pass_alive(board: bytes | bytearray, size: int, color: int,
               suicide_legal: bool = False) -> PassAlive:
    """Benson's analysis of ``color``'s chains (see the module docstring)."""
    b = bytes(board)
    nn = size * size
    if len(b) != nn:
        raise ValueError(f"a {size}x{size} board has {nn} points, got {len(b)}")
    alive, territory, big = _analyse(b, size, color, suicide_legal)
    stones = np.zeros(nn, dtype=bool)
    terr = np.zeros(nn, dtype=bool)
    bigm = np.zeros(nn, dtype=bool)
    stones[alive] = True
    for r in territory:
        terr[r] = True
        if not any(b[p] == 3 - color for p in r):
            bigm[r] = True
    for r in big:
        bigm[r] = True
    return PassAlive(stones, terr, bigm)


def area_map(board: bytes | bytearray, size: int, suicide_legal: bool = False) -> np.ndarray:
    """KataGo's area (int8 [N*N]: 1 black, 2 white, 0 neither); see the module docstring.

    ``suicide_legal``: compute pass-aliveness as if multi-stone suicide were legal (KataGo's
    g170 nets were trained with the rules' own setting; kosumi's ``chinese`` preset forbids it).
    """
    b = bytes(board)
    nn = size * size
    if len(b) != nn:
        raise ValueError(f"a {size}x{size} board has {nn} points, got {len(b)}")
    result = np.zeros(nn, dtype=np.int8)
    for pla in (BLACK, WHITE):
        alive, territory, big = _analyse(b, size, pla, suicide_legal)
        if alive:
            result[alive] = pla
        for r in territory:
            result[r] = pla
        for r in big:
            sub = result[r]
            sub[sub == 0] = pla
            result[r] = sub
    stones = np.frombuffer(b, dtype=np.uint8)
    unmarked = result == 0
    result[unmarked] = stones[unmarked]
    return result
