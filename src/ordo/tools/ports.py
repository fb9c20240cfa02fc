"""What the operations tools need from storage, and the rows they hand over.

Backends under ordo.storage implement OperationsStore (storage/sql_operations_store.py); the
tools take it as a port so that their rules (the active-writer guard, dry runs, what a rebuild
writes) are written once for every backend.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ordo.tagging import TagProgress
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket


@dataclass(frozen=True, slots=True, kw_only=True)
class WriterLeaseInfo:
    """One journal's lease as stored: epoch milliseconds of its start and last heartbeat."""

    writer_uuid: str
    started_at_ms: int
    heartbeat_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TagViewRow:
    """Where one journal event goes in a tag's view; the payload columns come from `messages`.

    A rebuild computes these (tag pid sequence nr and time bucket) and the store upserts them,
    copying serializer, payload, metadata and tags from the event inside the database.
    """

    tag: Tag
    time_bucket: TimeBucket
    persistence_id: PersistenceId
    sequence_nr: SequenceNr
    tag_pid_sequence_nr: TagPidSequenceNr


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletedCounts:
    """How many rows of each table an operation deleted (or, in a dry run, would delete)."""

    events: int = 0
    tag_view_rows: int = 0
    progress_rows: int = 0
    scanning_rows: int = 0

    def __add__(self, other: DeletedCounts) -> DeletedCounts:
        return DeletedCounts(
            events=self.events + other.events,
            tag_view_rows=self.tag_view_rows + other.tag_view_rows,
            progress_rows=self.progress_rows + other.progress_rows,
            scanning_rows=self.scanning_rows + other.scanning_rows,
        )

    @property
    def total(self) -> int:
        """Rows over every table."""
        return self.events + self.tag_view_rows + self.progress_rows + self.scanning_rows


@dataclass(frozen=True, slots=True, kw_only=True)
class TagRange:
    """The time buckets one tag's rows span, and how many rows it has (for planning reads)."""

    tag: Tag
    first_bucket: TimeBucket
    last_bucket: TimeBucket
    rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpiryHorizons:
    """Before which instant (epoch ms) tag_views rows were deleted on purpose, tag by tag.

    The expiry and `cleanup before` record their cutoff (of every tag, or of the one they were
    given) before deleting, so that verify does not report those events' rows as missing and no
    rebuild or repair writes them again: an event is expired when its TimeUUID's millisecond is
    before its tag's horizon, exactly the rows those deletions take. A horizon only moves
    forward: a later cutoff that is earlier deletes nothing and does not bring rows back.
    """

    every_tag_ms: int | None = None
    per_tag_ms: Mapping[Tag, int] = field(default_factory=dict)

    def of(self, tag: Tag) -> int | None:
        """The tag's horizon: the later of its own and every tag's (None: nothing expired)."""
        found = [ms for ms in (self.every_tag_ms, self.per_tag_ms.get(tag)) if ms is not None]
        return max(found, default=None)

    def is_expired(self, tag: Tag, timeuuid: TimeUUID) -> bool:
        """Whether the tag's row of the event at `timeuuid` was deleted on purpose."""
        horizon = self.of(tag)
        return horizon is not None and timeuuid.epoch_ms < horizon


MessageKey = tuple[str, int, bytes, str]
"""(persistence_id, sequence_nr, timeuuid bytes, tags JSON) of one journal event."""
TagViewKeyRow = tuple[str, int, bytes, str, int, int]
"""(tag, timebucket, timeuuid bytes, persistence_id, tag_pid_sequence_nr, sequence_nr)."""


