"""Merging a table's small change log files into larger ones (`ordo cdc compact`).

A capture that sees steady writes publishes one file per partition every flush, so a long-lived
log holds many small files, which Spark's file source lists at every micro-batch. Compaction
merges, per partition and segment, runs of positioned files that follow each other by position
into files of at most `max_rows` rows, each named `<segment>-<lowest>-<highest>` of what it
holds: the highest position of every segment in every partition (the publisher's memory, read
from the names) stays what it was, and so do the rows `captures_at` reads. Rows keep their order
(the files by lowest position, each file's rows as they were) and every column, those an earlier
layout lacked as nulls. Files without positions (`<segment>-unpositioned-<uuid>`) are left
alone: nothing in their names tells a merged copy of them from its originals after a crash.

A merged file is written and synced under a hidden name (`.<name>.<uuid>.compacting`, which a
publisher's removal of its own left parts, `.<name>.<uuid>.tmp`, never matches), linked into
place (never replacing a file), and its folder synced; only then are its originals removed and
the folder synced again. A crash in between leaves the originals beside the merged file: their
rows twice on disk, which readers fold as the duplicates they are. The publisher never writes a
position at or below the highest its segment holds in a partition, so the files of a segment in
a partition have disjoint ranges; a file whose range lies inside another's is such a leftover,
and the next compaction removes it first, once it has read that the other holds every row of it
(a file that fails that check is kept and merged as any other). A hidden part a crash left is
removed too: only a compaction writes that name, and one compaction of a table runs at a time
(`COMPACTION_LOCK`).

A capture may publish into the table meanwhile: it only adds files above the highest positions,
and a compaction merges and removes only the files it listed. A materializer reads a merged file
as a new one, so rows it had read come again: its fold drops them as duplicates. One that listed
a file a compaction then removed reads the file's rows from the merged one instead (its file
source ignores missing files, `ordo.spark.materializer`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ordo import arguments
from ordo.errors import ConfigurationError
from ordo.storage.file_errors import file_system_error
from ordo.storage.lock_file import exclusive_lock
from ordo.storage.parquet.change_log import ParquetChangeLog
from ordo.storage.parquet.durable_files import fsync_directory, link_new
from ordo.storage.parquet.file_name import FILE_NAME, checked_table_name
from ordo.storage.parquet.file_reads import listed, read_log_file, reading
from ordo.storage.parquet.held_captures import positioned_files
from ordo.storage.parquet.staged_parts import part_name, write_part
from ordo.wording import shown_name

COMPACTION_LOCK = ".ordo-compact.lock"
"""The lock file of a running compaction in the table's folder (hidden from Spark by its `.`)."""
STAGED_SUFFIX = "compacting"
"""The last part of the hidden name a merged file is written under."""
_STAGED = part_name(STAGED_SUFFIX)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionReceipt:
    """What a compaction of one table's log did: its files before and after, the rows it holds.

    `leftovers` counts the files an interrupted compaction had left beside the merged file that
    holds their rows, removed this time (they are in `files_before`, their rows not in `rows`).
    """

    table: str
    files_before: int
    files_after: int
    rows: int
    leftovers: int

    def to_json(self) -> dict[str, object]:
        """The receipt as `ordo cdc compact --json` shows it."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class _File:
    """A positioned file of one segment and the positions its name states."""

    path: Path
    lowest: int
    highest: int


@dataclass(frozen=True, slots=True)
class _Run:
    """Files of one segment that follow each other by position, merged into `final`."""

    final: Path
    members: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class _PartitionPlan:
    """What a compaction does in one partition folder, and what the folder holds after it."""

    directory: Path
    staged: tuple[Path, ...]
    leftovers: tuple[Path, ...]
    runs: tuple[_Run, ...]
    files: int
    """The change log files in the folder when listed."""
    rows: int
    """The rows of those files but the leftovers."""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """A table's listed files and what merging them does; `apply` does it (under the lock)."""

    log: ParquetChangeLog
    table: str
    partitions: tuple[_PartitionPlan, ...]

    def apply(self, show: Callable[[str], None] = lambda _: None) -> CompactionReceipt:
        """Remove the leftovers, then merge each run (see the module for the order of steps).

        `show` is told each partition as it starts. A file system error is a storage error
        naming the log; what was merged before it stays merged, and nothing is lost.
        """
        table, count = shown_name(self.table), len(self.partitions)
        for index, partition in enumerate(self.partitions, 1):
            show(f"compacting {table}: {partition.directory.name} ({index} of {count})")
            with self._writing():
                for path in (*partition.staged, *partition.leftovers):
                    path.unlink(missing_ok=True)
                if partition.staged or partition.leftovers:
                    fsync_directory(partition.directory)
                for run in partition.runs:
                    _merge(run)
        return self.receipt()

    def receipt(self) -> CompactionReceipt:
        """What `apply` leaves (or left) the table's log with."""
        before = sum(p.files for p in self.partitions)
        leftovers = sum(len(p.leftovers) for p in self.partitions)
        merged = sum(len(run.members) - 1 for p in self.partitions for run in p.runs)
        return CompactionReceipt(
            table=self.table,
            files_before=before,
            files_after=before - leftovers - merged,
            rows=sum(p.rows for p in self.partitions),
            leftovers=leftovers,
        )

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Raise what the file system refuses in the block as one storage error naming the log."""
        try:
            yield
        except OSError as exc:
            msg = f"cannot compact change log {self.log.root}"
            raise file_system_error(msg, exc) from exc


def compact_table(
    log: ParquetChangeLog,
    table: str,
    *,
    max_rows: int,
    show: Callable[[str], None] = lambda _: None,
) -> CompactionReceipt:
    """Merge the small files of `table`'s log (see the module); `show` as `apply` tells it."""
    with compaction_of(log, table, max_rows=max_rows) as plan:
        return plan.apply(show)


