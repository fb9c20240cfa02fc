"""Where a query starts: NoOffset (the first time bucket) or after a TimeUUID offset."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ordo import arguments
from ordo.errors import ConfigurationError, FutureOffsetError, OffsetFormatError
from ordo.query.ports import RecordsExpiryHorizon
from ordo.settings import QuerySettings
from ordo.time import EARLIEST_EPOCH_NS, BucketSize, TimeUUID
from ordo.time.duration import nanoseconds
from ordo.types import Tag


@dataclass(frozen=True, slots=True)
class NoOffset:
    """Start at `first_time_bucket` and expect every persistence id from tag pid nr 1."""


NO_OFFSET = NoOffset()

Offset = NoOffset | TimeUUID
"""A TimeUUID offset is the last delivered event (inclusive): the query resumes after it."""


def looking_back(
    offset: TimeUUID, settings: QuerySettings, *, replayed: TimeUUID | None = None
) -> TimeUUID:
    """Where a reader that knows what it processed resumes: back_track_period earlier.

    Processed positions or records of handled events dedupe exactly, so such a reader (a
    processor's segment, a Spark projection) can start before its offset: an event that lies
    below the offset but was not visible when its last stream passed there (a late event,
    which that stream's back-track would have found) is then still delivered after a restart,
    split, merge or release. With a period of "max" it starts at the offset: a stream that
    ran long would otherwise re-read it all.

    `replayed` is a reset reader's replay boundary (how far it had got, or the offset it was
    reset to if further): the reset cleared the positions and records of what it handled, so
    they cannot tell the events before the offset from late ones, and looking back would
    handle them again. It then starts no earlier than there, nor than the offset.

    Raises:
        OffsetFormatError: `offset` is no TimeUUID (its text, None: an AttributeError).
        ConfigurationError: `settings` is no QuerySettings.

    """
    if not isinstance(offset, TimeUUID):
        msg = f"offset must be a TimeUUID, got {type(offset).__name__}: {offset!r:.80}"
        raise OffsetFormatError(msg)
    # None is no default here: the caller's are
    arguments.instance(settings, QuerySettings, name="settings", error=ConfigurationError)
    if not isinstance(settings.back_track_period, timedelta):
        return offset
    back_ns = offset.epoch_ns - nanoseconds(settings.back_track_period)
    # Not before 1582-10-15, where TimeUUIDs start (at 1970 it began after an offset before
    # then, and the events between the two were never delivered).
    back = TimeUUID.min_for_epoch_ns(max(back_ns, EARLIEST_EPOCH_NS))
    return back if replayed is None else max(back, min(replayed, offset))


def to_offset(value: object) -> Offset:
    """Read an offset: None or NoOffset, a TimeUUID, its string, or an aware datetime.

    A datetime resumes at that instant: events from it on are delivered. Anything else raises
    OffsetFormatError naming the value.
    """
    if value is None or isinstance(value, NoOffset):
        return NO_OFFSET
    if isinstance(value, TimeUUID):
        return value
    if isinstance(value, str):
        return TimeUUID.parse(value)
    if isinstance(value, datetime):
        return TimeUUID.from_datetime(value, bound="min")
    msg = f"an offset is a TimeUUID, its string or an aware datetime, not {value!r}"
    raise OffsetFormatError(msg)


def past_expiry(
    offset: Offset, reader: object, tag: Tag, *, first_time_bucket_ms: int, bucket_size: BucketSize
) -> Offset:
    """Where a query of `tag` from `offset` starts: NoOffset moves to the tag's expiry horizon.

    A query from NoOffset expects every persistence id to start at tag pid sequence nr 1, but
    `ordo cleanup expire|before` deleted the rows before the horizon on purpose (the reader
    says where: RecordsExpiryHorizon): an id whose first events were deleted was a gap to it,
    and it failed with MissingTaggedEventError. From the horizon, as a query from that offset,
    it takes an id's first event there as the first (Akka's query does so from NoOffset too,
    once its look-back for earlier ones times out). Every row it skips there was to be deleted.
    A horizon before the start of the `bucket_size` bucket holding `first_time_bucket_ms`
    leaves NoOffset as it is: nothing the query reads was deleted (an expiry records its
    horizon whether it deletes or not), and moved there the query lost its check of each id's
    nr 1 and read before its first time bucket. The query reads that bucket from its start
    (TagQuery rounds down, as Akka does): a horizon inside it, before `first_time_bucket_ms`,
    was taken for one before the query, which then failed on the rows it deleted.
    """
    if not isinstance(offset, NoOffset) or not isinstance(reader, RecordsExpiryHorizon):
        return offset
    horizon_ms = reader.expiry_horizon_ms(tag)
    if horizon_ms is None or horizon_ms <= bucket_size.key(first_time_bucket_ms):
        return offset
    return TimeUUID.max_for_epoch_ns(horizon_ms * 1_000_000 - 100)


def resumes_in_replay(resume: TimeUUID | None, replayed: TimeUUID | None) -> bool:
    """Whether a stream resumed after `resume` starts within a reset's replays (to `replayed`).

    Only then is each unknown id's next event after the offset its first (TagQuery's
    `after_reset`): the reset cleared what was handled there. The reset's boundary stays
    recorded once the replays are over; taken for a reset then, every later restart took an
    id's next visible event for its first and dropped a late one before it.
    """
    return resume is not None and replayed is not None and resume <= replayed


def refuse_future(offset: TimeUUID, *, now_ns: int) -> None:
    """Raise FutureOffsetError when `offset` is after `now_ns`.

    Resuming there would skip every event written until then (a typo in a year, or a clock far
    ahead): queries and processor resets refuse it.
    """
    if offset.epoch_ns > now_ns:
        msg = f"offset {offset} ({offset.datetime.isoformat()}) is in the future"
        raise FutureOffsetError(msg)