class OperationsStore(Protocol):
    """Reconciliation, cleanup and expiry on one database. Every method is one transaction.

    Thread-safe. Reads named "scan" read a whole table or a whole tag: tools only.
    """

    def count_events_after(self, after: TimeUUID | None) -> int:
        """Journal events with a TimeUUID after `after` (every event when None)."""
        ...

    def count_time_buckets(self) -> int:
        """(tag, time bucket) partitions of tag_views (a scan)."""
        ...

    def live_writers(self, *, since_ms: int) -> Sequence[WriterLeaseInfo]:
        """Leases renewed at or after `since_ms`."""
        ...

    def writers_covering(
        self, persistence_ids: Sequence[PersistenceId], *, since_ms: int
    ) -> Mapping[PersistenceId, tuple[str, ...]]:
        """For each id a live writer uses, those writers (lease ids or writers of its events)."""
        ...

    def deleted_to(self, persistence_id: PersistenceId) -> SequenceNr:
        """Up to which sequence nr the id's events were deleted (their rows are kept); 0 if none."""
        ...

    def tags_of(self, persistence_id: PersistenceId) -> Sequence[Tag]:
        """The tags of the id's events and of its tag write progress, sorted."""
        ...

    def count_tag_view_rows(
        self, persistence_id: PersistenceId, tag: Tag, *, after_sequence_nr: SequenceNr
    ) -> int:
        """Rows of (tag, id) with sequence_nr > after (a scan of the tag)."""
        ...

    def count_metadata(
        self, persistence_id: PersistenceId, tags: Sequence[Tag], *, after_sequence_nr: SequenceNr
    ) -> DeletedCounts:
        """Progress rows of the tags with sequence_nr > after, and the id's tag_scanning row.

        Events and rows: 0.
        """
        ...

    def replace_tag_view(
        self,
        persistence_id: PersistenceId,
        tag: Tag,
        rows: Sequence[TagViewRow],
        progress: TagProgress | None,
        *,
        keep_up_to: SequenceNr,
    ) -> int:
        """Delete the (tag, id) rows after `keep_up_to`, upsert `rows`, set the progress.

        Returns how many rows were deleted. Rows of events up to `keep_up_to` (deleted from the
        journal) are kept, because they cannot be rebuilt. The progress is set to `progress`;
        when None (no event left in the journal has the tag), to the newest kept row's, or the
        stored progress if that is newer and up to `keep_up_to`: the journal numbers the tag's
        next event from it, so it must not go below the kept rows.
        """
        ...

    def set_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Set the id's tag_scanning to exactly `sequence_nr` (0 deletes the row)."""
        ...

    def delete_tag_views(self, persistence_id: PersistenceId, tags: Sequence[Tag]) -> DeletedCounts:
        """Delete the id's rows and progress of the tags, and its tag_scanning row.

        The progress of events deleted from the journal (sequence_nr up to `deleted_to`) is kept,
        or raised to their newest row, as `replace_tag_view` does: where no event left in the
        journal has the tag, it is the only record of the numbering recovery goes on from.
        """
        ...

    def delete_persistence_id(
        self, persistence_id: PersistenceId, tags: Sequence[Tag]
    ) -> DeletedCounts:
        """Delete the id's events, its rows and progress of the tags, and all its metadata."""
        ...

    def count_persistence_id_events(self, persistence_id: PersistenceId) -> int:
        """Events of the id still in the journal."""
        ...

    def truncate_tag_views(self, *, dry_run: bool) -> DeletedCounts:
        """Delete every tag_views, tag_write_progress and tag_scanning row (or count them).

        Except the progress rows of events deleted from the journal (sequence_nr up to their
        id's `deleted_to`), for the numbering, as `delete_tag_views` keeps them.
        """
        ...

    def delete_tag_views_before(
        self, tag: Tag, *, up_to_bucket: TimeBucket, before: bytes, limit: int
    ) -> int:
        """Delete at most `limit` rows of the tag with timeuuid < `before`; returns how many."""
        ...

    def count_tag_views_before(self, tag: Tag, *, up_to_bucket: TimeBucket, before: bytes) -> int:
        """Rows of the tag with timeuuid < `before` (what delete_tag_views_before would delete)."""
        ...

    def newest_tag_view_before(
        self, tag: Tag, *, up_to_bucket: TimeBucket, before: bytes
    ) -> bytes | None:
        """The greatest timeuuid of the tag's rows with timeuuid < `before` (None: no row).

        The newest event delete_tag_views_before would delete: a processor whose token has
        reached it has read every row the deletion takes.
        """
        ...

    def record_expiry(self, cutoff_ms: int, tag: Tag | None) -> None:
        """Move the horizon of `tag` (every tag when None) up to `cutoff_ms`, never down."""
        ...

    def expiry_horizons(self) -> ExpiryHorizons:
        """Every horizon `record_expiry` recorded."""
        ...

    def upsert_tag_view_rows(self, rows: Sequence[TagViewRow]) -> None:
        """Insert the rows, or overwrite rows with their keys (idempotent), in one transaction."""
        ...

    def write_exact_progress(self, progress: Sequence[TagProgress]) -> None:
        """Set tag_write_progress rows to these values, whichever way they move."""
        ...

    def write_tag_scanning(self, scanned: Mapping[PersistenceId, SequenceNr]) -> None:
        """Set tag_scanning of each id to at least its value."""
        ...

    def tag_ranges(self) -> Sequence[TagRange]:
        """Each tag's bucket span and row count (a scan of tag_views)."""
        ...

    def persistence_id_boundaries(self, parts: int) -> Sequence[PersistenceId]:
        """At most parts - 1 ids splitting all persistence ids into about equal ranges."""
        ...

    def message_keys(
        self, *, after: PersistenceId | None, up_to: PersistenceId | None, page_size: int
    ) -> Iterator[Sequence[MessageKey]]:
        """Pages of event keys with after < persistence_id <= up_to (None: unbounded)."""
        ...

    def tag_view_keys(
        self, tag: Tag, *, first_bucket: TimeBucket, last_bucket: TimeBucket, page_size: int
    ) -> Iterator[Sequence[TagViewKeyRow]]:
        """Pages of the tag's row keys in first_bucket..last_bucket (inclusive), in key order."""
        ...

    def deleted_persistence_ids(self) -> Mapping[PersistenceId, SequenceNr]:
        """Every id with deleted events, with its deleted_to."""
        ...
