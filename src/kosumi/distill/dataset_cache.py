"""The on-disk cache of encoded training arrays: its key, a streamed atomic writer, a mapped reader.

Encoding labels costs far more than reading arrays, so ``kosumi.distill.dataset`` stores the
encoded arrays of one (label content hash, feature set, board size) as one uncompressed
``.npz`` under ``cache_dir`` (default ``$KOSUMI_CACHE_DIR``, else
``$XDG_CACHE_HOME/kosumi/distill``, else ``~/.cache/kosumi/distill``) and reuses it in later
runs. The label content hash is the SHA-256 of the label folder's ``manifest.json`` (which lists
every shard with its own SHA-256), or of every file of a folder without a manifest. A JSON
``meta`` entry holds the key; an entry that does not match its key, or is damaged, is rebuilt.

Writing streams: ``StreamedNpz`` appends each array's rows, block by block, to a raw file in a
private temporary folder next to the entry (``.NAME.XXXX.tmp/``), so a writer holds one block
in memory, never the whole dataset. ``publish`` then copies the raw files, in 4 MiB pieces,
into the ``.npz`` (an ``.npy`` header per member: the row count is known only then) through
``kosumi.fileio.atomic_writer``, and removes the folder. An interrupted or failed write leaves
no entry and no temporary folder. Only a killed process can leave one; no reader looks at
it, and the next writer on the same machine removes every ``.tmp`` folder beside it whose
writer (named in the folder: host and process id) is gone. Rows are appended with plain
writes rather than written through a memory map, so the pages written count against the OS
page cache, not the writer's resident memory.

Reading maps: ``mapped_npz`` memory-maps every member read-only (numpy's own reader would copy
them into memory), so training reads only the positions it samples, the OS keeps what fits in
memory, and processes on one machine (DDP ranks) share the pages. Nothing is ever unpickled
(``allow_pickle=False``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kosumi.distill.shards import MANIFEST, manifest_content_hash
from kosumi.errors import KosumiError
from kosumi.fileio import atomic_writer
from kosumi.nets.features import get_feature_set

#: 2: a collection file's games are separate games (sources keep "#i");
#: 3: encoded label shard by shard (positions without a source: chains numbered across shards)
DATASET_VERSION = 3
COPY_BLOCK = 1 << 22  # bytes per piece when a raw file is copied into the .npz


# ---------------------------------------------------------------------------- key
def label_content_hash(path: str | os.PathLike) -> str:
    """SHA-256 (hex) identifying the content of a label folder (or file).

    A folder with a ``manifest.json``: the hash of the manifest bytes (the manifest lists every
    shard with its SHA-256, checked when shards are read). Otherwise: a hash over the sorted
    relative paths and contents of all regular files (hidden files excluded).
    """
    path = Path(path)
    h = hashlib.sha256()
    try:
        if path.is_dir() and (path / MANIFEST).is_file():
            return manifest_content_hash((path / MANIFEST).read_bytes())
        if path.is_file():
            files = [path]
            base = path.parent
        elif path.is_dir():
            base = path
            files = sorted(p for p in path.rglob("*") if p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
        else:
            raise KosumiError(f"{path}: no such label folder")
        for f in files:
            h.update(str(f.relative_to(base)).encode() + b"\0")
            with open(f, "rb") as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
            h.update(b"\0")
    except OSError as e:
        raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
    return h.hexdigest()


def default_cache_dir() -> Path:
    """``$KOSUMI_CACHE_DIR``, else ``$XDG_CACHE_HOME/kosumi/distill``, else ``~/.cache/...``."""
    env = os.environ.get("KOSUMI_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kosumi" / "distill"


def cache_path(cache_dir: str | os.PathLike, content_hash: str, feature_set: str,
               board_size: int) -> Path:
    """Where the encoded arrays of (labels, feature set, size) live (named by a digest of the
    whole content hash: one teacher's records of a folder get their own file)."""
    name = hashlib.sha256(content_hash.encode()).hexdigest()[:32]
    return Path(cache_dir) / f"{name}-{feature_set}-{board_size}x{board_size}.npz"


def cache_meta(content_hash: str, feature_set: str, board_size: int) -> dict[str, Any]:
    """The key an entry must carry to be used."""
    fs = get_feature_set(feature_set)
    return {"version": DATASET_VERSION, "content_hash": content_hash,
            "feature_set": feature_set, "planes": fs.num_planes, "globals": fs.num_globals,
            "board_size": board_size}


# ---------------------------------------------------------------------------- writing
def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The bytes (magic and header) that start an ``.npy`` file of a C-order array."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {
        "descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _writer_tag(pid: int | None = None) -> str:
    """``HOST-PID``: who writes a temporary folder (the host's name without dots)."""
    host = platform.node().replace(".", "_").replace("-", "_") or "host"
    return f"{host}-{os.getpid() if pid is None else pid}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return True


def remove_orphans(folder: Path) -> list[Path]:
    """Remove the temporary folders in ``folder`` that a killed writer on this machine left
    (``.NAME.HOST-PID.XXXX.tmp`` whose process is gone); others' and live ones stay. Returns
    what it removed."""
    host = _writer_tag(0).rsplit("-", 1)[0]
    gone = []
    for p in folder.glob(".*.tmp"):
        parts = p.name.split(".")
        tag = parts[-3] if len(parts) >= 5 else ""
        owner, _, pid = tag.rpartition("-")
        if p.is_dir() and owner == host and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    return gone


class StreamedNpz:
    """An ``.npz`` written column by column, a block of rows at a time (see the docstring).

    ``column(name, dtype, row_shape)`` declares an array; ``append(name, rows)`` adds rows
    (a wider dtype, e.g. float32 rows for a uint8 column, widens what was written);
    ``publish(extra, transform)`` writes the entry atomically. As a context manager, leaving
    the block (normally or not) removes the temporary folder; an unpublished entry is dropped.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_orphans(self.path.parent)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.{_writer_tag()}.",
                                         suffix=".tmp", dir=self.path.parent))
        self.columns: dict[str, list[Any]] = {}  # name -> [dtype, row shape, rows written]

    def __enter__(self) -> StreamedNpz:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _raw(self, name: str) -> Path:
        return self.tmp / f"{name}.raw"

    def column(self, name: str, dtype: Any, row_shape: Sequence[int] = ()) -> None:
        self.columns[name] = [np.dtype(dtype), tuple(row_shape), 0]
        self._raw(name).touch()

    def append(self, name: str, rows: np.ndarray) -> None:
        col = self.columns[name]
        if tuple(rows.shape[1:]) != col[1]:
            raise ValueError(f"{name}: rows of shape {rows.shape[1:]}, expected {col[1]}")
        wide = np.result_type(col[0], rows.dtype)
        if wide != col[0]:
            self._widen(name, wide)
        with open(self._raw(name), "ab") as f:
            f.write(np.ascontiguousarray(rows, dtype=wide).tobytes())
        col[2] += len(rows)

    def _widen(self, name: str, dtype: np.dtype) -> None:
        """Rewrite the rows written so far as ``dtype``."""
        col = self.columns[name]
        wider = self.tmp / f"{name}.wide"
        with open(wider, "wb") as out:
            for block in self._blocks(name):
                out.write(block.astype(dtype).tobytes())
        os.replace(wider, self._raw(name))
        col[0] = dtype

    def _blocks(self, name: str) -> Iterator[np.ndarray]:
        """The rows written to column ``name``, as arrays of about COPY_BLOCK bytes."""
        dtype, row_shape, rows = self.columns[name]
        row_items = int(np.prod(row_shape, dtype=np.int64))
        per_block = max(1, COPY_BLOCK // max(1, row_items * dtype.itemsize))
        with open(self._raw(name), "rb") as f:
            for start in range(0, rows, per_block):
                count = min(per_block, rows - start)
                data = f.read(count * row_items * dtype.itemsize)
                if len(data) != count * row_items * dtype.itemsize:
                    raise OSError(f"{self._raw(name)}: short read")
                yield np.frombuffer(data, dtype=dtype).reshape(count, *row_shape)

    def publish(self, extra: dict[str, np.ndarray] | None = None,
                transform: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None) -> None:
        """Write the columns (each block passed through ``transform[name]`` if given, which
        must keep its dtype and shape) and the small in-memory ``extra`` arrays as the
        uncompressed ``.npz`` at ``path``, atomically, and remove the temporary folder."""
        transform = transform or {}
        with atomic_writer(self.path) as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED,
                                                            allowZip64=True) as z:
            for name, (dtype, row_shape, rows) in self.columns.items():
                with z.open(f"{name}.npy", "w", force_zip64=True) as out:
                    out.write(_npy_header(dtype, (rows, *row_shape)))
                    fn = transform.get(name)
                    for block in self._blocks(name):
                        out.write((fn(block) if fn else block).tobytes())
            for name, a in (extra or {}).items():
                with z.open(f"{name}.npy", "w", force_zip64=True) as out:
                    np.lib.format.write_array(out, np.asarray(a), allow_pickle=False)
        self.discard()


def save_cached(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Write in-memory ``arrays`` as an entry with its ``meta``, atomically."""
    with StreamedNpz(path) as out:
        for name, a in arrays.items():
            out.column(name, a.dtype, a.shape[1:])
            out.append(name, a)
        out.publish({"meta": np.array(json.dumps(meta, sort_keys=True))})


# ---------------------------------------------------------------------------- reading
def mapped_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an uncompressed .npz, memory-mapped read-only (a member that is compressed,
    or holds objects, is read into memory instead)."""
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            name = info.filename.removesuffix(".npy")
            f.seek(info.header_offset)
            local = f.read(30)
            if info.compress_type != zipfile.ZIP_STORED or local[:4] != b"PK\x03\x04":
                out[name] = np.load(z.open(info), allow_pickle=False)
                continue
            skip = int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
            f.seek(info.header_offset + 30 + skip)
            version = np.lib.format.read_magic(f)
            header = {(1, 0): np.lib.format.read_array_header_1_0,
                      (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            shape, fortran, dtype = header(f) if header else ((0,), False, np.dtype(object))
            if dtype.hasobject or 0 in shape:
                f.seek(info.header_offset + 30 + skip)
                out[name] = np.lib.format.read_array(f, allow_pickle=False)
                continue
            out[name] = np.memmap(path, dtype=dtype, mode="r", offset=f.tell(), shape=shape,
                                  order="F" if fortran else "C")
    return out


def load_cached(path: Path, meta: dict[str, Any],
                fields: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The entry's arrays (memory-mapped, read-only) if ``path`` exists, is intact, matches
    ``meta`` and has every one of ``fields`` with the shapes ``meta`` implies; else None."""
    if not path.is_file():
        return None
    try:
        arrays = mapped_npz(path)
        stored = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if stored != meta or any(k not in arrays for k in fields):
        return None
    n = meta["board_size"]
    m = len(arrays["policy"])
    if any(len(arrays[k]) != m for k in fields if k != "games"):
        return None
    if (arrays["planes"].shape[1:] != (meta["planes"], n, n)
            or arrays["policy"].shape[1:] != (n * n + 1,)):
        return None
    glob = arrays.get("globals")
    if (glob is None) != (meta["globals"] == 0) or (glob is not None and len(glob) != m):
        return None
    return arrays
