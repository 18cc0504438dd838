"""The one way a benchmark hands over its figures: JSON on stdout, and in ``--out`` if given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(report: Any, out: Path | None) -> int:
    text = json.dumps(report, indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")
    return 0
