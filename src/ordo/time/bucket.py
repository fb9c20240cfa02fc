"""Time buckets: the fixed-width slices of epoch time that events-by-tag rows are keyed on."""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator
from enum import StrEnum

from ordo import arguments
from ordo.errors import ConfigurationError, InvalidInputError
from ordo.time.timeuuid import GREGORIAN_OFFSET_100NS, TIMESTAMP_MASK, TimeUUID
from ordo.types import TimeBucket

DEFAULT_FIRST_TIME_BUCKET = "20151120T00:00"
"""Akka Persistence Cassandra's default first time bucket: queries start no earlier."""

_FIRST_TIME_BUCKET_PATTERN = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2}):([0-9]{2})")
_FIRST_TIME_BUCKET_FORMAT = "yyyyMMdd'T'HH:mm"
_UNIX_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EARLIEST_FIRST_TIME_BUCKET_MS = -GREGORIAN_OFFSET_100NS // 10_000 + 86_400_000
"""15821016T00:00: a query starts just before the bucket holding its first time bucket, which
must be a TimeUUID for every bucket size (a day the widest): the day of 1582-10-15 starts there."""
_LATEST_FIRST_TIME_BUCKET_MS = (TIMESTAMP_MASK - GREGORIAN_OFFSET_100NS) // 10_000
_DATETIME_MS = tuple(
    (moment - _UNIX_EPOCH) // _dt.timedelta(milliseconds=1)
    for moment in (
        _dt.datetime(1, 1, 1, tzinfo=_dt.UTC),
        _dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=_dt.UTC),
    )
)
"""The epoch milliseconds a datetime holds (years 1 to 9999): what can be written as a time."""


class BucketSize(StrEnum):
    """How wide a time bucket is; persisted with the journal and fixed once data exists.

    The value is stored and passed as a setting, so members are lowercase strings.
    Every method is pure and thread-safe. Buckets are keyed by the epoch millisecond of
    their start (UTC); a bucket covers ``[start, start + millis)``.
    """

    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"

    @classmethod
    def parse(cls, text: str) -> BucketSize:
        """Read a bucket size from a setting, option or flag, ignoring case.

        Raises:
            ConfigurationError: the text names no bucket size (None or a number was an
                AttributeError); the message lists the valid ones.

        """
        try:
            return cls(text.strip().lower())
        except (ValueError, AttributeError) as exc:
            valid = ", ".join(member.value for member in cls)
            msg = f"unknown bucket size {text!r}; valid bucket sizes are: {valid}"
            raise ConfigurationError(msg) from exc

    @property
    def millis(self) -> int:
        """The width of one bucket in milliseconds."""
        return _MILLIS[self]

    def key(self, epoch_ms: int) -> TimeBucket:
        """Return the bucket holding ``epoch_ms``: its start, floored (also before 1970).

        Raises:
            InvalidInputError: `epoch_ms` is not an int (a bool is not) in -2**63..2**63-1:
                a float gave a float bucket that equalled no stored one.

        """
        arguments.integer(epoch_ms, name="epoch_ms", error=InvalidInputError)
        return self._start(epoch_ms)

    def key_of(self, timeuuid: TimeUUID) -> TimeBucket:
        """Return the bucket holding an event's offset, as ``key(timeuuid.epoch_ms)``.

        The journal's tag writes, rebuilds and verification call this once per event: a
        TimeUUID's milliseconds are an int, so `key`'s check would be paid there for nothing.
        """
        return self._start(timeuuid.epoch_ms)

    def next(self, bucket: TimeBucket) -> TimeBucket:
        """Return the bucket right after ``bucket`` (a bucket start, as `key` returns).

        Raises:
            InvalidInputError: `bucket` is not an int (a bool is not) in -2**63..2**63-1.

        """
        arguments.integer(bucket, name="bucket", error=InvalidInputError)
        return TimeBucket(bucket + self.millis)

    def previous(self, bucket: TimeBucket) -> TimeBucket:
        """Return the bucket right before ``bucket`` (a bucket start, as `key` returns).

        Raises:
            InvalidInputError: `bucket` is not an int (a bool is not) in -2**63..2**63-1.

        """
        arguments.integer(bucket, name="bucket", error=InvalidInputError)
        return TimeBucket(bucket - self.millis)

    def buckets(self, *, start_ms: int, up_to_ms: int) -> Iterator[TimeBucket]:
        """Yield every bucket from the one holding ``start_ms`` to the one holding ``up_to_ms``.

        Both ends are inclusive and the buckets ascend; nothing is yielded when
        ``start_ms > up_to_ms``. Readers call this to walk a tag's buckets in order.

        Raises:
            InvalidInputError: either end is not an int, as for `key`; raised by this call,
                not by the first step of the iteration.

        """
        for name, epoch_ms in (("start_ms", start_ms), ("up_to_ms", up_to_ms)):
            arguments.integer(epoch_ms, name=name, error=InvalidInputError)
        if start_ms > up_to_ms:
            return iter(())
        first, last = self._start(start_ms), self._start(up_to_ms)
        return map(TimeBucket, range(first, last + 1, self.millis))

    def _start(self, epoch_ms: int) -> TimeBucket:
        """The start of the bucket holding `epoch_ms`, an int (floored, also before 1970)."""
        return TimeBucket(epoch_ms - epoch_ms % self.millis)


