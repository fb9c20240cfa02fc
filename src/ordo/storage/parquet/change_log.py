"""Each table's change log: `<root>/<table>/partition=<n>/<segment>-<lowest>-<highest>.parquet`.

A file holds the mutations of one publish for one partition, in the order published (a capture's
in position order, ingested ones as their lines came), and is written to a hidden temporary
name, synced, and renamed into place, so a reader (Spark's file stream source lists the
directory) never sees half a file and a crash never loses a published one (nor the directory of a
new partition: its parent is synced when it is made). The file name carries
the segment and the lowest and highest position it holds; scanning the names tells a restarted
capture what is already durable, so it publishes nothing twice and advances its source only past
what is in the log. Mutations without a position (0: ingested ones may have none) cannot be told
apart from a repeat, so they are never skipped: each publish of them gets a file of its own,
`<segment>-unpositioned-<uuid>.parquet`.

A table's partition count is fixed by its first publish, which records it in
`<root>/<table>/_partitions.json` (hidden from Spark by its `_`) before any file is renamed into
place: every key's changes must stay in the one partition where deduplication reads them.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ordo.cdc.change_rows import ChangeRows, mutation_from_row
from ordo.cdc.mutation import Mutation
from ordo.errors import (
    InvalidInputError,
    PartitionCountMismatchError,
    StorageAccessError,
    StorageError,
    StorageIntegrityError,
)
from ordo.storage.file_errors import file_system_error, require_nameable
from ordo.storage.parquet.durable_files import fsync_directory, made_directory
from ordo.storage.parquet.file_name import (
    FILE_NAME,
    checked_segment_token,
    checked_table_name,
    segment_name,
    segment_token,
)
from ordo.storage.parquet.file_reads import listed, read_log_file, reading
from ordo.storage.parquet.held_captures import captures_held, positioned_files
from ordo.storage.parquet.log_schema import log_table
from ordo.storage.parquet.partition_record import (
    read_partition_record,
    require_fit,
    write_partition_record,
)
from ordo.storage.parquet.staged_parts import remove_left_parts, write_part
from ordo.storage.parquet.writer_threads import write_in_threads

_WRITERS = 4
"""Threads that write a publish's files."""
_PARTITION = re.compile(r"partition=(\d+)")
"""A partition folder's name, as `_stage` makes it; other names in a table's folder are not the
log's (a user's notes, a copy): they are neither counted nor read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeLogSummary:
    """What a table's change log holds (for `ordo cdc status`)."""

    table: str
    partitions: int
    """The recorded partition count (`_partitions.json`); for a log without a record (written
    before counts were recorded), the partition directories it holds."""
    has_partition_record: bool
    files: int
    mutations: int
    last_positions: dict[str, int]
    """The highest position per segment (mutations without a position are not counted)."""


