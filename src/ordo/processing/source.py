"""Where a tracking processor's events come from: a tag's events, or all journal events.

Both are read by the events-by-tag state machine (TagQuery), so a processor gets the seeds'
ordering guarantees either way. A segment of a processor whose persistence id is its
sequencing value is selected in storage (`persistence_id_hash & mask = segment_id`);
otherwise the processor filters rows by the policy's hash itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ordo import arguments
from ordo.errors import ConfigurationError
from ordo.hashing import stable_hash
from ordo.journal import validation
from ordo.journal.bucket_size import check_bucket_size
from ordo.processing.ports import TokenEntry
from ordo.processing.segment import Segment
from ordo.query import (
    NO_OFFSET,
    EventEnvelope,
    TagQuery,
    TagViewPage,
    TagViewReader,
    looking_back,
)
from ordo.query.offset import Offset, past_expiry, resumes_in_replay
from ordo.query.ports import RecordsBucketSize
from ordo.settings import EventsByTagSettings, QuerySettings
from ordo.settings.loading import flag
from ordo.types import PersistenceId, Tag, TimeBucket

ALL_EVENTS = Tag("*")
"""The pseudo tag of a source over every event of the journal."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSource:
    """A stream of envelopes a processor reads, opened per segment from its token."""

    reader: TagViewReader[EventEnvelope]
    tag: Tag
    query: QuerySettings
    events_by_tag: EventsByTagSettings
    can_select_segments: bool = True
    """Whether the reader can select a segment's rows itself (tag views store the hash)."""

    def __post_init__(self) -> None:
        """Refuse parts of the wrong kind here: the worker threads failed on them, unreported.

        A reader or settings given as None failed each thread with AttributeError, leaving a
        processor that ran nothing and reported no failure; a tag given as None or "" read
        nothing for ever; can_select_segments="no" selected segments in storage.
        """
        validation.tag(self.tag)
        flag("can_select_segments", self.can_select_segments)
        parts: tuple[tuple[str, object, type], ...] = (
            ("reader", self.reader, TagViewReader),
            ("query", self.query, QuerySettings),
            ("events_by_tag", self.events_by_tag, EventsByTagSettings),
        )
        for name, part, kind in parts:
            arguments.instance(part, kind, name=name, error=ConfigurationError)

    def check_bucket_size(self) -> None:
        """BucketSizeMismatchError when the tag views read record another bucket size.

        A query walking a minute journal's buckets as hours sat in the minute bucket it had
        reached until the hour ended: a live processor's later events waited up to an hour.
        The whole journal (ALL_EVENTS) is read by time ranges of any size, so it is not checked.
        """
        if self.tag != ALL_EVENTS and isinstance(self.reader, RecordsBucketSize):
            check_bucket_size(self.reader.recorded_bucket_size(), self.events_by_tag.bucket_size)

    def open(
        self,
        entry: TokenEntry,
        *,
        segment: Segment | None,
        now_ns: int,
        known: Mapping[PersistenceId, int] | None = None,
    ) -> TagQuery[EventEnvelope]:
        """A live query from `start(entry)`, reading only `segment`'s rows when given.

        `known`: the last processed tag pid sequence nr of persistence ids, so that the query
        holds back an event whose predecessor is not visible yet (TagQuery's `known`); only
        those of `segment`'s ids are kept when the reader selects the segment. While a reset
        segment's token lies within its replays (`replay_until`, `resumes_in_replay`), the
        query takes the next event after the offset of each id it does not know for the id's
        first (TagQuery's `after_reset`): the reset cleared the positions, and the event just
        before the offset, counted as delivered, made a processor reset to an offset before a
        gap stop at it again.
        """
        reader = self.reader if segment is None else _SegmentReader(self.reader, segment)
        if segment is not None and known:
            known = {pid: nr for pid, nr in known.items() if segment.matches(stable_hash(pid))}
        return TagQuery(
            reader,
            tag=self.tag,
            offset=self.start(entry),
            settings=self.query,
            bucket_size=self.events_by_tag.bucket_size,
            first_time_bucket_ms=self.events_by_tag.first_time_bucket_ms,
            now_ns=now_ns,
            is_live=True,
            known=known,
            after_reset=resumes_in_replay(
                entry.token.offset,
                None if entry.replay_until is None else entry.replay_until.reached,
            ),
        )

    def start(self, entry: TokenEntry) -> Offset:
        """Where a segment's stream resumes: `back_track_period` before its token.

        It starts there (`looking_back`) because the processor skips what it handled before
        (positions or handled records): an event that showed up behind the token since the
        segment's last stream passed there is then delivered. The stream never reads before
        this point, so records of handled events below it are not needed (`forget_handled`).
        After a reset it does not look back before the replay boundary (the offset reset to,
        or how far the processor had got): the reset cleared those positions and records, and
        the events just before the offset reset to were handled again. Without a token it
        starts at the tag's expiry horizon, if any (`past_expiry`).
        """
        offset = entry.token.offset
        if offset is None:
            return past_expiry(
                NO_OFFSET,
                self.reader,
                self.tag,
                first_time_bucket_ms=self.events_by_tag.first_time_bucket_ms,
                bucket_size=self.events_by_tag.bucket_size,
            )
        replayed = None if entry.replay_until is None else entry.replay_until.reached
        return looking_back(offset, self.query, replayed=replayed)


class _SegmentReader:
    """A reader that asks storage for one segment's rows only."""

    def __init__(self, reader: TagViewReader[EventEnvelope], segment: Segment) -> None:
        self._reader = reader
        self._hash_mask = (segment.segment_id, segment.mask)

    def read_tag_view(self, page: TagViewPage) -> Sequence[EventEnvelope]:
        """The segment's rows of the page (a hash_mask from the caller is replaced)."""
        return self._reader.read_tag_view(replace(page, hash_mask=self._hash_mask))

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        """The next bucket with rows of the tag (it may hold none of the segment's)."""
        return self._reader.next_bucket(tag, after=after, up_to=up_to)
