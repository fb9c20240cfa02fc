"""The key reads of the operations jobs on Spark, in plain SQL for every backend.

Spark's `ordo_journal_keys` and `ordo_tag_view_keys` sources (ordo.spark.operations_source)
read through these: keys only, split on primary keys and keyset-paged, so that each page is
an index range scan and no read holds a cursor open between pages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from ordo.storage.sql_store import SqlStore
from ordo.tools.ports import MessageKey, TagRange, TagViewKeyRow
from ordo.types import PersistenceId, SequenceNr, Tag, TimeBucket

_LAST_SEQUENCE_NR = 2**62
_TAG_VIEW_KEY = "tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr"


class SqlKeyReads(SqlStore):
    """Partition planning and paged key reads of `messages` and `tag_views`. Thread-safe."""

    def deleted_persistence_ids(self) -> Mapping[PersistenceId, SequenceNr]:
        """Every id with deleted events, with its deleted_to."""
        rows = self._fetchall(
            "SELECT persistence_id, deleted_to FROM all_persistence_ids WHERE deleted_to > {p}",
            (0,),
        )
        return {PersistenceId(str(r[0])): SequenceNr(int(r[1])) for r in rows}

    def tag_ranges(self) -> Sequence[TagRange]:
        """Each tag's bucket span and row count (a scan of tag_views)."""
        rows = self._fetchall(
            "SELECT tag, min(timebucket), max(timebucket), count(*) FROM tag_views "
            "GROUP BY tag ORDER BY tag",
            (),
        )
        return [
            TagRange(
                tag=Tag(str(r[0])),
                first_bucket=TimeBucket(int(r[1])),
                last_bucket=TimeBucket(int(r[2])),
                rows=int(r[3]),
            )
            for r in rows
        ]

    def persistence_id_boundaries(self, parts: int) -> Sequence[PersistenceId]:
        """Ids at the quantiles of all persistence ids (OFFSET scans of the id index)."""
        total = int(self._fetchone("SELECT count(*) FROM all_persistence_ids", ())[0])
        found: list[PersistenceId] = []
        for part in range(1, parts):
            row = self._fetchone(
                "SELECT persistence_id FROM all_persistence_ids ORDER BY persistence_id "
                "LIMIT 1 OFFSET {p}",
                (total * part // parts,),
            )
            if row is not None and (not found or found[-1] != row[0]):
                found.append(PersistenceId(str(row[0])))
        return found

    def message_keys(
        self, *, after: PersistenceId | None, up_to: PersistenceId | None, page_size: int
    ) -> Iterator[Sequence[MessageKey]]:
        """Pages of (pid, sequence_nr, timeuuid, tags) in key order, keyset-paged."""
        cursor: tuple[str, int] = ("", 0) if after is None else (after, _LAST_SEQUENCE_NR)
        bound = "" if up_to is None else "AND persistence_id <= {p} "
        while True:
            params: tuple[object, ...] = (*cursor, *(() if up_to is None else (up_to,)))
            rows = self._fetchall(
                "SELECT persistence_id, sequence_nr, timeuuid, tags FROM messages "
                f"WHERE (persistence_id, sequence_nr) > ({{p}}, {{p}}) {bound}"
                "ORDER BY persistence_id, sequence_nr LIMIT {p}",
                (*params, page_size),
            )
            if rows:
                yield [(str(r[0]), int(r[1]), bytes(r[2]), str(r[3])) for r in rows]
            if len(rows) < page_size:
                return
            cursor = (str(rows[-1][0]), int(rows[-1][1]))

    def tag_view_keys(
        self, tag: Tag, *, first_bucket: TimeBucket, last_bucket: TimeBucket, page_size: int
    ) -> Iterator[Sequence[TagViewKeyRow]]:
        """Pages of the tag's row keys in the bucket range, keyset-paged on the primary key."""
        cursor: tuple[object, ...] = (first_bucket - 1, b"", "", 0)
        while True:
            rows = self._fetchall(
                f"SELECT {_TAG_VIEW_KEY}, sequence_nr FROM tag_views WHERE tag = {{p}} "
                "AND (timebucket, timeuuid, persistence_id, tag_pid_sequence_nr) > "
                "({p}, {p}, {p}, {p}) AND timebucket <= {p} "
                "ORDER BY timebucket, timeuuid, persistence_id, tag_pid_sequence_nr LIMIT {p}",
                (tag, *cursor, last_bucket, page_size),
            )
            if rows:
                yield [
                    (str(r[0]), int(r[1]), bytes(r[2]), str(r[3]), int(r[4]), int(r[5]))
                    for r in rows
                ]
            if len(rows) < page_size:
                return
            last = rows[-1]
            cursor = (int(last[1]), bytes(last[2]), str(last[3]), int(last[4]))