@contextmanager
def compaction_of(log: ParquetChangeLog, table: str, *, max_rows: int) -> Iterator[CompactionPlan]:
    """Hold the table's compaction lock for the block, and list and plan its compaction.

    ConfigurationError for a `max_rows` below 1 or a table without a change log in `log`
    (`require_table_log`); AlreadyRunningError when another compaction of the table holds the
    lock. Nothing is changed until the plan is applied.
    """
    arguments.integer(max_rows, name="max_rows", error=ConfigurationError, minimum=1)
    require_table_log(log, table)
    running = f"a compaction of the change log of table {table!r} is already running"
    with exclusive_lock(log.table_path(table) / COMPACTION_LOCK, running):
        table_path = log.table_path(table)
        yield CompactionPlan(
            log=log,
            table=table,
            partitions=tuple(
                _plan(table_path / f"partition={partition}", max_rows, log.root)
                for partition in log.partitions(table)
            ),
        )


def table_logs(log: ParquetChangeLog, named: Sequence[str] = ()) -> list[str]:
    """The tables to compact: `named` (each checked), or every table with a log under the root.

    ConfigurationError when the root is not a folder, names a table without a log, or (none
    named) holds no table's log: a folder that is no change log.
    """
    if not log.root.is_dir():
        msg = f"no change log directory {log.root}"
        raise ConfigurationError(msg)
    for table in named:
        require_table_log(log, table)
    if named:
        return list(dict.fromkeys(named))
    found = [table for table in log.tables() if _is_table_log(log, table)]
    if not found:
        msg = (
            f"{log.root} holds no table's change log (a folder with partition=<n> folders or "
            "_partitions.json): check --change-log"
        )
        raise ConfigurationError(msg)
    return found


def require_table_log(log: ParquetChangeLog, table: str) -> None:
    """ConfigurationError unless `table` has a change log in `log` (its tables named)."""
    checked_table_name(table)
    if not _is_table_log(log, table):
        logs = [t for t in log.tables() if _is_table_log(log, t)]
        msg = (
            f"no change log of table {table!r} in {log.root} "
            f"(its tables: {', '.join(map(repr, logs)) or 'none'})"
        )
        raise ConfigurationError(msg)


