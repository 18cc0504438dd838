"""Shard folders: zstd-compressed data files listed by one JSON manifest, all written atomically.

A shard folder (positions or labels) holds::

    DIR/manifest.json         {"format": "kosumi-positions" | "kosumi-labels", "version": 1,
                               "shards": [{"file": ..., "sha256": ..., "count": ..., ...}], ...}
    DIR/<shard files>         zstd frames; their content is the caller's business
    DIR/.lock                 an advisory lock held by the one process writing the folder

The manifest is the single source of truth: a shard file is part of the data exactly when the
manifest lists it (with the SHA-256 of its compressed bytes, checked on every read). A writer
first writes the shard (temporary file in the same folder, fsync, rename), then the manifest
(the same way), so a process killed at any moment leaves either the old manifest or the new one,
never half a shard. A shard written but not yet listed is an orphan: it is ignored, and
overwritten when its name is used again. Nothing is ever pickled: shard payloads are JSON lines
or ``.npz`` archives read with ``allow_pickle=False``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import zstandard

from kosumi.errors import KosumiError
from kosumi.fileio import atomic_write, output_errors

MANIFEST = "manifest.json"
LOCK = ".lock"
MANIFEST_VERSION = 1
ZSTD_LEVEL = 9


# ---------------------------------------------------------------------------- bytes helpers
def compress(data: bytes, level: int = ZSTD_LEVEL) -> bytes:
    """One zstd frame (with the content size, so it can be decompressed in one call)."""
    return zstandard.ZstdCompressor(level=level, write_content_size=True).compress(data)


def decompress(data: bytes, name: str | os.PathLike[str]) -> bytes:
    """Decompress one zstd frame; KosumiError naming ``name`` if it is not valid zstd."""
    try:
        return zstandard.ZstdDecompressor().decompress(data)
    except zstandard.ZstdError as e:
        raise KosumiError(f"{name}: corrupted shard (zstd: {e})") from None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes (hex); KosumiError naming the file if it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                h.update(block)
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    return h.hexdigest()


def arrays_to_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An uncompressed ``.npz`` archive of plain (non-object) arrays; zstd does the compression."""
    for name, a in arrays.items():
        if a.dtype == object:
            raise ValueError(f"array {name!r} has dtype object (would need pickle)")
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=True, **arrays)  # numpy's default, spelled out for mypy
    return buf.getvalue()


