"""``distill.dataset_cache``: the cache key, the streamed writer and the mapped reader, against
numpy's own ``.npz`` reader, hashlib, and damaged or mismatched entries."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from kosumi.distill.dataset_cache import (
    StreamedNpz,
    cache_path,
    label_content_hash,
    load_cached,
    mapped_npz,
    save_cached,
)


def test_streamed_columns_widen_and_publish_atomically(tmp_path):
    path = tmp_path / "entry.npz"
    with StreamedNpz(path) as out:
        out.column("planes", np.uint8, (2,))
        out.column("empty", np.float32, (3,))
        out.append("planes", np.array([[0, 1], [1, 1]], np.uint8))
        out.append("planes", np.array([[0.5, 0]], np.float32))  # not 0/1: the column widens
        with pytest.raises(ValueError):
            out.append("planes", np.zeros((1, 3), np.uint8))
        tmp = out.tmp
        assert not path.exists()
        out.publish({"games": np.array(["a", "bb"])}, transform={"planes": lambda b: b * 2})
    assert not tmp.exists()
    arrays = mapped_npz(path)
    assert arrays["planes"].dtype == np.float32 and isinstance(arrays["planes"], np.memmap)
    np.testing.assert_array_equal(arrays["planes"], [[0, 2], [2, 2], [1, 0]])
    assert arrays["empty"].shape == (0, 3) and list(arrays["games"]) == ["a", "bb"]
    with np.load(path, allow_pickle=False) as npz:  # numpy's own reader agrees
        np.testing.assert_array_equal(npz["planes"], arrays["planes"])


def test_the_key_of_a_folder_without_a_manifest_follows_every_file(tmp_path):
    (tmp_path / "a").write_bytes(b"one")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"two")
    (tmp_path / ".hidden").write_bytes(b"ignored")
    h = hashlib.sha256()  # the documented recipe: sorted relative paths, NUL, content, NUL
    for name, data in (("a", b"one"), ("sub/b", b"two")):
        h.update(name.encode() + b"\0" + data + b"\0")
    assert label_content_hash(tmp_path) == h.hexdigest()
    (tmp_path / ".hidden").write_bytes(b"changed")  # hidden files do not count
    assert label_content_hash(tmp_path) == h.hexdigest()
    (tmp_path / "sub" / "b").write_bytes(b"tw0")
    assert label_content_hash(tmp_path) != h.hexdigest()
    a, b = cache_path(tmp_path, "x" * 64, "basic", 9), cache_path(tmp_path, "y" * 64, "basic", 9)
    assert a != b and a.name.endswith("-basic-9x9.npz")


def test_an_entry_is_trusted_only_when_intact_and_of_its_key(tmp_path):
    n, m = 3, 4
    meta = {"version": 3, "content_hash": "c" * 64, "feature_set": "basic", "planes": 2,
            "globals": 0, "board_size": n}
    arrays = {"planes": np.ones((m, 2, n, n), np.uint8),
              "policy": np.full((m, n * n + 1), 0.1, np.float32),
              "games": np.array(["g0", "g1"])}
    path = tmp_path / "e.npz"
    save_cached(path, arrays, meta)
    with np.load(path, allow_pickle=False) as npz:  # numpy's reader: the same entry
        assert json.loads(str(npz["meta"])) == meta
        np.testing.assert_array_equal(npz["policy"], arrays["policy"])
    got = load_cached(path, meta, ["planes", "policy", "games"])
    assert got is not None and isinstance(got["planes"], np.memmap)
    np.testing.assert_array_equal(got["planes"], arrays["planes"])
    assert load_cached(path, {**meta, "content_hash": "d" * 64}, ["planes"]) is None  # key
    assert load_cached(path, {**meta, "planes": 3}, ["planes"]) is None  # shape
    assert load_cached(path, meta, ["planes", "ownership"]) is None  # a field missing
    assert load_cached(tmp_path / "absent.npz", meta, ["planes"]) is None
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # damaged
    assert load_cached(path, meta, ["planes"]) is None


def test_a_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "e.npz"
    with pytest.raises(RuntimeError), StreamedNpz(path) as out:
        out.column("x", np.int32)
        out.append("x", np.arange(5, dtype=np.int32))
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writers_folder_is_removed_by_the_next_writer(tmp_path):
    import subprocess
    import sys

    # a real writer, killed with SIGKILL halfway through: its temporary folder stays behind
    code = ("import os, sys, numpy as np\n"
            "from kosumi.distill.dataset_cache import StreamedNpz\n"
            "out = StreamedNpz(__import__('pathlib').Path(sys.argv[1]))\n"
            "out.column('x', np.int32); out.append('x', np.arange(9, dtype=np.int32))\n"
            "print(out.tmp, flush=True); os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.npz")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == -9
    orphan = tmp_path / proc.stdout.strip().rsplit("/", 1)[-1]
    assert orphan.is_dir() and (orphan / "x.raw").stat().st_size == 36
    other_host = tmp_path / ".a.npz.elsewhere-1.abcd.tmp"  # another machine's: not ours to judge
    other_host.mkdir()
    # the first writer is alive while the second starts: its folder stays
    with StreamedNpz(tmp_path / "b.npz") as live, StreamedNpz(tmp_path / "c.npz") as out:
        assert not orphan.exists()
        assert live.tmp.is_dir() and other_host.is_dir() and out.tmp.is_dir()
