"""One Parquet directory per micro-batch, replaced as a whole: `<root>/batch_id=<n>/`.

A streaming sink that writes files outside its transaction is exactly-once when a replayed batch
rewrites the same directory instead of adding to it. The new files are written to a hidden
directory (Spark and pyarrow readers skip names starting with "."), then renamed into place, so a
reader sees the old batch or the new one, never half of one. A writer killed meanwhile (kill -9,
a power cut) leaves those hidden directories: the batch's next write, its replay, removes them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ordo.storage.parquet.staged_parts import hidden_beside, stands_for


def batch_directory(root: str | os.PathLike[str], batch_id: int) -> Path:
    """Where the files of `batch_id` live under `root` (a Hive-style partition directory)."""
    return Path(root) / f"batch_id={batch_id}"


def replace_batch(root: str | os.PathLike[str], batch_id: int, table: pa.Table) -> Path:
    """Write `table` as the batch's only file, replacing what an earlier attempt wrote.

    Called from the driver of a streaming query, once per micro-batch; not safe for two writers
    of the same batch at once (a streaming query has one).
    """
    final = batch_directory(root, batch_id)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_left_directories(final)
    staged = hidden_beside(final, "tmp")
    staged.mkdir()
    try:
        pq.write_table(table, staged / "part-00000.parquet")
    except BaseException:
        shutil.rmtree(staged)  # a full disk, say: leave no hidden part behind
        raise
    if final.exists():
        retired = hidden_beside(final, "old")
        final.rename(retired)
        staged.rename(final)
        shutil.rmtree(retired)
    else:
        staged.rename(final)
    return final


def _remove_left_directories(final: Path) -> None:
    """Remove the hidden directories a killed writer of `final`'s batch left beside it.

    A writer killed while it wrote the batch's file, or between moving the old directory aside
    and the new one in, left them for good: readers skip hidden names and the replayed batch
    stages its own, so each such crash kept a batch's worth of disk. A batch has one writer, so
    those found before it stages are a dead writer's; other batches' are left alone.
    """
    for entry in list(final.parent.iterdir()):
        if stands_for(entry.name) == final.name:
            shutil.rmtree(entry)


@dataclass(frozen=True, slots=True)
class BatchListing:
    """The batch directories under a root at one moment, to tell which a run then writes.

    A batch directory is identified by its inode and modification time: `replace_batch` puts a
    new directory in place of an old one (made while the old one still exists, so with another
    inode, and with a later time), so a directory that is new or replaced after the listing was
    written by whoever wrote since.
    """

    root: Path
    seen: frozenset[tuple[int, int]]

    @classmethod
    def of(cls, root: str | os.PathLike[str]) -> BatchListing:
        """The batch directories under `root` now (none when `root` does not exist yet)."""
        return cls(Path(root), frozenset(_identity(d) for d in _batch_directories(Path(root))))

    def rows_written_since(self) -> int:
        """Rows in the batch files written under the root since the listing (Parquet footers)."""
        return sum(
            pq.read_metadata(file).num_rows
            for directory in _batch_directories(self.root)
            if _identity(directory) not in self.seen
            for file in directory.glob("*.parquet")
        )


def _batch_directories(root: Path) -> list[Path]:
    """The `batch_id=<n>` directories under `root` (hidden staging directories are not)."""
    return [d for d in root.glob("batch_id=*") if d.is_dir()] if root.is_dir() else []


def _identity(directory: Path) -> tuple[int, int]:
    stat = directory.stat()
    return stat.st_ino, stat.st_mtime_ns
