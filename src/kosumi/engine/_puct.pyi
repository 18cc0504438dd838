"""Types of the C extension built from _puct.c; kosumi.engine.puct documents both functions and
holds the Python versions (same signatures, same bits)."""

from array import array

from typing_extensions import Buffer

def select_child(st: Buffer | array[float], priors: Buffer | array[float],
                 agg: Buffer | array[float], params: Buffer | array[float], own_utility: float,
                 sign: float, is_root: float, /) -> int: ...
def update_node(st: Buffer | array[float], priors: Buffer | array[float],
                own: Buffer | array[float], params: Buffer | array[float], sign: float,
                agg: Buffer | array[float], parent_st: Buffer | array[float] | None, slot: int,
                vl_release: float, bias: Buffer | array[float] | None, /) -> None: ...
