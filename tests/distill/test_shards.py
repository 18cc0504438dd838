"""Shard folders (kosumi.distill.shards): zstd frames listed by one JSON manifest with their
SHA-256, written atomically, read back checked, one writer at a time.

Oracles: the zstandard library, hashlib and numpy's own ``.npz`` reader decode what is written
(independent readers of the format), the manifest is read back with ``json``, and damage made by
hand is refused naming the file.
"""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pytest
import zstandard

from kosumi.distill.shards import (
    MANIFEST,
    ShardDir,
    arrays_to_bytes,
    bytes_to_arrays,
    compress,
    decompress,
    manifest_content_hash,
    sha256_file,
)
from kosumi.errors import KosumiError

KIND = "kosumi-labels"


def test_compress_is_one_standard_zstd_frame():
    data = b"kosumi " * 1000
    raw = compress(data)
    assert len(raw) < len(data) // 10
    assert zstandard.ZstdDecompressor().decompress(raw) == data  # content size in the frame
    assert decompress(zstandard.ZstdCompressor().compress(b"abc"), "x") == b"abc"
    with pytest.raises(KosumiError, match=r"shard\.zst: corrupted shard"):
        decompress(b"not zstd at all", "shard.zst")


def test_arrays_round_trip_as_a_plain_npz(tmp_path):
    arrays = {"policy": np.arange(12, dtype=np.float32).reshape(3, 4),
              "keys": np.array([b"ab", b"cd"]), "count": np.int64(7) * np.ones(1, np.int64)}
    data = arrays_to_bytes(arrays)
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:  # numpy reads it itself
        assert sorted(npz.files) == sorted(arrays)
        np.testing.assert_array_equal(npz["policy"], arrays["policy"])
    back = bytes_to_arrays(data, "s")
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype
        np.testing.assert_array_equal(back[k], a)
    with pytest.raises(ValueError, match="dtype object"):
        arrays_to_bytes({"x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(KosumiError, match=r"s\.npz: corrupted shard"):
        bytes_to_arrays(b"not an npz archive", "s.npz")  # numpy would need pickle: refused
    for cut in (len(data) // 2, len(data) - 10):  # a zip without its central directory
        with pytest.raises(KosumiError, match=r"^s\.npz: corrupted shard"):
            bytes_to_arrays(data[:cut], "s.npz")


def test_sha256_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 3_000_000)
    assert sha256_file(path, chunk=1000) == hashlib.sha256(b"x" * 3_000_000).hexdigest()
    with pytest.raises(KosumiError, match="cannot read"):
        sha256_file(tmp_path / "missing")


def test_shards_are_listed_with_their_hash_and_read_back(tmp_path):
    folder = tmp_path / "labels"
    d = ShardDir(folder, KIND, create=True)
    assert not folder.exists() and len(d) == 0  # nothing written before the first shard
    d.add_shard("a.zst", b"first payload", {"count": 2})
    d.add_shard("b.zst", b"second", {"count": 5, "size": 9})
    raw_manifest = (folder / MANIFEST).read_bytes()
    manifest = json.loads(raw_manifest)
    assert manifest["format"] == KIND and manifest["version"] == 1
    assert [s["file"] for s in manifest["shards"]] == ["a.zst", "b.zst"]
    assert manifest["shards"][1]["size"] == 9
    for s in manifest["shards"]:  # the listed hash is the compressed file's
        assert s["sha256"] == hashlib.sha256((folder / s["file"]).read_bytes()).hexdigest()
    again = ShardDir(folder, KIND)
    assert len(again) == 7 and again.manifest_bytes == raw_manifest
    assert [again.read_shard(s) for s in again.shards] == [b"first payload", b"second"]
    assert ShardDir(folder / MANIFEST, KIND).path == folder  # the manifest itself may be named
    assert manifest_content_hash(raw_manifest) == hashlib.sha256(
        b"manifest.json\0" + raw_manifest + b"\0").hexdigest()


def test_damage_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "labels"
    d = ShardDir(folder, KIND, create=True)
    entry = d.add_shard("a.zst", b"payload", {"count": 1})
    shard = folder / "a.zst"
    good = shard.read_bytes()
    shard.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(KosumiError, match=r"a.zst: corrupted shard \(SHA-256"):
        d.read_shard(entry)
    shard.unlink()
    with pytest.raises(KosumiError, match=r"a\.zst: cannot read shard"):
        d.read_shard(entry)
    with pytest.raises(KosumiError, match="no such folder"):
        ShardDir(tmp_path / "nope", KIND)
    (tmp_path / "empty").mkdir()
    with pytest.raises(KosumiError, match="missing"):
        ShardDir(tmp_path / "empty", KIND)
    (tmp_path / "file").write_text("x")
    with pytest.raises(KosumiError, match="not a folder"):
        ShardDir(tmp_path / "file", KIND, create=True)
    manifest = folder / MANIFEST
    cases = [
        ("{", "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"format": "kosumi-positions", "version": 1, "shards": []}', "field 'format'"),
        ('{"format": "kosumi-labels", "version": 2, "shards": []}', "field 'version'"),
        ('{"format": "kosumi-labels", "version": 1}', "field 'shards'"),
        ('{"format": "kosumi-labels", "version": 1, "shards": [3]}', r"shards\[0\] is not"),
        ('{"format": "kosumi-labels", "version": 1, "shards": [{"file": "a", "sha256": "0",'
         ' "count": true}]}', "field 'count'"),
        ('{"format": "kosumi-labels", "version": 1, "shards": [{"file": "../a", "sha256": "0",'
         ' "count": 1}]}', "not a plain file name"),
    ]
    for text, needle in cases:
        manifest.write_text(text)
        with pytest.raises(KosumiError, match=needle) as e:
            ShardDir(folder, KIND)
        assert str(manifest) in str(e.value)


def test_one_writer_at_a_time_and_temporaries_are_cleaned(tmp_path):
    folder = tmp_path / "labels"
    d = ShardDir(folder, KIND, create=True)
    d.add_shard("a.zst", b"x", {"count": 1})
    (folder / ".a.zst.123.tmp").write_bytes(b"left by a killed writer")
    other = ShardDir(folder, KIND)
    with d.lock():
        assert not (folder / ".a.zst.123.tmp").exists()
        with pytest.raises(KosumiError, match="another kosumi process"), other.lock():
            pass
        other.add_shard("b.zst", b"y", {"count": 1})  # (bypassing the lock, to see reload)
    with d.lock():
        assert [s["file"] for s in d.shards] == ["a.zst", "b.zst"]  # reloaded under the lock
    with other.lock():  # released
        pass
