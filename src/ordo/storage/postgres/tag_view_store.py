"""Tag views, their write progress and tag scanning on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ordo.hashing import stable_hash
from ordo.storage.packed_reads import POSTGRES_PACKING
from ordo.storage.postgres.datastore import PostgresDatastore
from ordo.storage.rows import PROGRESS_COLUMNS, latest_progress
from ordo.storage.sql_tag_view_store import SqlTagViewStore
from ordo.tagging import TagProgress, TagWrite
from ordo.types import Tag

TAG_WRITTEN_CHANNEL = "ordo_tag_written"
"""The LISTEN/NOTIFY channel of tag writes; the payload is the tag."""

# One statement per batch: the writes travel as arrays and PostgreSQL expands each range of
# journal events into rows itself, taking the tag pid sequence nr from the event's stored tags
# and copying the payload columns. Rows go in in primary-key order, so that two writers
# inserting the same rows (a recovery rewriting what another journal writes) wait for each
# other in one order instead of deadlocking.
_INSERT_TAG_VIEWS = (
    "INSERT INTO tag_views (tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, "
    "sequence_nr, persistence_id_hash, writer_uuid, serializer, manifest, payload, metadata, tags) "
    "SELECT b.tag, b.timebucket, m.timeuuid, m.persistence_id, "
    "(m.tags::jsonb ->> b.tag)::bigint, m.sequence_nr, b.persistence_id_hash, m.writer_uuid, "
    "m.serializer, m.manifest, m.payload, m.metadata, m.tags "
    "FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[]) "
    "AS b(tag, timebucket, persistence_id, from_nr, to_nr, persistence_id_hash) "
    "JOIN messages AS m ON m.persistence_id = b.persistence_id "
    "AND m.sequence_nr BETWEEN b.from_nr AND b.to_nr "
    "WHERE m.tags::jsonb ? b.tag "
    "ORDER BY 1, 2, 3, 4, 5 "
    "ON CONFLICT DO NOTHING"
)
_UPSERT_PROGRESS = (
    f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) SELECT * FROM unnest("
    "%b::text[], %b::text[], %b::bigint[], %b::bigint[], %b::bytea[]) "
    "ON CONFLICT (persistence_id, tag) DO UPDATE SET sequence_nr = excluded.sequence_nr, "
    "tag_pid_sequence_nr = excluded.tag_pid_sequence_nr, timeuuid = excluded.timeuuid "
    "WHERE excluded.tag_pid_sequence_nr > tag_write_progress.tag_pid_sequence_nr"
)


class PostgresTagViewStore(SqlTagViewStore):
    """TagViewStore on PostgreSQL. Thread-safe (connections come from the pool)."""

    BACKGROUND_WRITES: ClassVar[bool] = True
    PARAM = "%s"
    PACKING = POSTGRES_PACKING

    def __init__(self, datastore: PostgresDatastore) -> None:
        super().__init__(datastore)
        self._postgres = datastore

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        """Upsert the rows of the writes (expanded from `messages`) in one transaction."""
        params = [
            [w.tag for w in writes],
            [w.time_bucket for w in writes],
            [w.persistence_id for w in writes],
            [w.from_sequence_nr for w in writes],
            [w.to_sequence_nr for w in writes],
            [stable_hash(w.persistence_id) for w in writes],
        ]
        with self._postgres.connection() as conn:
            conn.execute(_INSERT_TAG_VIEWS, params)

    def announce(self, tag: Tag) -> None:
        """NOTIFY the channel that live queries in other processes LISTEN on."""
        with self._postgres.connection() as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (TAG_WRITTEN_CHANNEL, tag))

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        """Move progress rows forward (never back)."""
        rows = latest_progress(progress)
        params = [
            [p.persistence_id for p in rows],
            [p.tag for p in rows],
            [p.sequence_nr for p in rows],
            [p.tag_pid_sequence_nr for p in rows],
            [p.timeuuid.to_bytes() for p in rows],
        ]
        with self._postgres.connection() as conn:
            conn.execute(_UPSERT_PROGRESS, params)
