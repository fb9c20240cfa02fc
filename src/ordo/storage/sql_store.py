"""The SQL stores' plumbing, and the journal store methods whose SQL is the same everywhere.

Each backend's store subclasses these and adds what differs (bulk writes: executemany and
json_each on SQLite, binary arrays and unnest on PostgreSQL). SQL here is written with `{p}`
where a parameter goes; the backend names its driver's placeholder in `PARAM`. The tag view
stores' shared SQL is in `sql_tag_view_store`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

from ordo.journal.event import PersistedEvent
from ordo.journal.ports import JournalSummary
from ordo.processing.connection import SqlConnection
from ordo.storage.migration import (
    BUCKET_SIZE_KEY,
    EXPIRED_BEFORE_KEY,
    JOURNAL_ID_KEY,
    METADATA_TABLE,
    SCHEMA_VERSION_KEY,
)
from ordo.storage.rows import MESSAGE_COLUMNS, event_from_row, summary_from_row
from ordo.storage.sql_writer_lease import SqlWriterLeases
from ordo.tools.ports import ExpiryHorizons
from ordo.types import PersistenceId, SequenceNr, Tag

PAGE_SIZE = 500
"""Rows per read of the paged scans (events of an id, persistence ids)."""


class SqlDatastore(Protocol):
    """Connections of one backend: single statements, and atomic multi-statement writes."""

    def connection(self) -> AbstractContextManager[SqlConnection]:
        """Lend a connection for single statements (each its own transaction)."""
        ...

    def write_transaction(self) -> AbstractContextManager[SqlConnection]:
        """Lend a connection inside one transaction, committed on success."""
        ...


class SqlStore:
    """Shared plumbing: the datastore and the driver's parameter placeholder."""

    PARAM: ClassVar[str]

    def __init__(self, datastore: SqlDatastore) -> None:
        self._db = datastore

    def _sql(self, template: str) -> str:
        return template.format(p=self.PARAM)

    def _fetchall(self, template: str, params: Sequence[object]) -> list[Any]:
        with self._db.connection() as conn:
            return conn.execute(self._sql(template), params).fetchall()

    def _fetchone(self, template: str, params: Sequence[object]) -> Any:
        with self._db.connection() as conn:
            return conn.execute(self._sql(template), params).fetchone()


class SqlMetadataReads(SqlStore):
    """Reads of the journal's metadata table, for the stores that must agree with it."""

    def recorded_bucket_size(self) -> str | None:
        """The bucket size `init_storage` or the first write recorded, or None.

        The journal refuses writes of another size, and the tag views (RecordsBucketSize)
        a processor's source of another size, whose query would walk the wrong buckets.
        """
        return self._metadata(BUCKET_SIZE_KEY)

    def expiry_horizons(self) -> ExpiryHorizons:
        """The horizons in ordo_metadata: `EXPIRED_BEFORE_KEY`, and one key per tag after it."""
        prefix = f"{EXPIRED_BEFORE_KEY}:"
        rows = self._fetchall(
            f"SELECT key, value FROM {METADATA_TABLE} WHERE key = {{p}} "
            "OR substr(key, 1, {p}) = {p}",
            (EXPIRED_BEFORE_KEY, len(prefix), prefix),
        )
        found = {str(key): int(str(value)) for key, value in rows}
        return ExpiryHorizons(
            every_tag_ms=found.pop(EXPIRED_BEFORE_KEY, None),
            per_tag_ms={Tag(key.removeprefix(prefix)): ms for key, ms in found.items()},
        )

    def _metadata(self, key: str) -> str | None:
        row = self._fetchone(f"SELECT value FROM {METADATA_TABLE} WHERE key = {{p}}", (key,))
        return None if row is None else str(row[0])


