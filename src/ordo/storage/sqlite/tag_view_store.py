"""Tag views, their write progress and tag scanning on SQLite."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

from ordo.hashing import stable_hash
from ordo.storage.rows import (
    PROGRESS_COLUMNS,
    TAG_SUMMARY_QUERY,
    TAG_VIEW_KEY_COLUMNS,
    latest_progress,
    progress_from_row,
    tag_summary_from_row,
    tag_view_key_from_row,
)
from ordo.storage.sqlite.datastore import SQLiteDatastore
from ordo.tagging import TaggedEvent, TagProgress, TagSummary, TagWrite
from ordo.types import PersistenceId, SequenceNr, Tag

# One statement per batch: the writes travel as one JSON array and SQLite expands each range of
# journal events into rows itself, taking the tag pid sequence nr from the event's stored tags
# and copying the payload columns, so no per-row work happens in Python.
_INSERT_TAG_VIEWS = (
    "INSERT INTO tag_views (tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, "
    "sequence_nr, persistence_id_hash, writer_uuid, serializer, manifest, payload, metadata, tags) "
    "SELECT b.value ->> 0, b.value ->> 1, m.timeuuid, m.persistence_id, t.value, "
    "m.sequence_nr, b.value ->> 5, m.writer_uuid, m.serializer, m.manifest, m.payload, "
    "m.metadata, m.tags "
    "FROM json_each(?) AS b JOIN messages AS m ON m.persistence_id = b.value ->> 2 "
    "AND m.sequence_nr BETWEEN b.value ->> 3 AND b.value ->> 4 "
    "JOIN json_each(m.tags) AS t ON t.key = b.value ->> 0 "
    "WHERE true ON CONFLICT DO NOTHING"
)
_UPSERT_PROGRESS = (
    f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (persistence_id, tag) DO UPDATE SET sequence_nr = excluded.sequence_nr, "
    "tag_pid_sequence_nr = excluded.tag_pid_sequence_nr, timeuuid = excluded.timeuuid "
    "WHERE excluded.tag_pid_sequence_nr > tag_write_progress.tag_pid_sequence_nr"
)


class SQLiteTagViewStore:
    """TagViewStore on SQLite. Thread-safe (connections are per thread)."""

    def __init__(self, datastore: SQLiteDatastore) -> None:
        self._db = datastore

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        """Upsert the rows of the writes (expanded from `messages`) in one transaction."""
        keys = json.dumps(
            [
                [
                    w.tag,
                    w.time_bucket,
                    w.persistence_id,
                    w.from_sequence_nr,
                    w.to_sequence_nr,
                    stable_hash(w.persistence_id),
                ]
                for w in writes
            ],
            ensure_ascii=False,
        )
        with self._db.write_transaction() as conn:
            conn.execute(_INSERT_TAG_VIEWS, (keys,))

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        """Move progress rows forward (never back)."""
        with self._db.write_transaction() as conn:
            conn.executemany(
                _UPSERT_PROGRESS,
                [
                    (
                        p.persistence_id,
                        p.tag,
                        p.sequence_nr,
                        p.tag_pid_sequence_nr,
                        p.timeuuid.to_bytes(),
                    )
                    for p in latest_progress(progress)
                ],
            )

    def read_progress(self, persistence_id: PersistenceId) -> Mapping[Tag, TagProgress]:
        """Progress per tag of the persistence id."""
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {PROGRESS_COLUMNS} FROM tag_write_progress WHERE persistence_id = ?",
                (persistence_id,),
            ).fetchall()
        return {p.tag: p for p in map(progress_from_row, rows)}

    def read_tag_scanning(self, persistence_id: PersistenceId) -> SequenceNr:
        """Up to where all tagged events of the id are known written; 0 if never scanned."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT sequence_nr FROM tag_scanning WHERE persistence_id = ?", (persistence_id,)
            ).fetchone()
        return SequenceNr(0 if row is None else int(row[0]))

    def write_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Record the scanned sequence nr (it only moves forward)."""
        with self._db.write_transaction() as conn:
            conn.execute(
                "INSERT INTO tag_scanning (persistence_id, sequence_nr) VALUES (?, ?) "
                "ON CONFLICT (persistence_id) DO UPDATE SET sequence_nr = excluded.sequence_nr "
                "WHERE excluded.sequence_nr > tag_scanning.sequence_nr",
                (persistence_id, sequence_nr),
            )

    def tags(self) -> Sequence[TagSummary]:
        """Every tag with rows, with counts (a full scan of tag_views)."""
        with self._db.read() as conn:
            rows = conn.execute(TAG_SUMMARY_QUERY).fetchall()
        return [tag_summary_from_row(row) for row in rows]

    def tag_view_entries(self, tag: Tag) -> Iterator[TaggedEvent]:
        """Row keys of one tag in (bucket, timeuuid) order."""
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {TAG_VIEW_KEY_COLUMNS} FROM tag_views WHERE tag = ? "
                "ORDER BY timebucket, timeuuid, persistence_id, tag_pid_sequence_nr",
                (tag,),
            ).fetchall()
        return map(tag_view_key_from_row, rows)