class ParquetChangeLog:
    """Appends mutations to the partitioned Parquet change logs under `root` (thread-compatible).

    The last position of each (table, segment, partition) is read from the file names once and
    then kept up to date by `append`, so publishing does not list directories every window; this
    assumes one writer per segment (one capture per slot or change table), as the sources do.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._last: dict[tuple[str, str, int], int | None] = {}
        self._counts: dict[str, int] = {}
        """Each table's recorded partition count, once read (it never changes)."""
        self._fitting: dict[str, int] = {}
        """A count the files of a log without a record were found to fit."""
        self._cleared: set[tuple[str, str, int]] = set()
        """The (table, segment, partition)s whose left parts were removed (`append`)."""

    @contextmanager
    def root_made(self) -> Iterator[None]:
        """Create the root directory for a block, or refuse one that cannot be written.

        A capture enters this before it opens its journal and prepares its source, so that a log
        it could not publish into fails before any trigger or slot exists (StorageUnavailableError
        naming the root, StorageAccessError when it may not be written). When the block fails,
        the directories made here are removed again while they are empty: a refused capture
        leaves no change log behind.
        """
        try:  # a name too long fails the look at what exists already
            missing = [d for d in (self.root, *self.root.parents) if not d.exists()]
            made_directory(self.root)
        except OSError as exc:
            msg = f"cannot create the directory of change log {self.root}"
            raise file_system_error(msg, exc) from exc
        try:
            if not os.access(self.root, os.W_OK):
                msg = f"cannot write to change log {self.root}: permission denied"
                raise StorageAccessError(msg)
            yield
        except BaseException:
            for directory in missing:  # deepest first; a directory with files stays
                with suppress(OSError):
                    directory.rmdir()
            raise

    def table_path(self, table: str) -> Path:
        """The directory Spark reads as the table's change stream."""
        return self.root / checked_table_name(table)

    def partition_count(self, table: str) -> int | None:
        """The partition count recorded for the table's log, or None when it has no record.

        StorageIntegrityError when the record cannot be read as one (it is written whole, so only
        a hand edit makes it so).
        """
        if table not in self._counts:
            recorded = read_partition_record(self.table_path(table))
            if recorded is None:
                return None
            self._counts[table] = recorded
        return self._counts[table]

    def settled_partitions(self, table: str, *, requested: int | None, default: int) -> int:
        """The partition count to publish `table` with; reads, never writes.

        The recorded count, and PartitionCountMismatchError if `requested` is another. A log
        without a record takes `requested` (None: `default`); when it has files all the same (it
        was written before counts were recorded), every partition key in them must be where that
        count puts it, or PartitionCountMismatchError names one that is not. Those files are read
        once per log object (only their keys), and not again once the count is recorded.
        """
        path = self._readable(self.table_path(table))
        if path.exists() and not path.is_dir():  # found only when its first file was written
            msg = f"the change log of table {table!r}, {path}, is not a folder"
            raise StorageIntegrityError(msg)
        recorded = self.partition_count(table)
        if recorded is not None:
            if requested is not None and requested != recorded:
                raise PartitionCountMismatchError(
                    table=table, recorded=recorded, requested=requested
                )
            return recorded
        count = default if requested is None else requested
        if self._fitting.get(table) != count:
            require_fit(table, count, self.files(table))
            self._fitting[table] = count
        return count

    def record_partitions(self, table: str, partitions: int) -> None:
        """Record the table's partition count if it has none; call before its files are written.

        Called after `settled_partitions` agreed to the count: a log with files and no record
        was checked then. The record is written whole to a hidden name, synced, and linked into
        place, which never replaces one: of two first publishes at once with different counts,
        the second is refused (PartitionCountMismatchError). Written before any file, so every
        log with files written since has one; a crash in between leaves a record of the count
        the publish was given and no files, which the next publish with that count (or none)
        goes on from.
        """
        if self.partition_count(table) is None:
            with self._writing():
                write_partition_record(self.table_path(table), partitions)
        recorded = self.partition_count(table)
        if recorded != partitions:
            raise PartitionCountMismatchError(table=table, recorded=recorded, requested=partitions)

    def append(self, table: str, files: Sequence[tuple[int, ChangeRows]]) -> None:
        """Write one file per (partition, rows) pair: one segment each, in the order given.

        Every file is written and synced under a hidden name before the first is renamed into
        place, so a micro-batch that lists the log meanwhile sees the publish whole or not at
        all, in the usual case (a crash between renames leaves a prefix, which the next
        publish completes). The file name carries the segment and the position range. Files
        are written and synced by a few threads at once (`write_in_threads`: Parquet encoding and
        fsync release the GIL). A publish that fails, or that Ctrl-C interrupts, keeps the files
        renamed before it stopped (a retry skips them, the positions read again from the names)
        and, once no writer runs, removes the others' hidden parts (`_unstage`); those a killed
        publisher left go with the segment's next publish there (`remove_left_parts`).
        """
        work = [(partition, rows) for partition, rows in files if len(rows)]
        try:
            with self._writing():
                self._remove_left_parts(table, work)
                staged = write_in_threads(lambda item: self._stage(table, *item), work, _WRITERS)
                for temporary, final, *_ in staged:
                    os.replace(temporary, final)
                folders = sorted({final.parent for _, final, *_ in staged})
                write_in_threads(fsync_directory, folders, _WRITERS)
        except BaseException:
            self._unstage(table, work)
            raise
        for _, _, segment, partition, last in staged:
            if last is None:
                continue
            held = self.last_position(table, segment, partition)
            self._last[(table, segment, partition)] = last if held is None else max(held, last)

    def _places(
        self, table: str, work: Sequence[tuple[int, ChangeRows]]
    ) -> Iterator[tuple[Path, str, int]]:
        """Each (partition folder, segment, partition) that a publish of `work` writes to."""
        for partition, rows in work:
            directory = self.table_path(table) / f"partition={partition}"
            for segment in set(rows.column("segment")):
                yield directory, segment, partition

    def _remove_left_parts(self, table: str, work: Sequence[tuple[int, ChangeRows]]) -> None:
        """Remove the hidden parts a dead publisher of these segments left where they go.

        Once per segment and partition (`remove_left_parts`), and before any file is staged: a
        publish may stage two files of one segment in one partition (with and without positions).
        """
        for directory, segment, partition in self._places(table, work):
            if (table, segment, partition) not in self._cleared:
                remove_left_parts(directory, self._listed(directory), segment_token(segment))
                self._cleared.add((table, segment, partition))

    def _unstage(self, table: str, work: Sequence[tuple[int, ChangeRows]]) -> None:
        """Remove the hidden parts of a publish of `work` that stopped, once its writers ended.

        Ctrl-C on the main thread, as it starts or waits for the writers, left the files they
        finished all the same, which no later publish of this log removed (it clears a
        segment's leftovers once): a program going on after each interrupt kept a publish's
        disk for each. A segment has one writer, so its hidden parts are this publish's. Last
        positions are read again; what cannot be removed is left to the next publisher.
        """
        for directory, segment, partition in self._places(table, work):
            self._last.pop((table, segment, partition), None)
            with suppress(OSError, StorageError):
                remove_left_parts(directory, self._listed(directory), segment_token(segment))

    def _stage(
        self, table: str, partition: int, rows: ChangeRows
    ) -> tuple[Path, Path, str, int, int | None]:
        """Write and sync one file under a hidden name; returns where it goes and what it holds.

        The highest position is None for a file of mutations without one. Ingested rows may come
        in any position order: the name states the lowest and highest, not the first and last
        row's, since the highest is what a publish skips up to and status shows.
        """
        segments = set(rows.column("segment"))
        if len(segments) > 1:
            msg = "a change log file holds the mutations of one segment"
            raise InvalidInputError(msg)
        directory = self.table_path(table) / f"partition={partition}"
        made_directory(directory)
        segment = segments.pop()
        token = segment_token(segment)
        positions = rows.column("position")
        unpositioned = positions.count(0)
        if unpositioned == len(positions):
            name, last = f"{token}-unpositioned-{uuid.uuid4().hex}.parquet", None
        elif unpositioned:
            msg = f"segment {segment!r}: a file holds mutations with or without positions, not both"
            raise InvalidInputError(msg)
        else:
            last = max(positions)
            name = f"{token}-{min(positions)}-{last}.parquet"
        final = directory / name
        return write_part(final, log_table(rows)), final, segment, partition, last

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Raise what the file system refuses in the block as one storage error naming the log.

        A folder of the log that is a file, or one this process may not write in, ended a
        publish with the OSError's traceback.
        """
        try:
            yield
        except OSError as exc:
            msg = f"cannot write change log {self.root}"
            raise file_system_error(msg, exc) from exc

    def check_segment(self, segment: str) -> None:
        """InvalidInputError when `segment` cannot name this log's files (too long)."""
        checked_segment_token(segment)

    def last_position(self, table: str, segment: str, partition: int) -> int | None:
        """The highest position of `segment` in one partition's files (read from their names)."""
        where = (table, segment, partition)
        if where not in self._last:
            names = self._listed(self.table_path(table) / f"partition={partition}")
            files = positioned_files(names, segment_token(segment))
            self._last[where] = max((highest for *_, highest in files), default=None)
        return self._last[where]

    def captures_at(
        self, table: str, segment: str, partition: int, positions: Collection[int]
    ) -> dict[int, set[int]]:
        """The `captured_at_us` of `segment`'s rows at each of `positions` in one partition.

        Reads the files whose names' ranges hold one (`captures_held`): asked only of positions
        a publish would skip, so a publish that skips nothing opens no file.
        """
        directory = self.table_path(table) / f"partition={partition}"
        return captures_held(directory, self._listed(directory), segment_token(segment), positions)

    def partitions(self, table: str) -> list[int]:
        """The partitions that hold at least one file."""
        named = (_PARTITION.fullmatch(name) for name in self._listed(self.table_path(table)))
        return sorted(int(match[1]) for match in named if match)

    def files(self, table: str) -> list[tuple[int, Path]]:
        """The Parquet files of the table's log with their partitions, in name order."""
        table_path = self.table_path(table)
        return sorted(
            (int(match[1]), table_path / folder / name)
            for folder in self._listed(table_path)
            if (match := _PARTITION.fullmatch(folder))
            for name in self._listed(table_path / folder)
            if name.endswith(".parquet")
        )

    def _readable(self, path: Path) -> Path:
        """`path`, or StorageAccessError naming it when it can name no file (`unnameable`).

        pathlib's looks at a name too long raised the bare OSError, and took a symbolic link
        loop for a log without tables or files: `ordo cdc status` showed none.
        """
        return require_nameable(path, doing=self._cannot_read)

    def _listed(self, folder: Path) -> dict[str, bool]:
        """The entries of one of the log's folders (`listed`), or a storage error naming the log."""
        return listed(folder, doing=self._cannot_read)

    @property
    def _cannot_read(self) -> str:
        return f"cannot read change log {self.root}"

    def tables(self) -> list[str]:
        """Every table with a change log under the root."""
        return sorted(name for name, is_folder in self._listed(self.root).items() if is_folder)

    def summary(self, table: str) -> ChangeLogSummary:
        """Partitions, files and mutations of a table's log, and the last position per segment.

        Reads only file names, Parquet footers and the partitions record, so it is cheap on a
        large log. The partition count is the recorded one: most partitions of a small log hold
        no file yet, and counting directories would tell an operator the wrong `--partitions`.
        """
        recorded = self.partition_count(table)
        files = [file for _, file in self.files(table)]
        last: dict[str, int] = {}
        mutations = 0
        for file in files:
            match = FILE_NAME.match(file.name)
            if match is not None:
                segment = segment_name(match["segment"])
                last[segment] = max(last.get(segment, 0), int(match["highest"]))
            with reading(file), pq.ParquetFile(file) as parquet:  # closed: a log of many files
                mutations += parquet.metadata.num_rows
        return ChangeLogSummary(
            table=table,
            partitions=len(self.partitions(table)) if recorded is None else recorded,
            has_partition_record=recorded is not None,
            files=len(files),
            mutations=mutations,
            last_positions=dict(sorted(last.items())),
        )

    def read(self, table: str) -> Iterator[Mutation]:
        """Every mutation in the table's log, file by file (for tools and tests, not for volume)."""
        for _, file in self.files(table):
            for row in read_log_file(file).to_pylist():
                yield mutation_from_row(row)
