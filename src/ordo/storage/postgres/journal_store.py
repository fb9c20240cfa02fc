"""The journal (`messages`) on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import psycopg

from ordo.errors import ConcurrencyConflictError, StorageIntegrityError
from ordo.journal.event import PersistedEvent
from ordo.journal.ports import JournalSummary
from ordo.storage.migration import BUCKET_SIZE_KEY, METADATA_TABLE, SCHEMA_VERSION_KEY
from ordo.storage.postgres.datastore import PostgresDatastore
from ordo.storage.rows import (
    MESSAGE_COLUMNS,
    SUMMARY_QUERY,
    event_from_row,
    message_row,
    summary_from_row,
)
from ordo.types import PersistenceId, SequenceNr

PAGE_SIZE = 500

_HIGHEST = (
    "SELECT greatest("
    "coalesce((SELECT max(sequence_nr) FROM messages WHERE persistence_id = %(pid)s), 0), "
    "coalesce((SELECT deleted_to FROM all_persistence_ids WHERE persistence_id = %(pid)s), 0))"
)
# One statement, one round trip, atomic on its own: check the highest sequence nr, register
# the persistence id and insert the rows only if the check passes. The rows travel as one
# binary array per column. Returns (highest before the append, rows inserted).
_APPEND = (
    "WITH highest AS ("
    "SELECT greatest("
    "coalesce((SELECT max(sequence_nr) FROM messages WHERE persistence_id = %(pid)s), 0), "
    "coalesce((SELECT deleted_to FROM all_persistence_ids WHERE persistence_id = %(pid)s), 0)"
    ") AS nr), "
    "registered AS (INSERT INTO all_persistence_ids (persistence_id) "
    "SELECT %(pid)s WHERE %(expected)s = 0 AND (SELECT nr FROM highest) = 0 "
    "ON CONFLICT DO NOTHING), "
    f"inserted AS (INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT * FROM unnest("
    "%(c0)b::text[], %(c1)b::bigint[], %(c2)b::bytea[], %(c3)b::text[], %(c4)b::text[], "
    "%(c5)b::text[], %(c6)b::bytea[], %(c7)b::text[], %(c8)b::text[]) "
    "WHERE (SELECT nr FROM highest) = %(expected)s RETURNING 1) "
    "SELECT (SELECT nr FROM highest), (SELECT count(*) FROM inserted)"
)


class PostgresJournalStore:
    """JournalStore on PostgreSQL. Thread-safe (connections come from the pool)."""

    def __init__(self, datastore: PostgresDatastore) -> None:
        self._db = datastore

    def write_events(
        self, events: Sequence[PersistedEvent], *, expected_sequence_nr: SequenceNr
    ) -> None:
        """Insert the events in one transaction after checking the expected sequence nr.

        Two concurrent appenders may both pass the check; the primary key then stops the
        second, which is reported as the same ConcurrencyConflictError.
        """
        pid = events[0].persistence_id
        columns = zip(*(message_row(event) for event in events), strict=True)
        params: dict[str, object] = {f"c{i}": list(column) for i, column in enumerate(columns)}
        params.update(pid=pid, expected=expected_sequence_nr)
        try:
            with self._db.connection() as conn:
                row = conn.execute(_APPEND, params).fetchone()
        except StorageIntegrityError as exc:  # a concurrent append won the primary key
            actual = self.highest_sequence_nr(pid)
            raise ConcurrencyConflictError(
                persistence_id=pid, expected=expected_sequence_nr, actual=actual
            ) from exc
        actual = SequenceNr(0 if row is None else int(str(row[0])))
        if actual != expected_sequence_nr:
            raise ConcurrencyConflictError(
                persistence_id=pid, expected=expected_sequence_nr, actual=actual
            )

    def highest_sequence_nr(self, persistence_id: PersistenceId) -> SequenceNr:
        """The highest sequence nr ever written (deleted ones count), 0 if none."""
        with self._db.connection() as conn:
            return _highest(conn, persistence_id)

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
            with self._db.connection() as conn:
                rows = conn.execute(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE persistence_id = %s "
                    "AND sequence_nr BETWEEN %s AND %s ORDER BY sequence_nr LIMIT %s",
                    (persistence_id, start, to_sequence_nr, PAGE_SIZE),
                ).fetchall()
            yield from (event_from_row(row) for row in rows)
            if len(rows) < PAGE_SIZE:
                return
            start = SequenceNr(int(str(rows[-1][1])) + 1)

    def persistence_ids(self) -> Iterator[PersistenceId]:
        """Every persistence id, in id order, a page at a time."""
        after = ""
        while True:
            with self._db.connection() as conn:
                rows = conn.execute(
                    "SELECT persistence_id FROM all_persistence_ids WHERE persistence_id > %s "
                    "ORDER BY persistence_id LIMIT %s",
                    (after, PAGE_SIZE),
                ).fetchall()
            yield from (PersistenceId(str(row[0])) for row in rows)
            if len(rows) < PAGE_SIZE:
                return
            after = str(rows[-1][0])

    def delete_events(self, persistence_id: PersistenceId, *, to_sequence_nr: SequenceNr) -> int:
        """Delete up to to_sequence_nr (inclusive), remembering it so nrs are never reused."""
        with self._db.write_transaction() as conn:
            kept = min(to_sequence_nr, _highest(conn, persistence_id))
            deleted = conn.execute(
                "DELETE FROM messages WHERE persistence_id = %s AND sequence_nr <= %s",
                (persistence_id, to_sequence_nr),
            ).rowcount
            conn.execute(
                "UPDATE all_persistence_ids SET deleted_to = greatest(deleted_to, %s) "
                "WHERE persistence_id = %s",
                (kept, persistence_id),
            )
            return deleted

    def record_bucket_size(self, bucket_size: str) -> str:
        """Record the bucket size unless one is recorded; return the recorded one."""
        with self._db.write_transaction() as conn:
            conn.execute(
                f"INSERT INTO {METADATA_TABLE} (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (BUCKET_SIZE_KEY, bucket_size),
            )
            row = conn.execute(
                f"SELECT value FROM {METADATA_TABLE} WHERE key = %s", (BUCKET_SIZE_KEY,)
            ).fetchone()
        return str(row[0]) if row is not None else bucket_size

    def recorded_bucket_size(self) -> str | None:
        """The bucket size the first write recorded, or None."""
        with self._db.connection() as conn:
            row = conn.execute(
                f"SELECT value FROM {METADATA_TABLE} WHERE key = %s", (BUCKET_SIZE_KEY,)
            ).fetchone()
        return None if row is None else str(row[0])

    def summary(self) -> JournalSummary:
        """Count events and persistence ids (full scans)."""
        with self._db.connection() as conn:
            row = conn.execute(
                SUMMARY_QUERY.format(placeholder="%s"), (BUCKET_SIZE_KEY, SCHEMA_VERSION_KEY)
            ).fetchone()
        return summary_from_row(row)


def _highest(conn: psycopg.Connection[tuple[object, ...]], pid: PersistenceId) -> SequenceNr:
    row = conn.execute(_HIGHEST, {"pid": pid}).fetchone()
    return SequenceNr(0 if row is None else int(str(row[0])))
