"""Time for ordering: Cassandra-ordered TimeUUIDs and the time buckets events are keyed on."""

from __future__ import annotations

from ordo.time.bucket import (
    DEFAULT_FIRST_TIME_BUCKET,
    BucketSize,
    epoch_ms_of,
    format_epoch_ms,
    format_first_time_bucket,
    parse_first_time_bucket,
)
from ordo.time.timeuuid import (
    EARLIEST_EPOCH_NS,
    GREGORIAN_OFFSET_100NS,
    TimeUUID,
    TimeUUIDGenerator,
)

__all__ = [
    "DEFAULT_FIRST_TIME_BUCKET",
    "EARLIEST_EPOCH_NS",
    "GREGORIAN_OFFSET_100NS",
    "BucketSize",
    "TimeUUID",
    "TimeUUIDGenerator",
    "epoch_ms_of",
    "format_epoch_ms",
    "format_first_time_bucket",
    "parse_first_time_bucket",
]
