"""Atomic file writes: the one place kosumi replaces a file on disk.

``atomic_writer(path)`` yields a binary file object that writes a temporary file in the same
folder as ``path`` (``.NAME.XXXX.tmp``, private permissions as ``mkstemp`` makes them); when the
``with`` block ends normally the data is flushed, fsynced and the temporary file renamed over
``path`` (``os.replace``), then the folder is fsynced (best effort) so that the rename itself is
durable. If anything fails -- in the block, the fsync or the rename -- the temporary file is
removed, the old ``path`` (if any) is left as it was, and the exception propagates.
``atomic_write(path, data)`` is the one-shot form for bytes already in memory.
``output_errors(path)`` turns an ``OSError`` raised inside it into a one-line ``WriteFailed``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from kosumi.errors import WriteFailed

__all__ = ["atomic_write", "atomic_writer", "output_errors", "shareable_path", "user_cache_dir"]


@contextmanager
def output_errors(path: str | os.PathLike[str], what: str = "write") -> Iterator[None]:
    """An ``OSError`` inside (disk full, no permission) becomes ``WriteFailed``: "PATH: cannot
    WHAT (reason)", one line for the user, never a traceback."""
    try:
        yield
    except OSError as e:
        raise WriteFailed(f"{path}: cannot {what} ({e.strerror or e})") from None


@contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Stream into ``path`` atomically: temp file in the same folder, fsync, rename.

    Yields the open temporary file (binary); on a normal exit it is fsynced and renamed over
    ``path`` with the permissions a plain ``open`` would give it (the umask's, not the
    temporary file's 0600), on an exception it is deleted and ``path`` is untouched.
    """
    path = Path(path)
    folder = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, rename.

    On failure the temporary file is removed and the old ``path`` (if any) is left unchanged.
    """
    with atomic_writer(path) as f:
        f.write(data)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable; best effort (some systems cannot fsync a folder)."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def user_cache_dir(kind: str, env: str | None = None) -> Path:
    """Where kosumi keeps a cache of ``kind`` (e.g. "onnx"): ``$ENV`` if that variable is set,
    else ``$XDG_CACHE_HOME/kosumi/KIND``, else ``~/.cache/kosumi/KIND``."""
    if env and os.environ.get(env):
        return Path(os.environ[env])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kosumi" / kind


def shareable_path(path: str | os.PathLike[str]) -> str:
    """A path as it may travel inside a file a user shares (provenance): as given, or relative
    to the working folder when it was given as an absolute path inside it -- never the resolved
    absolute path of the machine it was made on."""
    text = os.fspath(path)
    p = Path(text)
    if p.is_absolute():
        try:
            return str(p.relative_to(Path.cwd()))
        except ValueError:
            return text
    return text
