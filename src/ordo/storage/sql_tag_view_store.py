"""The tag view store methods whose SQL is the same on every backend, written once.

Each backend's tag view store subclasses `SqlTagViewStore` and adds the bulk writes; the
journal read as a tag view (`SqlAllEventsReader`) and the keys-only reads for Spark's planner
(`TagViewKeyReader`) are here too. SQL is written with `{p}` as in `sql_store`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import ClassVar

from ordo.query.envelope import EventEnvelope, KeyRun
from ordo.query.ports import TagViewPage
from ordo.storage.packed_reads import PackDialect, PackedRows, Packing, packing_query, unpack
from ordo.storage.rows import (
    PROGRESS_COLUMNS,
    TAG_SUMMARY_QUERY,
    TAG_VIEW_KEY_COLUMNS,
    progress_from_row,
    tag_summary_from_row,
    tag_view_key_from_row,
)
from ordo.storage.sql_store import SqlDatastore, SqlMetadataReads, SqlStore
from ordo.tagging import TaggedEvent, TagProgress, TagSummary, TagWrite
from ordo.time import BucketSize, TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TimeBucket

ENVELOPE_COLUMNS = (
    "timeuuid, persistence_id, tag_pid_sequence_nr, sequence_nr, serializer, manifest, payload, "
    "metadata, tags"
)
"""The tag_views columns of an EventEnvelope, in its field order."""
_KEY_RUN_COLUMNS = "timeuuid, tag_pid_sequence_nr, timeuuid, persistence_id, tag_pid_sequence_nr"
"""A row as a KeyRun of one (first and last are the row), in KeyRun's field order."""


AFTER_PARAMETER = 2
"""Where a page query's `after` is among its parameters (`packed_page_query`)."""


class SqlTagViewStore(SqlMetadataReads, ABC):
    """TagViewStore methods that are plain SQL; subclasses add the bulk writes.

    The writes are declared here, abstract, so that a `SqlTagViewStore` is a whole TagViewStore
    (`ordo.storage.stores.assembled` takes either backend's as one).
    """

    PACKING: ClassVar[PackDialect]
    BACKGROUND_WRITES: ClassVar[bool]

    @abstractmethod
    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        """Upsert the rows of the writes in one transaction (`TagViewWriter`)."""

    @abstractmethod
    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        """Record progress, only ever forward (`TagViewWriter`)."""

    @abstractmethod
    def announce(self, tag: Tag) -> None:
        """Tell queries in other processes that `tag` was written (`TagViewStore`)."""

    def read_progress(self, persistence_id: PersistenceId) -> Mapping[Tag, TagProgress]:
        """Progress per tag of the persistence id."""
        rows = self._fetchall(
            f"SELECT {PROGRESS_COLUMNS} FROM tag_write_progress WHERE persistence_id = {{p}}",
            (persistence_id,),
        )
        return {p.tag: p for p in map(progress_from_row, rows)}

    def read_tag_scanning(self, persistence_id: PersistenceId) -> SequenceNr:
        """Up to where all tagged events of the id are known written; 0 if never scanned."""
        row = self._fetchone(
            "SELECT sequence_nr FROM tag_scanning WHERE persistence_id = {p}", (persistence_id,)
        )
        return SequenceNr(0 if row is None else int(row[0]))

    def write_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Record the scanned sequence nr (it only moves forward)."""
        with self._db.connection() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO tag_scanning (persistence_id, sequence_nr) VALUES ({p}, {p}) "
                    "ON CONFLICT (persistence_id) DO UPDATE SET sequence_nr = excluded.sequence_nr "
                    "WHERE excluded.sequence_nr > tag_scanning.sequence_nr"
                ),
                (persistence_id, sequence_nr),
            )

    def expiry_horizon_ms(self, tag: Tag) -> int | None:
        """The tag's expiry horizon (RecordsExpiryHorizon): a query from the start begins there."""
        return self.expiry_horizons().of(tag)

    def read_tag_view(self, page: TagViewPage) -> Sequence[EventEnvelope]:
        """Envelopes of one (tag, bucket) with after < offset <= up_to, in offset order."""
        rows = self._fetchall(*self._tag_view_page(ENVELOPE_COLUMNS, page))
        envelope = tuple.__new__  # EventEnvelope._make without its per-row call and checks
        return [envelope(EventEnvelope, row) for row in rows]

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        """The first bucket in (after, up_to] holding rows of `tag` (a seek on the primary key)."""
        row = self._fetchone(
            "SELECT timebucket FROM tag_views WHERE tag = {p} AND timebucket > {p} "
            "AND timebucket <= {p} ORDER BY timebucket LIMIT 1",
            (tag, after, up_to),
        )
        return None if row is None else TimeBucket(int(row[0]))

    def _tag_view_page(self, columns: str, page: TagViewPage) -> tuple[str, tuple[object, ...]]:
        """The SELECT of one page of a (tag, bucket) in offset order, and its parameters."""
        where = ""
        params: tuple[object, ...] = (page.tag, page.time_bucket, page.after, page.up_to)
        if page.persistence_id is not None:
            where += "AND persistence_id = {p} "
            params += (page.persistence_id,)
        if page.hash_mask is not None:
            where += "AND (persistence_id_hash & {p}) = {p} "
            params += (page.hash_mask[1], page.hash_mask[0])
        query = (
            f"SELECT {columns} FROM tag_views WHERE tag = {{p}} AND timebucket = {{p}} "
            f"AND timeuuid > {{p}} AND timeuuid <= {{p}} {where}"
            "ORDER BY timeuuid, persistence_id, tag_pid_sequence_nr LIMIT {p}"
        )
        return query, (*params, page.limit)

    def read_packed(self, page: TagViewPage, columns: Sequence[tuple[str, Packing]]) -> PackedRows:
        """The rows `read_tag_view(page)` reads (the same page), packed column by column."""
        query, params = self.packed_page_query(page, columns)
        with self._db.connection() as conn:
            return unpack(conn.execute(query, params).fetchone(), columns)

    def packed_page_query(
        self, page: TagViewPage, columns: Sequence[tuple[str, Packing]]
    ) -> tuple[str, tuple[object, ...]]:
        """The SQL of `read_packed` and its parameters, `after` the third (AFTER_PARAMETER)."""
        names = ", ".join(name for name, _ in columns)
        inner, params = self._tag_view_page(names, page)
        return self._sql(packing_query(self.PACKING, inner, columns)), params

    def last_key(self, tag: Tag, time_bucket: TimeBucket, *, up_to: bytes) -> bytes | None:
        """The greatest offset key of the (tag, bucket) up to `up_to`, None if it has none."""
        row = self._fetchone(
            "SELECT max(timeuuid) FROM tag_views WHERE tag = {p} AND timebucket = {p} "
            "AND timeuuid <= {p}",
            (tag, time_bucket, up_to),
        )
        return None if row is None or row[0] is None else bytes(row[0])

    def heads(self, tag: Tag) -> Mapping[PersistenceId, int]:
        """The highest tag pid sequence nr of every persistence id of the tag (a scan)."""
        rows = self._fetchall(
            "SELECT persistence_id, max(tag_pid_sequence_nr) FROM tag_views WHERE tag = {p} "
            "GROUP BY persistence_id",
            (tag,),
        )
        return {PersistenceId(str(r[0])): int(r[1]) for r in rows}

    def tags(self) -> Sequence[TagSummary]:
        """Every tag with rows, with counts (a full scan of tag_views)."""
        return [tag_summary_from_row(row) for row in self._fetchall(TAG_SUMMARY_QUERY, ())]

    def tag_view_entries(self, tag: Tag) -> Iterator[TaggedEvent]:
        """Row keys of one tag in (bucket, timeuuid) order."""
        rows = self._fetchall(
            f"SELECT {TAG_VIEW_KEY_COLUMNS} FROM tag_views WHERE tag = {{p}} "
            "ORDER BY timebucket, timeuuid, persistence_id, tag_pid_sequence_nr",
            (tag,),
        )
        return map(tag_view_key_from_row, rows)


