"""gunzip with a size cap: the one reader of gzipped model files (KataGo, Leela Zero).

``gunzip(raw, limit, source, what)`` decompresses every gzip member of ``raw`` (as ``gzip``
writes them one after another), refusing to produce more than ``limit`` bytes, so that a
crafted file cannot exhaust memory. Zero bytes after the last member are padding and are
ignored. Truncated or corrupt data, output beyond the cap and trailing garbage each raise a
one-line ``KosumiError`` starting with ``source`` and naming ``what`` the file should be.
"""

from __future__ import annotations

import zlib

from kosumi.errors import KosumiError

GZIP_MAGIC = b"\x1f\x8b"
_STEP = 1 << 24  # decompress in pieces of at most 16 MiB, checking the cap between them


def _size(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{n >> 20} MiB"


def gunzip(raw: bytes, limit: int, source: str, what: str) -> bytes:
    """The decompressed bytes of every member of ``raw`` (see the module docstring)."""
    parts: list[bytes] = []
    total = 0
    data = raw
    while True:
        d = zlib.decompressobj(wbits=31)
        try:
            while True:
                chunk = d.decompress(data, _STEP)
                total += len(chunk)
                if total > limit:
                    raise KosumiError(f"{source}: decompresses to more than {_size(limit)}; "
                                      f"not a {what}")
                parts.append(chunk)
                data = d.unconsumed_tail
                if d.eof or not data:
                    break
        except zlib.error as e:
            raise KosumiError(f"{source}: corrupted gzip data ({e}); not a {what}") from None
        if not d.eof:
            raise KosumiError(f"{source}: truncated gzip file (the compressed data ends early)")
        data = d.unused_data
        if not data.strip(b"\0"):
            return b"".join(parts)
        if not data.startswith(GZIP_MAGIC):
            raise KosumiError(f"{source}: {len(data)} bytes of garbage after the gzip data")


__all__ = ["GZIP_MAGIC", "gunzip"]
