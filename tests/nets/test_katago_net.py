"""KataGo's network as a torch module (kosumi.nets.katago_net): its pools, and its raw outputs
against the real KataGo engine.

Oracles: KataGo's pooling formulas applied by hand to a small tensor, and the KataGo engine's
own outputs for the g170 net (raw_nn.jsonl), reached from the module's raw outputs by KataGo's
documented post-processing written out here (softmax over the legal points, win/loss/noResult
softmax, lead = raw * 20 * (1 - noResult)), not by kosumi's evaluator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import katago_policy

from kosumi.nets.katago_net import gpool, value_pool


def test_pools_by_hand():
    # one channel on a 2x2 board whose 3 on-board points hold 1, 2, 3 (the 4th is off-board: 0)
    x = torch.tensor([[[[1.0, 2.0], [3.0, 0.0]]]])
    area = torch.tensor([[3.0]])
    mean = 6.0 / 3  # the mean over the on-board area, not over the 4 cells
    k = (math.sqrt(3) - 14) / 10
    g = gpool(x, area)
    assert g.shape == (1, 3)
    np.testing.assert_allclose(g[0].tolist(), [mean, mean * k, 3.0], rtol=1e-6)
    v = value_pool(x, area)
    np.testing.assert_allclose(
        v[0].tolist(), [mean, mean * k, mean * ((math.sqrt(3) - 14) ** 2 / 100 - 0.1)],
        rtol=1e-6)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def test_raw_outputs_match_katago(katago_model, reference_positions, reference_states):
    from kosumi.nets.checkpoint import build_net
    from kosumi.nets.features import get_feature_set
    from kosumi.nets.katago import read_katago_model

    net = build_net(read_katago_model(katago_model)).eval()
    fs = get_feature_set("katago_v7")
    picked = list(range(0, 300, 25))  # both sizes (the file has 150 of each, 19x19 first)
    assert {reference_states[i].size for i in picked} == {9, 19}
    for i in picked:
        rec, state = reference_positions[i], reference_states[i]
        planes, glob = fs.encode([state])
        with torch.no_grad():
            out = {k: v[0].double().numpy()
                   for k, v in net(torch.from_numpy(planes), torch.from_numpy(glob)).items()}
        n2 = state.num_points
        assert out["policy"].shape == (n2 + 1,) and out["ownership"].shape == (n2,)
        legal = np.append(state.legal_mask(), True)
        policy = np.where(legal, np.exp(out["policy"] - out["policy"][legal].max()), 0.0)
        policy /= policy.sum()
        np.testing.assert_allclose(policy, katago_policy(rec), atol=2e-3, err_msg=rec["id"])
        win, loss, no_result = softmax(out["value"])
        k = rec["katago_raw_nn"]
        white = rec["to_move"] == "W"
        assert win == pytest.approx(k["whiteWin"] if white else k["whiteLoss"], abs=2e-3)
        assert loss == pytest.approx(k["whiteLoss"] if white else k["whiteWin"], abs=2e-3)
        assert no_result == pytest.approx(k["noResult"], abs=2e-3)
        lead = out["score"][2] * 20 * (1 - no_result)
        assert lead == pytest.approx(k["whiteLead"] * (1 if white else -1), abs=0.05)
        own = np.tanh(out["ownership"]) * (1 if white else -1)
        assert np.abs(own - np.array(k["whiteOwnership"])).mean() < 0.01, rec["id"]