_MILLIS: dict[BucketSize, int] = {
    BucketSize.MINUTE: 60_000,
    BucketSize.HOUR: 3_600_000,
    BucketSize.DAY: 86_400_000,
}


def parse_first_time_bucket(text: str) -> int:
    """Read Akka's ``first-time-bucket`` setting (``"yyyyMMdd'T'HH:mm"``, UTC) as epoch millis.

    Settings and Spark options call this to learn where queries without an offset start.

    Raises:
        ConfigurationError: the text is not a string, does not match the format, is not a real
            date, or is outside 15821016T00:00 to 52360331T21:21 (a query starts before the
            bucket holding it, which the TimeUUID range, 1582-10-15 to 5236-03-31, must hold): a
            query starting there failed with an OffsetFormatError that did not name the setting.

    """
    if not isinstance(text, str):
        msg = f"first time bucket must be a string ({_FIRST_TIME_BUCKET_FORMAT}), got {text!r}"
        raise ConfigurationError(msg)
    match = _FIRST_TIME_BUCKET_PATTERN.fullmatch(text.strip())
    if match is None:
        msg = f"first time bucket {text!r} does not match {_FIRST_TIME_BUCKET_FORMAT}"
        raise ConfigurationError(msg)
    year, month, day, hour, minute = (int(part) for part in match.groups())
    try:
        moment = _dt.datetime(year, month, day, hour, minute, tzinfo=_dt.UTC)
    except ValueError as exc:
        msg = f"first time bucket {text!r} is not a valid UTC date and time: {exc}"
        raise ConfigurationError(msg) from exc
    epoch_ms = epoch_ms_of(moment)
    if not _EARLIEST_FIRST_TIME_BUCKET_MS <= epoch_ms <= _LATEST_FIRST_TIME_BUCKET_MS:
        msg = (
            f"first time bucket {text!r} is outside the range of TimeUUID offsets: it must be "
            "from 15821016T00:00 to 52360331T21:21"
        )
        raise ConfigurationError(msg)
    return epoch_ms


def epoch_ms_of(moment: _dt.datetime) -> int:
    """The epoch millisecond holding `moment` (a datetime with a zone): floored, exactly.

    `int(moment.timestamp() * 1000)` truncates toward zero, so before 1970 an instant with
    sub-millisecond digits came out up to 1 ms later than itself, and goes through a float.

    Raises:
        InvalidInputError: `moment` is naive or no datetime (a TypeError from the subtraction).

    """
    arguments.aware_datetime(moment, name="moment", error=InvalidInputError)
    return (moment - _UNIX_EPOCH) // _dt.timedelta(milliseconds=1)


def format_epoch_ms(epoch_ms: int) -> str:
    """Write epoch millis as ISO-8601 in UTC (`2026-01-31T10:00:00+00:00`): how output shows time.

    Every instant that a command prints in its JSON (an event's `timestamp`, a time bucket, a
    cleanup's cutoff) is written so, as `datetime.isoformat()` writes the events' timestamps:
    epoch millis in one command and Akka's bucket format in another read as two contracts.

    Raises:
        InvalidInputError: `epoch_ms` is not an int (a bool is not) of years 1 to 9999: a float
            or a text was a TypeError from timedelta, a time beyond them an OverflowError.

    """
    _check_writable(epoch_ms)
    return (_UNIX_EPOCH + _dt.timedelta(milliseconds=epoch_ms)).isoformat()


def format_first_time_bucket(epoch_ms: int) -> str:
    """Write epoch millis in Akka's ``"yyyyMMdd'T'HH:mm"`` format (UTC), for display and config.

    Seconds and milliseconds are dropped (floored to the minute), as the format has none.

    Raises:
        InvalidInputError: as `format_epoch_ms`.

    """
    _check_writable(epoch_ms)
    moment = _UNIX_EPOCH + _dt.timedelta(milliseconds=epoch_ms)
    return (
        f"{moment.year:04d}{moment.month:02d}{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}"
    )


def _check_writable(epoch_ms: object) -> None:
    """InvalidInputError unless `epoch_ms` is an int a datetime holds (`_DATETIME_MS`)."""
    earliest, latest = _DATETIME_MS
    arguments.integer(
        epoch_ms, name="epoch_ms", error=InvalidInputError, minimum=earliest, maximum=latest
    )
