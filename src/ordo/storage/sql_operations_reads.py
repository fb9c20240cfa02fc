"""What the operations tools read: status counts, writer leases, dry-run counts, deleted_to.

The read half of SqlOperationsStore (its writes are there): the guards ask which writers are
live, dry runs count what a change would delete, and cleanup's planning asks for the newest row
before a cutoff. Written once in plain SQL for both backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ordo.journal.event import decode_tags
from ordo.storage.chunks import chunks
from ordo.storage.sql_key_reads import SqlKeyReads
from ordo.storage.sql_store import SqlMetadataReads
from ordo.time import TimeUUID
from ordo.tools.ports import DeletedCounts, WriterLeaseInfo
from ordo.types import PersistenceId, SequenceNr, Tag, TimeBucket

_IN_CHUNK = 500
"""Values per IN (...) list (within every driver's parameter limit)."""
DELETED_TO = "SELECT deleted_to FROM all_persistence_ids WHERE persistence_id = {p}"
"""Up to which sequence nr an id's events were deleted from the journal (no row: none)."""


class SqlOperationsReads(SqlKeyReads, SqlMetadataReads):
    """The reads of OperationsStore in plain SQL. Thread-safe."""

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
        for chunk in chunks(sorted(set(persistence_ids)), _IN_CHUNK):
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
        return sequence_nr_of(self._fetchone(DELETED_TO, (persistence_id,)))

    def tags_of(self, persistence_id: PersistenceId) -> Sequence[Tag]:
        """Tags of the id's events (each distinct tag set decoded once) and of its progress.

        A tag set is read with the first event that has it, which names it if it is damaged.
        """
        tags: set[Tag] = set()
        for text, sequence_nr in self._fetchall(
            "SELECT tags, min(sequence_nr) FROM messages WHERE persistence_id = {p} GROUP BY tags",
            (persistence_id,),
        ):
            tags.update(decode_tags(str(text), of=(persistence_id, int(str(sequence_nr)))))
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


def sequence_nr_of(row: Any) -> SequenceNr:
    """The sequence nr a fetched one-column row holds; 0 without a row."""
    return SequenceNr(0 if row is None else int(row[0]))
