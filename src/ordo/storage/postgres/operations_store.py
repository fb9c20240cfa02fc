"""The operations tools' store on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence

from ordo.processing.connection import SqlConnection
from ordo.storage.sql_operations_store import (
    UPSERT_INTO,
    SqlOperationsStore,
    persistence_id_hashes,
)
from ordo.tools.ports import TagViewRow

# One statement per batch: the row keys travel as binary arrays and PostgreSQL copies the
# payload columns from `messages` itself, as the tag writer's insert does.
_UPSERT_ROWS = UPSERT_INTO + (
    "SELECT r.tag, r.timebucket, m.timeuuid, m.persistence_id, r.tag_pid_sequence_nr, "
    "m.sequence_nr, r.persistence_id_hash, m.writer_uuid, m.serializer, m.manifest, m.payload, "
    "m.metadata, m.tags "
    "FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[]) "
    "AS r(tag, timebucket, persistence_id, sequence_nr, tag_pid_sequence_nr, persistence_id_hash) "
    "JOIN messages AS m ON m.persistence_id = r.persistence_id "
    "AND m.sequence_nr = r.sequence_nr "
)


class PostgresOperationsStore(SqlOperationsStore):
    """OperationsStore on PostgreSQL. Thread-safe (connections come from the pool)."""

    PARAM = "%s"

    def _upsert_rows(self, conn: SqlConnection, rows: Sequence[TagViewRow]) -> None:
        params = [
            [r.tag for r in rows],
            [r.time_bucket for r in rows],
            [r.persistence_id for r in rows],
            [r.sequence_nr for r in rows],
            [r.tag_pid_sequence_nr for r in rows],
            persistence_id_hashes(rows),
        ]
        conn.execute(_UPSERT_ROWS + self.UPSERT_CONFLICT, params)
