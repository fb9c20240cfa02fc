"""The operations tools' store (reconciliation, cleanup, expiry, Spark reads), written once.

Backends subclass SqlOperationsStore and add `_upsert_rows`, the one statement that differs
(json_each on SQLite, unnest on PostgreSQL). Deletes of a persistence id's rows select them by
(tag, persistence_id): tag_views is keyed by (tag, time bucket, ...), so each is a scan of the
tag's rows. That is the price of keeping the tag writer's path free of a second index.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from ordo.hashing import stable_hash
from ordo.processing.connection import SqlConnection
from ordo.storage.rows import PROGRESS_COLUMNS
from ordo.storage.sql_key_reads import SqlKeyReads
from ordo.tagging import TagProgress
from ordo.time import TimeUUID
from ordo.tools.ports import (
    DeletedCounts,
    TagViewRow,
    WriterLeaseInfo,
)
from ordo.types import PersistenceId, SequenceNr, Tag, TimeBucket

IN_CHUNK = 500
"""Values per IN (...) list (within every driver's parameter limit)."""
_LAST_SEQUENCE_NR = 2**62
_TAG_VIEW_KEY = "tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr"
UPSERT_INTO = (
    "INSERT INTO tag_views (tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, "
    "sequence_nr, persistence_id_hash, writer_uuid, serializer, manifest, payload, metadata, tags) "
)
"""The columns a backend's `_upsert_rows` fills: its SELECT joins the row keys to `messages`."""
_DELETED_TO = "SELECT deleted_to FROM all_persistence_ids WHERE persistence_id = {p}"
_NAMES_NO_DELETED_EVENT = (
    "NOT EXISTS (SELECT 1 FROM all_persistence_ids AS a "
    "WHERE a.persistence_id = tag_write_progress.persistence_id "
    "AND tag_write_progress.sequence_nr <= a.deleted_to)"
)
"""A tag_write_progress row that a truncate deletes: one naming an event deleted from the
journal is the only record of its tag's numbering, which no rebuild can derive again."""


class SqlOperationsStore(SqlKeyReads):
    """OperationsStore in plain SQL; subclasses add `_upsert_rows`. Thread-safe."""

    UPSERT_CONFLICT: ClassVar[str] = (
        f"ON CONFLICT ({_TAG_VIEW_KEY}) DO UPDATE SET sequence_nr = excluded.sequence_nr, "
        "persistence_id_hash = excluded.persistence_id_hash, "
        "writer_uuid = excluded.writer_uuid, serializer = excluded.serializer, "
        "manifest = excluded.manifest, payload = excluded.payload, "
        "metadata = excluded.metadata, tags = excluded.tags"
    )
    """How a rebuilt row overwrites a stored row with its key: the journal's columns win."""

    # --- status ---------------------------------------------------------------------------

    def count_events_after(self, after: TimeUUID | None) -> int:
        """Journal events with a TimeUUID after `after` (all when None); uses the timeuuid index."""
        if after is None:
            row = self._fetchone("SELECT count(*) FROM messages", ())
        else:
            row = self._fetchone(
                "SELECT count(*) FROM messages WHERE timeuuid > {p}", (after.to_bytes(),)
            )
        return int(row[0])

    def count_time_buckets(self) -> int:
        """(tag, time bucket) partitions of tag_views (a scan of the key)."""
        row = self._fetchone(
            "SELECT count(*) FROM (SELECT DISTINCT tag, timebucket FROM tag_views) AS buckets", ()
        )
        return int(row[0])

    # --- writer leases -------------------------------------------------------------------

    def live_writers(self, *, since_ms: int) -> Sequence[WriterLeaseInfo]:
        """Leases renewed at or after `since_ms`, by writer uuid."""
        rows = self._fetchall(
            "SELECT writer_uuid, started_at, heartbeat_at FROM writer_leases "
            "WHERE heartbeat_at >= {p} ORDER BY writer_uuid",
            (since_ms,),
        )
        return [
            WriterLeaseInfo(
                writer_uuid=str(r[0]), started_at_ms=int(r[1]), heartbeat_at_ms=int(r[2])
            )
            for r in rows
        ]

    def writers_covering(
        self, persistence_ids: Sequence[PersistenceId], *, since_ms: int
    ) -> Mapping[PersistenceId, tuple[str, ...]]:
        """Ids a live lease lists, or whose events a live writer appended."""
        found: dict[PersistenceId, set[str]] = {}
        for chunk in _chunks(sorted(set(persistence_ids))):
            marks = ", ".join(["{p}"] * len(chunk))
            rows = self._fetchall(
                "SELECT l.persistence_id, l.writer_uuid FROM writer_lease_pids AS l "
                "JOIN writer_leases AS w ON w.writer_uuid = l.writer_uuid "
                f"WHERE w.heartbeat_at >= {{p}} AND l.persistence_id IN ({marks}) "
                "UNION SELECT DISTINCT m.persistence_id, m.writer_uuid FROM messages AS m "
                "JOIN writer_leases AS w ON w.writer_uuid = m.writer_uuid "
                f"WHERE w.heartbeat_at >= {{p}} AND m.persistence_id IN ({marks})",
                (since_ms, *chunk, since_ms, *chunk),
            )
            for pid, writer in rows:
                found.setdefault(PersistenceId(str(pid)), set()).add(str(writer))
        return {pid: tuple(sorted(writers)) for pid, writers in sorted(found.items())}

    # --- reads ---------------------------------------------------------------------------

    def deleted_to(self, persistence_id: PersistenceId) -> SequenceNr:
        """Up to which sequence nr the id's events were deleted; 0 if none."""
        return _sequence_nr(self._fetchone(_DELETED_TO, (persistence_id,)))

    def tags_of(self, persistence_id: PersistenceId) -> Sequence[Tag]:
        """Tags of the id's events (each distinct tag set decoded once) and of its progress."""
        tags: set[Tag] = set()
        for (text,) in self._fetchall(
            "SELECT DISTINCT tags FROM messages WHERE persistence_id = {p}", (persistence_id,)
        ):
            tags.update(json.loads(str(text)))
        for (tag,) in self._fetchall(
            "SELECT tag FROM tag_write_progress WHERE persistence_id = {p}", (persistence_id,)
        ):
            tags.add(Tag(str(tag)))
        return sorted(tags)

    def count_tag_view_rows(
        self, persistence_id: PersistenceId, tag: Tag, *, after_sequence_nr: SequenceNr
    ) -> int:
        """Rows of (tag, id) with sequence_nr > after (a scan of the tag)."""
        row = self._fetchone(
            "SELECT count(*) FROM tag_views WHERE tag = {p} AND persistence_id = {p} "
            "AND sequence_nr > {p}",
            (tag, persistence_id, after_sequence_nr),
        )
        return int(row[0])

    def count_metadata(
        self, persistence_id: PersistenceId, tags: Sequence[Tag], *, after_sequence_nr: SequenceNr
    ) -> DeletedCounts:
        """Progress rows of the tags with sequence_nr > after, and the id's tag_scanning row."""
        progress = sum(
            int(
                self._fetchone(
                    "SELECT count(*) FROM tag_write_progress WHERE persistence_id = {p} "
                    "AND tag = {p} AND sequence_nr > {p}",
                    (persistence_id, tag, after_sequence_nr),
                )[0]
            )
            for tag in tags
        )
        scanning = int(
            self._fetchone(
                "SELECT count(*) FROM tag_scanning WHERE persistence_id = {p}", (persistence_id,)
            )[0]
        )
        return DeletedCounts(progress_rows=progress, scanning_rows=scanning)

    def count_persistence_id_events(self, persistence_id: PersistenceId) -> int:
        """Events of the id still in the journal."""
        return int(
            self._fetchone(
                "SELECT count(*) FROM messages WHERE persistence_id = {p}", (persistence_id,)
            )[0]
        )

    def count_tag_views_before(self, tag: Tag, *, up_to_bucket: TimeBucket, before: bytes) -> int:
        """Rows of the tag with timeuuid < `before`."""
        row = self._fetchone(
            "SELECT count(*) FROM tag_views WHERE tag = {p} AND timebucket <= {p} "
            "AND timeuuid < {p}",
            (tag, up_to_bucket, before),
        )
        return int(row[0])

    def newest_tag_view_before(
        self, tag: Tag, *, up_to_bucket: TimeBucket, before: bytes
    ) -> bytes | None:
        """Newest row of the tag with timeuuid < `before`: two seeks in the primary key.

        Only the last bucket can hold rows at or after `before`; asking it and the buckets
        before it apart keeps each query a seek instead of a walk back over that bucket's
        newer rows.
        """
        for condition, params in (
            ("timebucket = {p} AND timeuuid < {p}", (up_to_bucket, before)),
            ("timebucket < {p}", (up_to_bucket,)),
        ):
            row = self._fetchone(
                f"SELECT timeuuid FROM tag_views WHERE tag = {{p}} AND {condition} "
                "ORDER BY timebucket DESC, timeuuid DESC LIMIT 1",
                (tag, *params),
            )
            if row is not None:
                return bytes(row[0])
        return None

    # --- writes --------------------------------------------------------------------------

    def replace_tag_view(
        self,
        persistence_id: PersistenceId,
        tag: Tag,
        rows: Sequence[TagViewRow],
        progress: TagProgress | None,
        *,
        keep_up_to: SequenceNr,
    ) -> int:
        """Delete the (tag, id) rows after keep_up_to, upsert `rows`, set the progress.

        To `progress`; without one (no event left in the journal has the tag), to the newest
        kept row's, or the stored progress if that is newer and up to `keep_up_to`.
        """
        with self._db.write_transaction() as conn:
            deleted = conn.execute(
                self._sql(
                    "DELETE FROM tag_views WHERE tag = {p} AND persistence_id = {p} "
                    "AND sequence_nr > {p}"
                ),
                (tag, persistence_id, keep_up_to),
            ).rowcount
            if rows:
                self._upsert_rows(conn, rows)
            if progress is not None:
                self._replace_progress(conn, progress)
            else:
                self._keep_numbering(conn, persistence_id, tag, keep_up_to)
            return deleted

    def set_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Set the id's tag_scanning exactly (0 deletes the row)."""
        with self._db.write_transaction() as conn:
            conn.execute(
                self._sql("DELETE FROM tag_scanning WHERE persistence_id = {p}"),
                (persistence_id,),
            )
            if sequence_nr > 0:
                conn.execute(
                    self._sql(
                        "INSERT INTO tag_scanning (persistence_id, sequence_nr) VALUES ({p}, {p})"
                    ),
                    (persistence_id, sequence_nr),
                )

    def delete_tag_views(self, persistence_id: PersistenceId, tags: Sequence[Tag]) -> DeletedCounts:
        """Delete the id's rows and progress of the tags, and its tag_scanning row.

        Except the progress of the events deleted from the journal (`_keep_numbering`): the
        numbering recovery or a rebuild then goes on from, where no event left has the tag.
        """
        with self._db.write_transaction() as conn:
            deleted_to = _sequence_nr(
                conn.execute(self._sql(_DELETED_TO), (persistence_id,)).fetchone()
            )
            return self._delete_tag_views(
                conn, persistence_id, tags, keep_numbering_up_to=deleted_to
            )

    def delete_persistence_id(
        self, persistence_id: PersistenceId, tags: Sequence[Tag]
    ) -> DeletedCounts:
        """Delete the id's events, rows, progress, scanning and its registration."""
        with self._db.write_transaction() as conn:
            # Forgotten, the id numbers its events from 1 again, and its tags with them.
            counts = self._delete_tag_views(
                conn, persistence_id, tags, keep_numbering_up_to=SequenceNr(0)
            )
            events = conn.execute(
                self._sql("DELETE FROM messages WHERE persistence_id = {p}"), (persistence_id,)
            ).rowcount
            for table in ("all_persistence_ids", "writer_lease_pids"):
                conn.execute(
                    self._sql(f"DELETE FROM {table} WHERE persistence_id = {{p}}"),
                    (persistence_id,),
                )
            return counts + DeletedCounts(events=events)

    def truncate_tag_views(self, *, dry_run: bool) -> DeletedCounts:
        """Delete (or count) every row of tag_views, tag_write_progress and tag_scanning.

        Except the progress rows naming events deleted from the journal: see
        `_NAMES_NO_DELETED_EVENT`.
        """
        tables = (
            "tag_views",
            f"tag_write_progress WHERE {_NAMES_NO_DELETED_EVENT}",
            "tag_scanning",
        )
        with self._db.write_transaction() as conn:
            if dry_run:
                counts = [
                    int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                    for table in tables
                ]
            else:
                counts = [conn.execute(f"DELETE FROM {table}").rowcount for table in tables]
        rows, progress, scanning = counts
        return DeletedCounts(tag_view_rows=rows, progress_rows=progress, scanning_rows=scanning)

    def delete_tag_views_before(
        self, tag: Tag, *, up_to_bucket: TimeBucket, before: bytes, limit: int
    ) -> int:
        """Delete at most `limit` rows of the tag with timeuuid < before (one transaction)."""
        with self._db.write_transaction() as conn:
            return conn.execute(
                self._sql(
                    f"DELETE FROM tag_views WHERE ({_TAG_VIEW_KEY}) IN (SELECT {_TAG_VIEW_KEY} "
                    "FROM tag_views WHERE tag = {p} AND timebucket <= {p} AND timeuuid < {p} "
                    "LIMIT {p})"
                ),
                (tag, up_to_bucket, before, limit),
            ).rowcount

    def upsert_tag_view_rows(self, rows: Sequence[TagViewRow]) -> None:
        """Insert or overwrite the rows in one transaction."""
        if rows:
            with self._db.write_transaction() as conn:
                self._upsert_rows(conn, rows)

    def write_exact_progress(self, progress: Sequence[TagProgress]) -> None:
        """Set the progress rows to exactly these values."""
        if not progress:
            return
        with self._db.write_transaction() as conn:
            for p in progress:
                self._replace_progress(conn, p)

    def write_tag_scanning(self, scanned: Mapping[PersistenceId, SequenceNr]) -> None:
        """Move each id's tag_scanning to at least its value."""
        if not scanned:
            return
        with self._db.write_transaction() as conn:
            for pid, sequence_nr in scanned.items():
                conn.execute(
                    self._sql(
                        "INSERT INTO tag_scanning (persistence_id, sequence_nr) VALUES ({p}, {p}) "
                        "ON CONFLICT (persistence_id) DO UPDATE "
                        "SET sequence_nr = excluded.sequence_nr "
                        "WHERE excluded.sequence_nr > tag_scanning.sequence_nr"
                    ),
                    (pid, sequence_nr),
                )

    # --- helpers -------------------------------------------------------------------------

    def _upsert_rows(self, conn: SqlConnection, rows: Sequence[TagViewRow]) -> None:
        raise NotImplementedError

    def _replace_progress(self, conn: SqlConnection, progress: TagProgress) -> None:
        conn.execute(
            self._sql("DELETE FROM tag_write_progress WHERE persistence_id = {p} AND tag = {p}"),
            (progress.persistence_id, progress.tag),
        )
        conn.execute(
            self._sql(
                f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) "
                "VALUES ({p}, {p}, {p}, {p}, {p})"
            ),
            (
                progress.persistence_id,
                progress.tag,
                progress.sequence_nr,
                progress.tag_pid_sequence_nr,
                progress.timeuuid.to_bytes(),
            ),
        )

    def _keep_numbering(
        self,
        conn: SqlConnection,
        persistence_id: PersistenceId,
        tag: Tag,
        keep_up_to: SequenceNr,
    ) -> int:
        """Raise the (id, tag) progress to the newest row of the events deleted up to keep_up_to.

        The journal numbers the tag's next event from this progress: deleted, it started again
        at 1 beside the kept rows, and a query that had delivered them took the new event for
        one it had seen. A stored progress beyond keep_up_to is dropped (returns how many were):
        it names an event still in the journal, which recovery or a rebuild numbers from, or
        none (stale). With keep_up_to 0 no event was deleted: no row to raise it to, no scan.
        """
        dropped = conn.execute(
            self._sql(
                "DELETE FROM tag_write_progress WHERE persistence_id = {p} AND tag = {p} "
                "AND sequence_nr > {p}"
            ),
            (persistence_id, tag, keep_up_to),
        ).rowcount
        if keep_up_to == 0:
            return dropped
        conn.execute(
            self._sql(
                f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) "
                f"SELECT {PROGRESS_COLUMNS} FROM tag_views WHERE tag = {{p}} "
                "AND persistence_id = {p} AND sequence_nr <= {p} "
                "ORDER BY tag_pid_sequence_nr DESC LIMIT 1 "
                "ON CONFLICT (persistence_id, tag) DO UPDATE SET "
                "sequence_nr = excluded.sequence_nr, "
                "tag_pid_sequence_nr = excluded.tag_pid_sequence_nr, timeuuid = excluded.timeuuid "
                "WHERE excluded.tag_pid_sequence_nr > tag_write_progress.tag_pid_sequence_nr"
            ),
            (tag, persistence_id, keep_up_to),
        )
        return dropped

    def _delete_tag_views(
        self,
        conn: SqlConnection,
        persistence_id: PersistenceId,
        tags: Sequence[Tag],
        *,
        keep_numbering_up_to: SequenceNr,
    ) -> DeletedCounts:
        """Delete the id's rows and progress of the tags (see `_keep_numbering`), its scanning."""
        rows = progress = 0
        for tag in tags:
            progress += self._keep_numbering(conn, persistence_id, tag, keep_numbering_up_to)
            rows += conn.execute(
                self._sql("DELETE FROM tag_views WHERE tag = {p} AND persistence_id = {p}"),
                (tag, persistence_id),
            ).rowcount
        scanning = conn.execute(
            self._sql("DELETE FROM tag_scanning WHERE persistence_id = {p}"), (persistence_id,)
        ).rowcount
        return DeletedCounts(tag_view_rows=rows, progress_rows=progress, scanning_rows=scanning)


def persistence_id_hashes(rows: Sequence[TagViewRow]) -> list[int]:
    """The stable_hash of each row's persistence id (computed once per id), in row order."""
    hashes = {pid: stable_hash(pid) for pid in {r.persistence_id for r in rows}}
    return [hashes[r.persistence_id] for r in rows]


def _sequence_nr(row: Any) -> SequenceNr:
    """The sequence nr a fetched one-column row holds; 0 without a row."""
    return SequenceNr(0 if row is None else int(row[0]))


def _chunks(values: Sequence[PersistenceId]) -> Iterator[Sequence[PersistenceId]]:
    for start in range(0, len(values), IN_CHUNK):
        yield values[start : start + IN_CHUNK]
