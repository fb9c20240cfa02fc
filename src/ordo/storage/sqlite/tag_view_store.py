"""Tag views, their write progress and tag scanning on SQLite."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from ordo.hashing import stable_hash
from ordo.storage.packed_reads import SQLITE_PACKING
from ordo.storage.rows import PROGRESS_COLUMNS, latest_progress
from ordo.storage.sql_tag_view_store import SqlTagViewStore
from ordo.storage.sqlite.datastore import SQLiteDatastore
from ordo.tagging import TagProgress, TagWrite
from ordo.types import Tag

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


class SQLiteTagViewStore(SqlTagViewStore):
    """TagViewStore on SQLite. Thread-safe (connections are per thread)."""

    BACKGROUND_WRITES: ClassVar[bool] = False
    PARAM = "?"
    PACKING = SQLITE_PACKING

    def __init__(self, datastore: SQLiteDatastore) -> None:
        super().__init__(datastore)
        self._sqlite = datastore

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        """Upsert the rows of the writes (expanded from `messages`) in one statement."""
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
        with self._sqlite.connection() as conn:
            conn.execute(_INSERT_TAG_VIEWS, (keys,))

    @property
    def datastore(self) -> SQLiteDatastore:
        """The file's connections (ordo.spark.read_ahead opens it in another process too)."""
        return self._sqlite

    def announce(self, tag: Tag) -> None:
        """SQLite has no cross-process notification; the journal notifies its own process."""

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        """Move progress rows forward (never back)."""
        with self._sqlite.write_transaction() as conn:
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
