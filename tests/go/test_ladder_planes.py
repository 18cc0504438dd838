"""Ladder feature planes (kosumi.go.ladder_planes), checked by hand on small positions."""

from __future__ import annotations

import numpy as np
from helpers import LADDER_BROKEN, LADDER_WORKS, play_moves

from kosumi.go.coords import BLACK, WHITE, point_to_vertex
from kosumi.go.ladder_planes import ladder_features


def test_ladder_features_mark_chains_and_working_moves():
    lf = ladder_features(play_moves(LADDER_WORKS).board, 19, cache=False)
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.captured)] == ["D16"]
    assert [point_to_vertex(int(p), 19) for p in np.flatnonzero(lf.working[WHITE])] == ["D15"]
    assert not lf.working[BLACK].any()
    lf = ladder_features(play_moves(LADDER_BROKEN).board, 19, cache=False)
    assert not lf.captured.any() and not lf.working.any()
