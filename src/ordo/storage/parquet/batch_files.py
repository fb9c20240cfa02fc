"""One Parquet directory per micro-batch, replaced as a whole: `<root>/batch_id=<n>/`.

A streaming sink that writes files outside its transaction is exactly-once when a replayed batch
rewrites the same directory instead of adding to it. The new files are written to a hidden
directory (Spark and pyarrow readers skip names starting with "."), then renamed into place, so a
reader sees the old batch or the new one, never half of one. A writer killed meanwhile (kill -9,
a power cut) leaves those hidden directories (kept for good, a batch's worth of disk each, until
the batch's next write, its replay, removed them).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def batch_directory(root: str | os.PathLike[str], batch_id: int) -> Path:
    """Where the files of `batch_id` live under `root` (a Hive-style partition directory)."""
    return Path(root) / f"batch_id={batch_id}"


def replace_batch(root: str | os.PathLike[str], batch_id: int, table: pa.Table) -> Path:
    """Write `table` as the batch's only file, replacing what an earlier attempt wrote.

    Called from the driver of a streaming query, once per micro-batch; not safe for two writers
    of the same batch at once (a streaming query has one). The hidden directories have fixed
    names (`.batch_id=<n>.tmp`, `.old`), so that those a killed writer left are removed by
    their names, without listing the folder, whose batches only grow in number.
    """
    final = batch_directory(root, batch_id)
    final.parent.mkdir(parents=True, exist_ok=True)
    staged, retired = (final.with_name(f".{final.name}.{suffix}") for suffix in ("tmp", "old"))
    for left in (staged, retired):  # a killed writer's (see the module)
        shutil.rmtree(left, ignore_errors=True)
    staged.mkdir()
    try:
        pq.write_table(table, staged / "part-00000.parquet")
    except BaseException:
        shutil.rmtree(staged)  # a full disk, say: leave no hidden part behind
        raise
    if final.exists():
        final.rename(retired)
        staged.rename(final)
        shutil.rmtree(retired)
    else:
        staged.rename(final)
    return final


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
