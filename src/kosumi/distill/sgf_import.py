"""Import positions from SGF game records into a positions folder (``kosumi positions``).

``import_sgf`` reads SGF files (or folders, searched recursively; a file may hold a collection
of several games), replays each game's main line with kosumi's rules and hands every position
(before the first move, after each move; not a finished game's last one) to a
``PositionWriter`` (``kosumi.distill.positions``), which deduplicates them up to symmetry.
``sample`` keeps a deterministic fraction of the positions, chosen by ``seed`` and each game's
content (not its file's path).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kosumi.distill.positions import DEFAULT_SHARD_SIZE, PositionWriter, WriteStats
from kosumi.errors import KosumiError, WriteFailed
from kosumi.go.board import Rules


def find_sgf_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """SGF files named by ``paths``: files as given, folders searched recursively for *.sgf
    (sorted, so the order is reproducible). KosumiError for a path that does not exist."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.is_file()
                              and q.suffix.lower() == ".sgf"))
        elif p.is_file():
            out.append(p)
        else:
            raise KosumiError(f"{p}: no such file or folder")
    return out


def split_sgf_collection(data: bytes, name: str) -> list[bytes]:
    """The games of an SGF collection (a file may hold several game trees), as SGF bytes."""
    from sgfmill import sgf_grammar

    try:
        trees = sgf_grammar.parse_sgf_collection(data)
    except ValueError as e:
        raise KosumiError(f"{name}: malformed SGF: {e}") from None
    if len(trees) <= 1:
        return [data]
    return [sgf_grammar.serialise_game_tree(t) for t in trees]


def _sampled(seed: int, game: bytes, k: int, fraction: float) -> bool:
    """Keep position ``k`` of ``game`` (its SGF text)? Keyed on the content, not the file's
    path: the same game samples alike wherever it lies."""
    if fraction >= 1.0:
        return True
    h = hashlib.blake2b(f"{seed}|{k}|".encode() + game, digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64 < fraction


@dataclass
class ImportStats(WriteStats):
    files: int = 0
    bad_files: int = 0


def import_sgf(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str],
               rules: str = "chinese", sample: float = 1.0, seed: int = 0,
               min_moves: int = 0, skip_bad: bool = False,
               shard_size: int = DEFAULT_SHARD_SIZE, progress: bool = False,
               warn=None) -> ImportStats:
    """Import the main line of every game in ``paths`` (SGF files or folders, any board size).

    Every position of a game (before the first move, after each move; not a finished game's
    last position) is kept with probability ``sample`` (deterministic for ``seed`` and the
    game), positions with fewer than ``min_moves`` moves are skipped, duplicates (up to
    symmetry) are dropped. A bad file stops the import with a KosumiError naming it, unless
    ``skip_bad`` (then it is reported through ``warn(message)`` and skipped). Rerunning is safe:
    nothing is added twice.
    """
    from kosumi.go.sgf import parse_sgf
    from kosumi.progress import progress_bar

    Rules.named(rules)
    if not 0.0 < sample <= 1.0:
        raise KosumiError(f"--sample must be in (0, 1], not {sample}")
    files = find_sgf_files(paths)
    stats = ImportStats()
    with PositionWriter(out, shard_size=shard_size) as writer, \
            progress_bar(len(files), "importing SGF", unit="files", enabled=progress) as bar:
        for path in files:
            try:
                try:
                    data = path.read_bytes()
                except OSError as e:
                    raise KosumiError(f"{path}: cannot read ({e.strerror or e})") from None
                games = split_sgf_collection(data, str(path))
                for i, game in enumerate(games):
                    name = str(path) if len(games) == 1 else f"{path}#{i + 1}"
                    record = parse_sgf(game, name, rules)
                    start = record.to_state(0, rules=rules)
                    source = f"sgf:{name}"
                    keep = [k for k in range(min_moves, len(record.moves) + 1)
                            if _sampled(seed, game, k, sample)]
                    writer.add_game(start, record.moves, source, keep=keep)
                stats.files += 1
            except WriteFailed:
                raise  # the output's problem, not this file's
            except KosumiError as e:
                if not skip_bad:
                    raise
                stats.bad_files += 1
                if warn is not None:
                    warn(str(e))
            bar.advance(1, info=f"{writer.stats.added:,} positions")
    for f in ("added", "duplicates", "shards"):
        setattr(stats, f, getattr(writer.stats, f))
    return stats
