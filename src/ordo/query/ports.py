"""What the events-by-tag query needs from storage: ordered reads of one tag's bucket."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from ordo.query.envelope import KeyRun
from ordo.types import PersistenceId, Tag, TagPidSequenceNr, TimeBucket


class RowKey(Protocol):
    """The three columns the query's state machine decides on (the rest is payload)."""

    @property
    def offset_key(self) -> bytes:
        """The row's TimeUUID in its sortable 16-byte encoding."""
        ...

    @property
    def persistence_id(self) -> PersistenceId:
        """Whose event the row is."""
        ...

    @property
    def tag_pid_sequence_nr(self) -> TagPidSequenceNr:
        """The event's position among its persistence id's events of the tag."""
        ...


R_co = TypeVar("R_co", bound=RowKey, covariant=True)
R = TypeVar("R", bound=RowKey)
"""The row type a query works on: envelopes in the library, keys in Spark's planner."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TagViewPage:
    """One page of a (tag, bucket) to read: rows with after < offset <= up_to, ascending.

    The bounds are offsets as sortable 16-byte keys; the page holds at most `limit` rows, in
    (offset, persistence id, tag pid sequence nr) order. Only rows of `persistence_id` when it
    is given, and only those whose persistence id hash matches the segment `(segment_id,
    mask)` in `hash_mask` when that is given. Callers page on with `after` = the last row's
    offset: offsets are unique within a tag (TimeUUIDGenerator), so no row of the next page
    shares it. One object per page read, so every reader and its wrappers (a segment's, the
    packed reads) take the same request instead of restating seven parameters.
    """

    tag: Tag
    time_bucket: TimeBucket
    after: bytes
    up_to: bytes
    limit: int
    persistence_id: PersistenceId | None = None
    hash_mask: tuple[int, int] | None = None


@runtime_checkable
class TagViewReader(Protocol[R_co]):
    """Reads tag_views rows; the library query reads envelopes, Spark's planner only keys."""

    def read_tag_view(self, page: TagViewPage) -> Sequence[R_co]:
        """The rows of the page (TagViewPage says which, and in which order)."""
        ...

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        """The first bucket in (after, up_to] that may hold rows of `tag`; None when none does.

        The forward scan jumps there over empty buckets: a query from the default first time
        bucket would otherwise read every hour since 2015, one query each, before its first
        event. A reader without an index may answer the bucket right after `after`.
        """
        ...


@runtime_checkable
class RecordsExpiryHorizon(Protocol):
    """A reader of tag views that records where rows were deleted on purpose (the SQL ones do)."""

    def expiry_horizon_ms(self, tag: Tag) -> int | None:
        """The epoch ms before which `tag`'s rows were deleted on purpose; None: none were."""
        ...


@runtime_checkable
class RecordsBucketSize(Protocol):
    """A reader of a journal that records its bucket size (the SQL tag views do)."""

    def recorded_bucket_size(self) -> str | None:
        """The bucket size the journal recorded at its first write; None before any."""
        ...


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of keys summarised per persistence id, the page itself as `read_tag_view` reads it."""

    runs: Sequence[KeyRun] | None
    """One run per persistence id in the page; None when some id's rows in it are not one run
    (a gap, a duplicate, or tag pid sequence nrs out of offset order)."""
    row_count: int


@runtime_checkable
class RunReader(Protocol):
    """Reads pages of keys already summarised per persistence id, for the forward scan.

    Optional, for a query over KeyRuns (Spark's planner): it accepts a whole page at once
    when every persistence id's run continues where it left off, and reads the page row by
    row otherwise.
    """

    def read_runs(self, page: TagViewPage) -> RunPage:
        """The page `read_tag_view(page)` would return.

        Or a longer one: every row after `after` up to its greatest offset, in more than
        `limit` rows (a reader that had read further ahead); fewer than `limit` only when they
        are all there are up to `up_to`.
        """
        ...
