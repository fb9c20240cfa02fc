"""The journal (`messages`) on SQLite."""

from __future__ import annotations

from collections.abc import Sequence

from ordo.errors import ConcurrencyConflictError, StorageIntegrityError
from ordo.journal.event import PersistedEvent
from ordo.storage.rows import MESSAGE_COLUMNS, message_row
from ordo.storage.sql_store import SqlJournalStore
from ordo.storage.sqlite.datastore import SQLiteDatastore
from ordo.types import SequenceNr


class SQLiteJournalStore(SqlJournalStore):
    """JournalStore on SQLite. Thread-safe (connections are per thread)."""

    PARAM = "?"

    def __init__(self, datastore: SQLiteDatastore) -> None:
        super().__init__(datastore)
        self._sqlite = datastore

    def write_events(
        self, events: Sequence[PersistedEvent], *, expected_sequence_nr: SequenceNr
    ) -> None:
        """Insert the events in one transaction after checking the expected sequence nr."""
        pid = events[0].persistence_id
        try:
            with self._sqlite.write_transaction() as conn:
                actual = self._highest(conn, pid)
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
