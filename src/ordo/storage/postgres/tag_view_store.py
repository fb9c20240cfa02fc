"""Tag views, their write progress and tag scanning on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from ordo.hashing import stable_hash
from ordo.storage.postgres.datastore import PostgresDatastore
from ordo.storage.rows import (
    PROGRESS_COLUMNS,
    TAG_SUMMARY_QUERY,
    TAG_VIEW_KEY_COLUMNS,
    latest_progress,
    progress_from_row,
    tag_summary_from_row,
    tag_view_key_from_row,
)
from ordo.tagging import TaggedEvent, TagProgress, TagSummary, TagWrite
from ordo.types import PersistenceId, SequenceNr, Tag

# One statement per batch: the writes travel as arrays and PostgreSQL expands each range of
# journal events into rows itself, taking the tag pid sequence nr from the event's stored tags
# and copying the payload columns.
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
    "ON CONFLICT DO NOTHING"
)
_UPSERT_PROGRESS = (
    f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) SELECT * FROM unnest("
    "%b::text[], %b::text[], %b::bigint[], %b::bigint[], %b::bytea[]) "
    "ON CONFLICT (persistence_id, tag) DO UPDATE SET sequence_nr = excluded.sequence_nr, "
    "tag_pid_sequence_nr = excluded.tag_pid_sequence_nr, timeuuid = excluded.timeuuid "
    "WHERE excluded.tag_pid_sequence_nr > tag_write_progress.tag_pid_sequence_nr"
)


class PostgresTagViewStore:
    """TagViewStore on PostgreSQL. Thread-safe (connections come from the pool)."""

    def __init__(self, datastore: PostgresDatastore) -> None:
        self._db = datastore

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
        with self._db.connection() as conn:
            conn.execute(_INSERT_TAG_VIEWS, params)

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
        with self._db.connection() as conn:
            conn.execute(_UPSERT_PROGRESS, params)

    def read_progress(self, persistence_id: PersistenceId) -> Mapping[Tag, TagProgress]:
        """Progress per tag of the persistence id."""
        with self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {PROGRESS_COLUMNS} FROM tag_write_progress WHERE persistence_id = %s",
                (persistence_id,),
            ).fetchall()
        return {p.tag: p for p in map(progress_from_row, rows)}

    def read_tag_scanning(self, persistence_id: PersistenceId) -> SequenceNr:
        """Up to where all tagged events of the id are known written; 0 if never scanned."""
        with self._db.connection() as conn:
            row = conn.execute(
                "SELECT sequence_nr FROM tag_scanning WHERE persistence_id = %s", (persistence_id,)
            ).fetchone()
        return SequenceNr(0 if row is None else int(str(row[0])))

    def write_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Record the scanned sequence nr (it only moves forward)."""
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO tag_scanning (persistence_id, sequence_nr) VALUES (%s, %s) "
                "ON CONFLICT (persistence_id) DO UPDATE SET sequence_nr = excluded.sequence_nr "
                "WHERE excluded.sequence_nr > tag_scanning.sequence_nr",
                (persistence_id, sequence_nr),
            )

    def tags(self) -> Sequence[TagSummary]:
        """Every tag with rows, with counts (a full scan of tag_views)."""
        with self._db.connection() as conn:
            rows = conn.execute(TAG_SUMMARY_QUERY).fetchall()
        return [tag_summary_from_row(row) for row in rows]

    def tag_view_entries(self, tag: Tag) -> Iterator[TaggedEvent]:
        """Row keys of one tag in (bucket, timeuuid) order."""
        with self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {TAG_VIEW_KEY_COLUMNS} FROM tag_views WHERE tag = %s "
                "ORDER BY timebucket, timeuuid, persistence_id, tag_pid_sequence_nr",
                (tag,),
            ).fetchall()
        return map(tag_view_key_from_row, rows)
