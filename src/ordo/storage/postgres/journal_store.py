"""The journal (`messages`) on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence

from ordo.errors import ConcurrencyConflictError, StorageIntegrityError
from ordo.journal.event import PersistedEvent
from ordo.storage.postgres.datastore import PostgresDatastore
from ordo.storage.rows import MESSAGE_COLUMNS, message_row
from ordo.storage.sql_store import SqlJournalStore
from ordo.types import SequenceNr

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


class PostgresJournalStore(SqlJournalStore):
    """JournalStore on PostgreSQL. Thread-safe (connections come from the pool)."""

    PARAM = "%s"

    def __init__(self, datastore: PostgresDatastore) -> None:
        super().__init__(datastore)
        self._postgres = datastore

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
            with self._postgres.connection() as conn:
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
