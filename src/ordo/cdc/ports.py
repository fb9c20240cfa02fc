"""What CDC needs from outside: sources of raw changes, the change log, the schema store."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.mutation import Mutation
from ordo.cdc.schema import TableSchema


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturedWindow:
    """Committed changes a source returned, in commit order, and where the source may advance to.

    `up_to` is the source position (inclusive) that the window covers: once every mutation of the
    window is durably published, the source is advanced to it, never before. The mutations are
    held as columns (`ChangeRows`), which the publisher writes without a Python object per row.
    """

    rows: ChangeRows
    up_to: int
    has_more: bool = False
    """The source stopped at its limit, so more may be committed after `up_to`. The number of
    rows says nothing: a PostgreSQL slot's limit counts every row it decodes (transactions'
    begin and commit rows, other tables' transactions), so a full window can hold few
    changes."""
    written: tuple[TableSchema, ...] = ()
    """Schemas some of the window's changes were written under that the source's catalog no
    longer has (PostgreSQL: a column added and dropped again since, `written_schema`), oldest
    first: the capture registers them before the current ones, so each change names a version
    it fits."""

    @classmethod
    def of(
        cls,
        mutations: Sequence[Mutation],
        *,
        up_to: int,
        has_more: bool = False,
        written: tuple[TableSchema, ...] = (),
    ) -> CapturedWindow:
        """A window of mutations decoded one by one (wal2json, tests)."""
        return cls(
            rows=ChangeRows.from_mutations(mutations),
            up_to=up_to,
            has_more=has_more,
            written=written,
        )

    @property
    def mutations(self) -> list[Mutation]:
        """The window's mutations as objects (for tools and tests)."""
        return self.rows.mutations()


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceStatus:
    """A capture source's health: how far it is confirmed, and what the source retains for it."""

    name: str
    """An SQLite source's segment; a PostgreSQL capture's slot."""
    segment: str
    """The segment the capture publishes under (`ChangeSource.name`), which a change log's last
    positions are keyed by: an SQLite source's `name`; a PostgreSQL capture's `<slot>.<system
    identifier>`, or `<slot>` where the change log looked at holds files of it published from
    the server (`ordo.storage.postgres.change_segment`)."""
    tables: tuple[str, ...]
    confirmed_position: int | None
    """The last position (inclusive) the source was advanced to."""
    head_position: int | None
    """The newest position the source has written (its head)."""
    retained_bytes: int | None
    """PostgreSQL: bytes of WAL kept for the slot."""
    retained_changes: int | None = None
    """SQLite: change rows waiting to be published."""
    invalidated: bool = False
    """PostgreSQL: the server invalidated the slot (it removed WAL the slot still needed, past
    `max_slot_wal_keep_size`): its changes are lost and no capture of it can go on."""
    slot: str | None = None
    """PostgreSQL: the replication slot (`name` too, kept for what read it before)."""


class ChangeSource(Protocol):
    """A database's committed changes as mutations: peek a window, advance after publishing.

    Peeking does not consume: a crash before `advance` returns the same changes again (at least
    once), which the change log makes idempotent by the positions it already holds.
    """

    @property
    def name(self) -> str:
        """The source's segment name (a replication slot, a change table): part of every audit."""
        ...

    def schemas(self) -> Sequence[TableSchema]:
        """The current schema of every captured table, read from the source's catalog."""
        ...

    def peek(self, *, max_changes: int) -> CapturedWindow:
        """Up to about `max_changes` committed changes after the confirmed position.

        The window's `has_more` says whether the source stopped at the limit.
        """
        ...

    def advance(self, *, up_to: int) -> None:
        """Confirm every change up to `up_to` (inclusive): the source may forget them."""
        ...

    def status(self) -> SourceStatus:
        """How far the source is confirmed and what it retains."""
        ...

    def snapshot(self, table: str) -> Iterator[Mutation]:
        """The table's current rows, for an initial snapshot (READ messages).

        Written at the confirmed position, so every later change wins over them; the audit
        segment is `snapshot_segment(...)` with row ordinals as positions.
        """
        ...


class ChangeLogWriter(Protocol):
    """The keyed, partitioned change log of each table (partitioned Parquet by default)."""

    def append(self, table: str, files: Sequence[tuple[int, ChangeRows]]) -> None:
        """Durably add one file per (partition, rows) of `table` (one segment each)."""
        ...

    def check_segment(self, segment: str) -> None:
        """InvalidInputError when the log cannot hold `segment`'s changes (a name too long).

        Asked of every segment before anything is published: the file system refused such a
        file name only while a publish wrote, after other inputs were in.
        """
        ...

    def last_position(self, table: str, segment: str, partition: int) -> int | None:
        """The highest position of `segment` in one partition of the table's log, or None.

        Per partition, because a publish writes one file per partition: a crash between two of
        them leaves lower positions unwritten in the partitions it had not reached. Called for
        every mutation published, so implementations answer from memory after a first read.
        """
        ...

    def captures_at(
        self, table: str, segment: str, partition: int, positions: Collection[int]
    ) -> Mapping[int, Collection[int]]:
        """The `captured_at_us` of `segment`'s rows at each of `positions` in one partition.

        A position no row holds is absent. Asked only of the positions a publish would skip
        (`last_position` or below), so it may read rows: that happens only after a crash.
        """
        ...

    def settled_partitions(self, table: str, *, requested: int | None, default: int) -> int:
        """The partition count to publish `table` with, without writing anything.

        The log's own count once it has one (PartitionCountMismatchError when `requested` is
        another), else `requested`, or `default` when that is None. A key's changes must stay in
        one partition: that is where its order holds and its positions are deduplicated.
        """
        ...

    def record_partitions(self, table: str, partitions: int) -> None:
        """Fix the table's count at `partitions` (settled before) before its first files are added.

        PartitionCountMismatchError when another count was recorded meanwhile.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaVersion:
    """One registered version of a table's schema; `schema_id` is what messages name."""

    schema_id: int
    table: str
    version: int
    schema: TableSchema
    is_accepted: bool
    registered_at: dt.datetime


class SchemaStore(Protocol):
    """Where schema versions are kept (the journal's database)."""

    def add_version(self, schema: TableSchema, *, is_accepted: bool) -> SchemaVersion:
        """Store `schema` as the table's next version."""
        ...

    def versions(self, table: str) -> Sequence[SchemaVersion]:
        """Every version of the table, oldest first (empty when none is registered)."""
        ...

    def version_by_id(self, schema_id: int) -> SchemaVersion | None:
        """The version with this schema id, or None."""
        ...

    def mark_accepted(self, table: str, version: int) -> SchemaVersion | None:
        """Accept a version an operator reviewed; None when it does not exist."""
        ...

    def tables(self) -> Sequence[str]:
        """Every table with a registered schema, sorted."""
        ...
