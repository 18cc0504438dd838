"""Reversible byte layouts of a tensor: how a pack stores each tensor so that it compresses well.

A layout is a short list of steps, applied in order when writing and undone in reverse when
reading; every step is exact (the tensor reads back bit for bit):

- ``transpose`` {"axes": [...]}: the tensor's axes reordered (e.g. a conv weight [O, I, k, k]
  stored [k, k, I, O], so that the values of one input channel or tap sit together);
- ``permute`` {"order": [...]}: the first axis (output channels) reordered, e.g. so that similar
  filters sit next to each other; the order is stored, the reader puts it back;
- ``table`` {"values": [...]}: a tensor with at most 256 distinct values (int32 biases of a
  quantized net, fp16 weights of a small net) stored as uint8 indices into a value table;
- ``byteplanes`` {}: a multi-byte tensor (int32, float16, float32) stored plane by plane (all
  first bytes, then all second bytes, ...), which puts the rarely changing high bytes together;
- ``delta`` {}: an integer tensor stored as differences of consecutive values (mod 2^bits).

Needs numpy only (a pack's loader runs without torch or onnx).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kosumi.errors import KosumiError

STEPS = ("transpose", "permute", "table", "byteplanes", "delta")


def apply_layout(arr: np.ndarray, steps: list[dict[str, Any]]) -> np.ndarray:
    """The tensor in the layout's storage form (a 1-D array of some dtype)."""
    x = np.asarray(arr)
    for step in steps:
        kind = step["kind"]
        if kind == "transpose":
            x = np.ascontiguousarray(x.transpose(step["axes"]))
        elif kind == "permute":
            x = np.ascontiguousarray(x[np.asarray(step["order"], dtype=np.int64)])
        elif kind == "table":
            values = np.asarray(step["values"], dtype=x.dtype)
            x = np.searchsorted(values, x).astype(np.uint8)
        elif kind == "byteplanes":
            b = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
            x = np.ascontiguousarray(b.reshape(-1, x.dtype.itemsize).T)
        elif kind == "delta":
            flat = x.reshape(-1)
            u = flat.view(np.dtype(f"u{flat.dtype.itemsize}"))
            x = np.concatenate([u[:1], np.diff(u)]).astype(u.dtype)
        else:
            raise KosumiError(f"unknown layout step {kind!r}")
    return x


def undo_layout(stored: np.ndarray, steps: list[dict[str, Any]], dtype: np.dtype,
                shape: list[int]) -> np.ndarray:
    """The tensor back from its storage form (the inverse of ``apply_layout``)."""
    # the shapes and dtypes each step saw, forwards
    seen: list[tuple[np.dtype, tuple[int, ...]]] = []
    dt, sh = np.dtype(dtype), tuple(shape)
    for step in steps:
        seen.append((dt, sh))
        kind = step["kind"]
        if kind == "transpose":
            sh = tuple(sh[a] for a in step["axes"])
        elif kind == "table":
            dt = np.dtype(np.uint8)
        elif kind == "byteplanes":
            sh, dt = (dt.itemsize, int(np.prod(sh, dtype=np.int64))), np.dtype(np.uint8)
        elif kind == "delta":
            sh, dt = (int(np.prod(sh, dtype=np.int64)),), np.dtype(f"u{dt.itemsize}")
    x = np.asarray(stored)
    for step, (dt, sh) in zip(reversed(steps), reversed(seen), strict=True):
        kind = step["kind"]
        if kind == "transpose":
            inverse = np.argsort(step["axes"])
            x = x.reshape(tuple(sh[a] for a in step["axes"])).transpose(inverse)
        elif kind == "permute":
            x = x.reshape(sh)
            out = np.empty_like(x)
            out[np.asarray(step["order"], dtype=np.int64)] = x
            x = out
        elif kind == "table":
            x = np.asarray(step["values"], dtype=dt)[x.reshape(sh).astype(np.int64)]
        elif kind == "byteplanes":
            x = np.ascontiguousarray(x.reshape(dt.itemsize, -1).T).view(dt).reshape(sh)
        elif kind == "delta":
            u = np.cumsum(x.astype(np.uint64), dtype=np.uint64).astype(
                np.dtype(f"u{dt.itemsize}"))
            x = u.view(dt).reshape(sh)
    return np.ascontiguousarray(x.reshape(shape).astype(dtype, copy=False))


def table_step(arr: np.ndarray) -> dict[str, Any] | None:
    """A ``table`` step for a tensor of at most 256 distinct values (None otherwise)."""
    values = np.unique(arr)
    if values.size > 256 or arr.dtype == np.uint8 or arr.dtype == np.int8:
        return None
    return {"kind": "table", "values": values.tolist()}


def similar_order(arr: np.ndarray) -> list[int]:
    """An order of the first axis that puts similar slices next to each other: greedy nearest
    neighbour from the slice of smallest norm (L1 distance)."""
    flat = arr.reshape(arr.shape[0], -1).astype(np.float64)
    n = flat.shape[0]
    left = set(range(n))
    cur = int(np.argmin(np.abs(flat).sum(axis=1)))
    order = [cur]
    left.discard(cur)
    while left:
        rest = np.fromiter(left, dtype=np.int64)
        d = np.abs(flat[rest] - flat[cur]).sum(axis=1)
        cur = int(rest[int(np.argmin(d))])
        order.append(cur)
        left.discard(cur)
    return order