def _is_table_log(log: ParquetChangeLog, table: str) -> bool:
    """Whether the root's folder `table` is a table's log: partition folders or a count record."""
    return bool(log.partitions(table)) or log.partition_count(table) is not None


def _plan(directory: Path, max_rows: int, root: Path) -> _PartitionPlan:
    """What compacting one partition folder does: each segment's runs and leftovers."""
    names = listed(directory, doing=f"cannot read change log {root}")
    files = [
        name for name, is_folder in names.items() if name.endswith(".parquet") and not is_folder
    ]
    tokens = sorted({match["segment"] for name in files if (match := FILE_NAME.match(name))})
    leftovers: list[Path] = []
    runs: list[_Run] = []
    rows = sum(_rows(directory / name) for name in files if not FILE_NAME.match(name))
    for token in tokens:
        positioned = sorted(
            (_File(directory / name, lowest, highest) for name, lowest, highest in
             positioned_files(files, token)),
            key=lambda file: (file.lowest, -file.highest),
        )  # fmt: skip
        kept = _without_leftovers(positioned, leftovers)
        counted = [(file, _rows(file.path)) for file in kept]
        rows += sum(count for _, count in counted)
        runs.extend(_runs(token, counted, max_rows, names))
    return _PartitionPlan(
        directory=directory,
        staged=tuple(directory / name for name in names if _STAGED.match(name)),
        leftovers=tuple(leftovers),
        runs=tuple(runs),
        files=len(files),
        rows=rows,
    )


def _without_leftovers(files: Sequence[_File], leftovers: list[Path]) -> list[_File]:
    """`files` (by lowest, widest first) but those another holds: added to `leftovers`.

    A file inside the range of an earlier, wider one whose rows are all in it is what a
    compaction interrupted before its removals left. One whose rows are not all there (two
    writers of one segment, which captures never are) is kept.
    """
    kept: list[_File] = []
    widest: _File | None = None
    held: set[tuple[object, ...]] = set()
    for file in files:
        if widest is not None and file.highest <= widest.highest:
            held = held or set(_row_tuples(widest.path))
            if held.issuperset(_row_tuples(file.path)):
                leftovers.append(file.path)
                continue
        kept.append(file)
        if widest is None or file.highest > widest.highest:
            widest, held = file, set()
    return kept


def _runs(
    token: str, files: Sequence[tuple[_File, int]], max_rows: int, names: dict[str, bool]
) -> list[_Run]:
    """The runs of two or more files following each other, each of at most `max_rows` rows.

    A file of more rows stays as it is. A run is never given the name of a file there (which
    only files of overlapping ranges could make): a reader that had read that file would take
    the merged one for it.
    """
    groups: list[list[_File]] = [[]]
    total = 0
    for file, rows in files:
        if groups[-1] and total + rows > max_rows:
            groups.append([])
            total = 0
        groups[-1].append(file)
        total += rows
    runs: list[_Run] = []
    for group in groups:
        name = f"{token}-{group[0].lowest}-{max(f.highest for f in group)}.parquet" if group else ""
        if len(group) > 1 and name not in names:
            runs.append(_Run(group[0].path.with_name(name), tuple(f.path for f in group)))
    return runs


def _merge(run: _Run) -> None:
    """Write the run's rows as one file, durable in place, then remove its members."""
    tables = [read_log_file(member) for member in run.members]
    part = write_part(run.final, pa.concat_tables(tables), suffix=STAGED_SUFFIX)
    try:
        link_new(part, run.final)
        fsync_directory(run.final.parent)
    finally:
        part.unlink(missing_ok=True)
    for member in run.members:
        member.unlink()
    fsync_directory(run.final.parent)


def _rows(file: Path) -> int:
    """A change log file's row count, from its footer."""
    with reading(file):
        return int(pq.read_metadata(file).num_rows)


def _row_tuples(file: Path) -> list[tuple[object, ...]]:
    """Every row of a change log file, all columns (those of an earlier layout as nulls)."""
    table = read_log_file(file)
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))