class SqlJournalStore(SqlMetadataReads, SqlWriterLeases):
    """JournalStore methods that are plain SQL; subclasses add write_events()."""

    _HIGHEST = (
        "SELECT (SELECT max(sequence_nr) FROM messages WHERE persistence_id = {p}), "
        "(SELECT deleted_to FROM all_persistence_ids WHERE persistence_id = {p})"
    )

    def highest_sequence_nr(self, persistence_id: PersistenceId) -> SequenceNr:
        """The highest sequence nr ever written (deleted ones count), 0 if none."""
        with self._db.connection() as conn:
            return self._highest(conn, persistence_id)

    def read_events(
        self,
        persistence_id: PersistenceId,
        *,
        from_sequence_nr: SequenceNr,
        to_sequence_nr: SequenceNr,
    ) -> Iterator[PersistedEvent]:
        """Events from..to (inclusive), ascending, read a page at a time."""
        start = from_sequence_nr
        while start <= to_sequence_nr:
            rows = self._fetchall(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE persistence_id = {{p}} "
                "AND sequence_nr BETWEEN {p} AND {p} ORDER BY sequence_nr LIMIT {p}",
                (persistence_id, start, to_sequence_nr, PAGE_SIZE),
            )
            yield from (event_from_row(row) for row in rows)
            if len(rows) < PAGE_SIZE:
                return
            start = SequenceNr(int(rows[-1][1]) + 1)

    def persistence_ids(self) -> Iterator[PersistenceId]:
        """Every persistence id, in id order (bytewise), a page at a time."""
        after = ""
        while True:
            rows = self._fetchall(
                "SELECT persistence_id FROM all_persistence_ids WHERE persistence_id > {p} "
                "ORDER BY persistence_id LIMIT {p}",
                (after, PAGE_SIZE),
            )
            yield from (PersistenceId(str(row[0])) for row in rows)
            if len(rows) < PAGE_SIZE:
                return
            after = str(rows[-1][0])

    def delete_events(self, persistence_id: PersistenceId, *, to_sequence_nr: SequenceNr) -> int:
        """Delete up to to_sequence_nr (inclusive), remembering it so nrs are never reused."""
        with self._db.write_transaction() as conn:
            kept = min(to_sequence_nr, self._highest(conn, persistence_id))
            deleted = conn.execute(
                self._sql("DELETE FROM messages WHERE persistence_id = {p} AND sequence_nr <= {p}"),
                (persistence_id, to_sequence_nr),
            ).rowcount
            conn.execute(
                self._sql(
                    "UPDATE all_persistence_ids SET deleted_to = {p} "
                    "WHERE persistence_id = {p} AND deleted_to < {p}"
                ),
                (kept, persistence_id, kept),
            )
            return deleted

    def record_bucket_size(self, bucket_size: str) -> str:
        """Record the bucket size unless one is recorded; return the recorded one."""
        with self._db.write_transaction() as conn:
            conn.execute(
                self._sql(
                    f"INSERT INTO {METADATA_TABLE} (key, value) VALUES ({{p}}, {{p}}) "
                    "ON CONFLICT DO NOTHING"
                ),
                (BUCKET_SIZE_KEY, bucket_size),
            )
        recorded = self.recorded_bucket_size()
        return bucket_size if recorded is None else recorded

    def journal_id(self) -> str | None:
        """The id the schema's migration recorded, or None (a journal of schema 7 or older)."""
        return self._metadata(JOURNAL_ID_KEY)

    def summary(self) -> JournalSummary:
        """Count events and persistence ids (full scans)."""
        row = self._fetchone(
            "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM all_persistence_ids), "
            f"(SELECT value FROM {METADATA_TABLE} WHERE key = {{p}}), "
            f"(SELECT value FROM {METADATA_TABLE} WHERE key = {{p}}), "
            f"(SELECT value FROM {METADATA_TABLE} WHERE key = {{p}})",
            (BUCKET_SIZE_KEY, SCHEMA_VERSION_KEY, JOURNAL_ID_KEY),
        )
        return summary_from_row(row)

    def _highest(self, conn: SqlConnection, persistence_id: PersistenceId) -> SequenceNr:
        written, deleted = conn.execute(
            self._sql(self._HIGHEST), (persistence_id, persistence_id)
        ).fetchone()
        return SequenceNr(max(written or 0, deleted or 0))
