"""The write side's settings: how tagged events are bucketed and batched."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from ordo.errors import ConfigurationError
from ordo.settings.durations import longest_durations, not_negative, shown
from ordo.settings.loading import LoadableSettings, enum_member, flag, integer_in
from ordo.time import DEFAULT_FIRST_TIME_BUCKET, BucketSize, parse_first_time_bucket


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EventsByTagSettings(LoadableSettings):
    """How tagged events are bucketed and written (seed 000 "events-by-tag" settings).

    Names and defaults follow Akka Persistence Cassandra's `events-by-tag` block in snake_case.
    Every duration is at most LONGEST_DURATION.
    """

    TOML_TABLE = "events_by_tag"

    bucket_size: BucketSize = BucketSize.HOUR
    """minute / hour / day; fixed once a journal has data."""
    first_time_bucket: str = DEFAULT_FIRST_TIME_BUCKET
    """Where a query without offset starts ("yyyyMMddTHH:mm", UTC), from the start of the bucket
    holding it as in Akka: set it to your go-live day."""
    max_message_batch_size: int = 150
    """Rows per tag_views write."""
    max_buffer_size: int = 100_000
    """Most events one tag's writer holds unwritten before appends are refused
    (TagWriteBacklogError) until they are written: Pekko Persistence Cassandra's
    `max-buffer-size`. A tag writer holds at most a batch being filled and BACKLOG_BATCHES full
    ones (750 events with the default batches, plus the events of one append) unless writes
    fail, so only an outage of the tag views that appends outlive reaches this; the default
    keeps such an outage to some 20 MB per tag (a buffered write is one per append and tag,
    about 200 bytes) and is far above the bursts of bench/append.py and `ordo demo`."""
    flush_interval: timedelta = timedelta(milliseconds=250)
    """Longest a tagged event waits in the tag writer; 0 writes each event at once (and retries
    a write that failed every `ordo.tagging.tag_writer.RETRY_INTERVAL`)."""
    pubsub_notification: bool = False
    """Notify queries of tag writes so they read at once instead of at the next refresh."""
    time_to_live: timedelta | None = None
    """tag_views rows older than this are removed by the expiry job (`ordo cleanup expire`);
    None keeps them forever. It must exceed any processor's lag (seed 000, "Cleanup")."""

    def __post_init__(self) -> None:
        enum_member(self, "bucket_size", BucketSize)
        flag("pubsub_notification", self.pubsub_notification)
        try:  # setting=: the loader names the variable (ORDO_FIRST_TIME_BUCKET), not "environment"
            parse_first_time_bucket(self.first_time_bucket)
        except ConfigurationError as exc:
            raise ConfigurationError(str(exc), setting="first_time_bucket") from exc
        integer_in("max_message_batch_size", self.max_message_batch_size, 1)
        integer_in("max_buffer_size", self.max_buffer_size, 1)
        not_negative("flush_interval", self.flush_interval)
        if self.time_to_live is not None and (
            not isinstance(self.time_to_live, timedelta) or self.time_to_live <= timedelta(0)
        ):
            msg = (
                f"time_to_live must be a positive duration or None, got {shown(self.time_to_live)}"
            )
            raise ConfigurationError(msg, setting="time_to_live")
        longest_durations(self)

    @property
    def first_time_bucket_ms(self) -> int:
        """first_time_bucket as epoch milliseconds."""
        return parse_first_time_bucket(self.first_time_bucket)
