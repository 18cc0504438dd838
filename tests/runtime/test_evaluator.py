"""Evaluator plumbing (kosumi.runtime.evaluator): batching states by board size."""

from __future__ import annotations

import torch

torch.set_num_threads(1)


def test_same_size_chunks_partition_by_size_and_limit():
    from kosumi.go.board import GameState
    from kosumi.runtime.evaluator import same_size_chunks

    sizes = [9, 19, 9, 9, 13, 19, 9, 9]
    states = [GameState(n) for n in sizes]
    chunks = same_size_chunks(states, 3)
    assert sorted(i for c in chunks for i in c) == list(range(len(states)))
    assert all(len(c) <= 3 and len({sizes[i] for i in c}) == 1 for c in chunks)
    assert [sizes[c[0]] for c in chunks] == [9, 9, 19, 13]  # first-seen order, 5 nines -> 3 + 2
