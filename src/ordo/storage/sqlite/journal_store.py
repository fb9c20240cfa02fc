"""The journal (`messages`) on SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

from ordo.errors import ConcurrencyConflictError, StorageIntegrityError
from ordo.journal.event import PersistedEvent
from ordo.journal.ports import JournalSummary
from ordo.storage.migration import BUCKET_SIZE_KEY, METADATA_TABLE, SCHEMA_VERSION_KEY
from ordo.storage.rows import (
    MESSAGE_COLUMNS,
    SUMMARY_QUERY,
    event_from_row,
    message_row,
    summary_from_row,
)
from ordo.storage.sqlite.datastore import SQLiteDatastore
from ordo.types import PersistenceId, SequenceNr

PAGE_SIZE = 500

_HIGHEST = (
    "SELECT max(coalesce((SELECT max(sequence_nr) FROM messages WHERE persistence_id = ?1), 0),"
    " coalesce((SELECT deleted_to FROM all_persistence_ids WHERE persistence_id = ?1), 0))"
)


class SQLiteJournalStore:
    """JournalStore on SQLite. Thread-safe (connections are per thread)."""

    def __init__(self, datastore: SQLiteDatastore) -> None:
        self._db = datastore

    def write_events(
        self, events: Sequence[PersistedEvent], *, expected_sequence_nr: SequenceNr
    ) -> None:
        """Insert the events in one transaction after checking the expected sequence nr."""
        pid = events[0].persistence_id
        try:
            with self._db.write_transaction() as conn:
                actual = _highest(conn, pid)
                if actual != expected_sequence_nr:
                    raise ConcurrencyConflictError(
                        persistence_id=pid, expected=expected_sequence_nr, actual=actual
                    )
                if expected_sequence_nr == 0:
                    conn.execute(
                        "INSERT INTO all_persistence_ids (persistence_id) VALUES (?) "
                        "ON CONFLICT DO NOTHING",
                        (pid,),
                    )
                conn.executemany(
                    f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [message_row(event) for event in events],
                )
        except StorageIntegrityError as exc:
            actual = self.highest_sequence_nr(pid)
            raise ConcurrencyConflictError(
                persistence_id=pid, expected=expected_sequence_nr, actual=actual
            ) from exc

    def highest_sequence_nr(self, persistence_id: PersistenceId) -> SequenceNr:
        """The highest sequence nr ever written (deleted ones count), 0 if none."""
        with self._db.read() as conn:
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
            with self._db.read() as conn:
                rows = conn.execute(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE persistence_id = ? "
                    "AND sequence_nr BETWEEN ? AND ? ORDER BY sequence_nr LIMIT ?",
                    (persistence_id, start, to_sequence_nr, PAGE_SIZE),
                ).fetchall()
            yield from (event_from_row(row) for row in rows)
            if len(rows) < PAGE_SIZE:
                return
            start = SequenceNr(int(rows[-1][1]) + 1)

    def persistence_ids(self) -> Iterator[PersistenceId]:
        """Every persistence id, in id order, a page at a time."""
        after = ""
        while True:
            with self._db.read() as conn:
                rows = conn.execute(
                    "SELECT persistence_id FROM all_persistence_ids WHERE persistence_id > ? "
                    "ORDER BY persistence_id LIMIT ?",
                    (after, PAGE_SIZE),
                ).fetchall()
            yield from (PersistenceId(row[0]) for row in rows)
            if len(rows) < PAGE_SIZE:
                return
            after = rows[-1][0]

    def delete_events(self, persistence_id: PersistenceId, *, to_sequence_nr: SequenceNr) -> int:
        """Delete up to to_sequence_nr (inclusive), remembering it so nrs are never reused."""
        with self._db.write_transaction() as conn:
            kept = min(to_sequence_nr, _highest(conn, persistence_id))
            deleted = conn.execute(
                "DELETE FROM messages WHERE persistence_id = ? AND sequence_nr <= ?",
                (persistence_id, to_sequence_nr),
            ).rowcount
            conn.execute(
                "UPDATE all_persistence_ids SET deleted_to = max(deleted_to, ?) "
                "WHERE persistence_id = ?",
                (kept, persistence_id),
            )
            return deleted

    def record_bucket_size(self, bucket_size: str) -> str:
        """Record the bucket size unless one is recorded; return the recorded one."""
        with self._db.write_transaction() as conn:
            conn.execute(
                f"INSERT INTO {METADATA_TABLE} (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (BUCKET_SIZE_KEY, bucket_size),
            )
            row = conn.execute(
                f"SELECT value FROM {METADATA_TABLE} WHERE key = ?", (BUCKET_SIZE_KEY,)
            ).fetchone()
        return str(row[0])

    def recorded_bucket_size(self) -> str | None:
        """The bucket size the first write recorded, or None."""
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT value FROM {METADATA_TABLE} WHERE key = ?", (BUCKET_SIZE_KEY,)
            ).fetchone()
        return None if row is None else str(row[0])

    def summary(self) -> JournalSummary:
        """Count events and persistence ids (full scans)."""
        with self._db.read() as conn:
            row = conn.execute(
                SUMMARY_QUERY.format(placeholder="?"), (BUCKET_SIZE_KEY, SCHEMA_VERSION_KEY)
            ).fetchone()
        return summary_from_row(row)


def _highest(conn: sqlite3.Connection, persistence_id: PersistenceId) -> SequenceNr:
    return SequenceNr(int(conn.execute(_HIGHEST, (persistence_id,)).fetchone()[0]))
