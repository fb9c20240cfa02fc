"""The operations tools' store on SQLite."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ordo.processing.connection import SqlConnection
from ordo.storage.sql_operations_store import (
    UPSERT_INTO,
    SqlOperationsStore,
    persistence_id_hashes,
)
from ordo.tools.ports import TagViewRow

# One statement per batch: the row keys travel as one JSON array and SQLite copies the payload
# columns from `messages` itself, as the tag writer's insert does.
_UPSERT_ROWS = UPSERT_INTO + (
    "SELECT r.value ->> 0, r.value ->> 1, m.timeuuid, m.persistence_id, r.value ->> 4, "
    "m.sequence_nr, r.value ->> 5, m.writer_uuid, m.serializer, m.manifest, m.payload, "
    "m.metadata, m.tags "
    "FROM json_each(?) AS r JOIN messages AS m ON m.persistence_id = r.value ->> 2 "
    "AND m.sequence_nr = r.value ->> 3 WHERE true "
)


class SQLiteOperationsStore(SqlOperationsStore):
    """OperationsStore on SQLite. Thread-safe (connections are per thread)."""

    PARAM = "?"

    def _upsert_rows(self, conn: SqlConnection, rows: Sequence[TagViewRow]) -> None:
        keys = json.dumps(
            [
                [r.tag, r.time_bucket, r.persistence_id, r.sequence_nr, r.tag_pid_sequence_nr, h]
                for r, h in zip(rows, persistence_id_hashes(rows), strict=True)
            ],
            ensure_ascii=False,
        )
        conn.execute(_UPSERT_ROWS + self.UPSERT_CONFLICT, (keys,))
