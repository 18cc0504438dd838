"""``nets.gzipped.gunzip`` against Python's own ``gzip`` module (the oracle for what a gzip file
holds): members one after another, zero padding, and each way a file can be wrong."""

from __future__ import annotations

import gzip
import os
import zlib

import pytest

from kosumi.errors import KosumiError
from kosumi.nets.gzipped import GZIP_MAGIC, gunzip

DATA = os.urandom(50_000) + b"kosumi " * 20_000


def test_members_and_padding_read_as_gzip_reads_them():
    one = gzip.compress(DATA)
    assert one[:2] == GZIP_MAGIC
    assert gunzip(one, 1 << 30, "a.gz", "test file") == gzip.decompress(one) == DATA
    two = gzip.compress(DATA[:1000]) + gzip.compress(DATA[1000:])
    assert gunzip(two, 1 << 30, "b.gz", "test file") == gzip.decompress(two) == DATA
    assert gunzip(one + b"\0" * 64, 1 << 30, "c.gz", "test file") == DATA  # padding
    assert gunzip(gzip.compress(b""), 10, "empty.gz", "test file") == b""


def test_the_size_cap_holds_on_a_zip_bomb():
    bomb = gzip.compress(b"\0" * (40 << 20))  # 40 MiB of zeros in about 40 KB
    assert len(bomb) < 100_000
    limit = 1 << 20
    with pytest.raises(KosumiError, match=r"^bomb.gz: decompresses to more than 1 MiB; not a "
                                          r"KataGo model$"):
        gunzip(bomb, limit, "bomb.gz", "KataGo model")
    assert len(gunzip(bomb, 40 << 20, "bomb.gz", "KataGo model")) == 40 << 20  # at the cap


@pytest.mark.parametrize("case, needle", [
    ("truncated", "truncated gzip file"),
    ("header only", "truncated gzip file"),
    ("corrupted", "corrupted gzip data"),
    ("garbage", "bytes of garbage after the gzip data"),
])
def test_bad_files_are_one_line(case, needle):
    good = gzip.compress(DATA)
    raw = {"truncated": good[: len(good) // 2], "header only": good[:10],
           "corrupted": good[:20] + bytes(b ^ 0x55 for b in good[20:60]) + good[60:],
           "garbage": good + b"junk"}[case]
    with pytest.raises((EOFError, OSError, zlib.error)):
        gzip.decompress(raw)  # the oracle refuses it too
    with pytest.raises(KosumiError) as e:
        gunzip(raw, 1 << 30, "net.gz", "Leela Zero net")
    text = str(e.value)
    assert text.startswith("net.gz: ") and needle in text and "\n" not in text