def bytes_to_arrays(data: bytes, name: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read an ``.npz`` archive written by ``arrays_to_bytes`` (never unpickles anything)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise KosumiError(f"{name}: corrupted shard ({detail})") from None


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import (os.umask is process-wide)


def write_file(path: Path, data: bytes) -> None:
    """Atomic write (temp file, fsync, rename) with ordinary permissions (0666 & ~umask: the
    temporary file is private), so that other users (a trainer) can read the data."""
    with output_errors(path):
        atomic_write(path, data)
    with contextlib.suppress(OSError):  # the data is written; only its permissions stay private
        os.chmod(path, 0o666 & ~_UMASK)


def manifest_content_hash(manifest: bytes) -> str:
    """The content hash of a shard folder whose manifest has these bytes (the manifest lists
    every shard with its SHA-256). A reader hashes the bytes it read, not the file as it is now,
    which a writer may have changed since."""
    return hashlib.sha256(MANIFEST.encode() + b"\0" + manifest + b"\0").hexdigest()


def make_folder(path: Path) -> None:
    """``mkdir -p``; WriteFailed naming the folder if it cannot be created."""
    with output_errors(path, "create the folder"):
        path.mkdir(parents=True, exist_ok=True)


# ---------------------------------------------------------------------------- shard folders
class ShardDir:
    """A folder of shards of one ``kind`` ("kosumi-positions", "kosumi-labels") and its manifest.

    ``ShardDir(path, kind)`` reads an existing folder (KosumiError naming the file or field on
    problems; a missing folder or manifest is an error unless ``create=True``, which starts an
    empty manifest in memory -- nothing is written before the first shard). ``manifest_bytes``
    holds the manifest file as it was read (b"" for a new folder).
    """

    def __init__(self, path: str | os.PathLike[str], kind: str, create: bool = False):
        self.path = Path(path)
        self.manifest_bytes = b""
        if self.path.name == MANIFEST and self.path.is_file():  # the manifest itself was named
            self.path = self.path.parent
        self.kind = kind
        self.manifest_path = self.path / MANIFEST
        if self.manifest_path.exists():
            self.manifest = self._read_manifest()
        elif create:
            if self.path.exists() and not self.path.is_dir():
                raise KosumiError(f"{self.path}: exists and is not a folder")
            self.manifest = {"format": kind, "version": MANIFEST_VERSION, "shards": []}
        elif not self.path.is_dir():
            raise KosumiError(f"{self.path}: no such folder")
        else:
            raise KosumiError(f"{self.manifest_path}: missing (not a {kind} folder)")

    # ------------------------------------------------------------------ manifest
    def _read_manifest(self) -> dict[str, Any]:
        where = self.manifest_path
        try:
            raw = where.read_bytes()
            data = json.loads(raw.decode("utf-8"))
            self.manifest_bytes = raw
        except OSError as e:
            raise KosumiError(f"{where}: cannot read ({e.strerror or e})") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise KosumiError(f"{where}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise KosumiError(f"{where}: not a JSON object")
        if data.get("format") != self.kind:
            raise KosumiError(f"{where}: field 'format' is {data.get('format')!r}, "
                              f"expected {self.kind!r}")
        if data.get("version") != MANIFEST_VERSION:
            raise KosumiError(f"{where}: field 'version' is {data.get('version')!r}, this "
                              f"kosumi reads version {MANIFEST_VERSION}")
        shards = data.get("shards")
        if not isinstance(shards, list):
            raise KosumiError(f"{where}: field 'shards' is missing or not a list")
        for i, s in enumerate(shards):
            if not isinstance(s, dict):
                raise KosumiError(f"{where}: shards[{i}] is not an object")
            for key, typ in (("file", str), ("sha256", str), ("count", int)):
                if not isinstance(s.get(key), typ) or isinstance(s.get(key), bool):
                    raise KosumiError(f"{where}: shards[{i}] field {key!r} is missing or not "
                                      f"a {typ.__name__}")
            if "/" in s["file"] or "\\" in s["file"] or s["file"].startswith("."):
                raise KosumiError(f"{where}: shards[{i}] field 'file' {s['file']!r} is not a "
                                  "plain file name")
        return data

    def save_manifest(self) -> None:
        """Write the manifest atomically (creating the folder if needed)."""
        make_folder(self.path)
        text = json.dumps(self.manifest, indent=1, sort_keys=False) + "\n"
        write_file(self.manifest_path, text.encode("utf-8"))

    def reload(self) -> None:
        """Re-read the manifest from disk (after taking the lock), if there is one."""
        if self.manifest_path.exists():
            self.manifest = self._read_manifest()

    @property
    def shards(self) -> list[dict[str, Any]]:
        return self.manifest["shards"]

    def __len__(self) -> int:
        return sum(s["count"] for s in self.shards)

    # ------------------------------------------------------------------ shards
    def read_shard(self, entry: dict[str, Any]) -> bytes:
        """The decompressed payload of a listed shard; KosumiError if missing or corrupted."""
        path = self.path / entry["file"]
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise KosumiError(f"{path}: cannot read shard ({e.strerror or e})") from None
        if sha256_bytes(raw) != entry["sha256"]:
            raise KosumiError(f"{path}: corrupted shard (SHA-256 differs from {MANIFEST})")
        return decompress(raw, path)

    def add_shard(self, name: str, payload: bytes, entry: dict[str, Any]) -> dict[str, Any]:
        """Compress and write ``payload`` as shard ``name``, then list it in the manifest.

        ``entry`` holds the caller's fields (``count`` and anything else); ``file`` and
        ``sha256`` are filled in. Returns the manifest entry.
        """
        make_folder(self.path)
        raw = compress(payload)
        path = self.path / name
        write_file(path, raw)
        full = {"file": name, "sha256": sha256_bytes(raw), **entry}
        self.shards.append(full)
        try:
            self.save_manifest()
        except BaseException:
            self.shards.pop()
            raise
        return full

    def remove_stale_temporaries(self) -> None:
        """Delete temporary files left by a killed writer (call while holding the lock)."""
        if not self.path.is_dir():
            return
        for p in self.path.glob(".*.tmp"):
            with suppress(OSError):
                p.unlink()

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder's advisory write lock; KosumiError if another process holds it."""
        import fcntl

        make_folder(self.path)
        lock_path = self.path / LOCK
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise KosumiError(f"{lock_path}: cannot open ({e.strerror or e})") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise KosumiError(f"{self.path}: another kosumi process is writing this folder "
                                  f"(lock {LOCK})") from None
            self.remove_stale_temporaries()
            self.reload()
            yield
        finally:
            os.close(fd)  # closing releases the lock
