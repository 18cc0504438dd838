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

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kosumi import accel
from kosumi.go.coords import neighbor_table

#: the C version of ``area_map`` (None: the extension is not built, or predates it)
_C_AREA_MAP = getattr(accel.C, "area_map", None)

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
    chain_of, chains = _chains(b, nb, pla)
    if not chains:
        return [], [], []
    regions = _regions(b, nb, pla, chain_of, suicide_legal)
    killed, bad_region = _benson(chains, regions, nb)
    alive = [s for cid, stones in enumerate(chains) if not killed[cid] for s in stones]
    territory: list[list[int]] = []
    big: list[list[int]] = []
    for rid, r in enumerate(regions.members):
        if not bad_region[rid] and (regions.internal[rid] <= 1 or not regions.has_opp[rid]):
            territory.append(r)
        elif not regions.has_opp[rid]:
            big.append(r)
    return alive, territory, big


def _chains(b: bytes, nb: Sequence[Sequence[int]], pla: int
            ) -> tuple[list[int], list[list[int]]]:
    """Each point's chain of ``pla`` (-1 if none) and each chain's stones."""
    chain_of = [-1] * len(b)
    chains: list[list[int]] = []
    for p in range(len(b)):
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
    return chain_of, chains


@dataclass
class _Regions:
    """The regions not of ``pla``'s stones: seeded at empty points, grown through empty and
    opponent points."""

    of: list[int]  # each point's region (-1 for pla's stones)
    members: list[list[int]] = field(default_factory=list)
    vital: list[list[int]] = field(default_factory=list)  # the chains each region is vital to
    internal: list[int] = field(default_factory=list)  # points not next to a pla stone
    has_opp: list[bool] = field(default_factory=list)  # an opponent stone inside


def _regions(b: bytes, nb: Sequence[Sequence[int]], pla: int, chain_of: list[int],
             suicide_legal: bool) -> _Regions:
    out = _Regions(of=[-1] * len(b))
    region_of = out.of
    opp = 3 - pla
    for p in range(len(b)):
        if b[p] != EMPTY or region_of[p] >= 0:
            continue
        rid = len(out.members)
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
        out.members.append(members)
        out.vital.append(sorted(cand))
        out.internal.append(n_internal)
        out.has_opp.append(opp_inside)
    return out


def _benson(chains: list[list[int]], regions: _Regions, nb: Sequence[Sequence[int]]
            ) -> tuple[list[bool], list[bool]]:
    """Benson's iteration: remove chains with fewer than two vital regions, and the regions
    next to them, until nothing changes. (killed chains, bad regions)."""
    count = [0] * len(chains)
    for v in regions.vital:
        for cid in v:
            count[cid] += 1
    killed = [False] * len(chains)
    bad_region = [False] * len(regions.members)
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
                    rid = regions.of[q]
                    if rid >= 0 and not bad_region[rid]:
                        bad_region[rid] = True
                        for c2 in regions.vital[rid]:
                            count[c2] -= 1
    return killed, bad_region

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
    Runs in C (the extension's ``area_map``, ``kosumi.accel.C``) when it is built, else
    ``area_map_py``.
    """
    b = bytes(board)
    if len(b) != size * size:
        raise ValueError(f"a {size}x{size} board has {size * size} points, got {len(b)}")
    if _C_AREA_MAP is None:
        return area_map_py(b, size, suicide_legal)
    return np.frombuffer(_C_AREA_MAP(b, size, bool(suicide_legal)), dtype=np.int8).copy()


def area_map_py(board: bytes | bytearray, size: int, suicide_legal: bool = False
                ) -> np.ndarray:
    """``area_map`` in Python: the algorithm as the module docstring states it."""
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