class SqlAllEventsReader(SqlStore):
    """Every journal event as a TagViewReader, so the events-by-tag machine can read them.

    The journal has no buckets: a bucket is read as its TimeUUID range of `messages` (indexed
    on timeuuid). An event's position is its sequence nr. The tag is ignored, and rows carry no
    stored hash, so segments are selected by the processor, not here. Pages resume after an
    offset, unique among all events as within a tag (TimeUUIDGenerator).
    """

    def __init__(self, datastore: SqlDatastore, bucket_size: BucketSize) -> None:
        super().__init__(datastore)
        self._bucket_size = bucket_size

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        """The bucket of the first event after bucket `after`, if it is not after `up_to`."""
        millis = self._bucket_size.millis
        row = self._fetchone(
            "SELECT timeuuid FROM messages WHERE timeuuid > {p} AND timeuuid <= {p} "
            "ORDER BY timeuuid LIMIT 1",
            (
                TimeUUID.max_for_epoch_ns((after + millis) * 1_000_000 - 100).to_bytes(),
                TimeUUID.max_for_epoch_ns((up_to + millis) * 1_000_000 - 100).to_bytes(),
            ),
        )
        if row is None:
            return None
        return self._bucket_size.key_of(TimeUUID.from_bytes(bytes(row[0])))

    def read_tag_view(self, page: TagViewPage) -> Sequence[EventEnvelope]:
        """Journal events of the bucket with after < offset <= up_to, in offset order.

        The page's hash_mask is not applied (see the class).
        """
        first = TimeUUID.min_for_epoch_ns(page.time_bucket * 1_000_000).to_bytes()
        last = TimeUUID.max_for_epoch_ns(
            (page.time_bucket + self._bucket_size.millis) * 1_000_000 - 100
        ).to_bytes()
        where = "AND persistence_id = {p} " if page.persistence_id is not None else ""
        params: tuple[object, ...] = (max(page.after, first), min(page.up_to, last))
        if page.persistence_id is not None:
            params += (page.persistence_id,)
        rows = self._fetchall(
            "SELECT timeuuid, persistence_id, sequence_nr, sequence_nr, serializer, manifest, "
            "payload, metadata, tags FROM messages WHERE timeuuid > {p} AND timeuuid <= {p} "
            f"{where}ORDER BY timeuuid, persistence_id, sequence_nr LIMIT {{p}}",
            (*params, page.limit),
        )
        envelope = tuple.__new__
        return [envelope(EventEnvelope, row) for row in rows]


class TagViewKeyReader:
    """A tag view store's keys-only reads under the query's port, each row a KeyRun of one.

    For Spark's planner, whose query also takes whole pages as KeyRuns (ordo.spark.key_runs).
    """

    def __init__(self, store: SqlTagViewStore) -> None:
        self._store = store

    def read_tag_view(self, page: TagViewPage) -> Sequence[KeyRun]:
        """Keys of one (tag, bucket) with after < offset <= up_to, in offset order."""
        rows = self._store._fetchall(*self._store._tag_view_page(_KEY_RUN_COLUMNS, page))
        run = tuple.__new__  # KeyRun._make without its per-row call and checks
        return [run(KeyRun, row) for row in rows]

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        """The store's answer: the first bucket in (after, up_to] holding rows of `tag`."""
        return self._store.next_bucket(tag, after=after, up_to=up_to)
