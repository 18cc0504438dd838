"""Types of the C extension built from _ladders.c; kosumi.go.ladder_planes documents both
readings and holds the Python versions (same results)."""

import numpy as np
from typing_extensions import Buffer

def ladder_planes(board: Buffer | np.ndarray, size: int, ko: int, /) -> tuple[bytes, bytes]: ...
def dead_ladder_escapes(board: Buffer | np.ndarray, size: int, color: int, ko: int, /) -> bytes: ...
