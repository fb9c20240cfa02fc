from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from ordo.errors import ConfigurationError, InvalidInputError
from ordo.time import (
    DEFAULT_FIRST_TIME_BUCKET,
    BucketSize,
    TimeUUID,
    epoch_ms_of,
    format_epoch_ms,
    format_first_time_bucket,
    parse_first_time_bucket,
)

NOV_20_2015_MS = 1_447_977_600_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("minute", BucketSize.MINUTE),
        ("Hour", BucketSize.HOUR),
        ("DAY", BucketSize.DAY),
        (" day ", BucketSize.DAY),
    ],
)
def test_parse_ignores_case(text: str, expected: BucketSize) -> None:
    assert BucketSize.parse(text) is expected


def test_parse_names_the_value_and_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"'week'.*minute, hour, day"):
        BucketSize.parse("week")


def test_sizes_are_persisted_as_lowercase_strings() -> None:
    assert [str(size) for size in BucketSize] == ["minute", "hour", "day"]


@pytest.mark.parametrize(
    ("size", "millis"),
    [(BucketSize.MINUTE, 60_000), (BucketSize.HOUR, 3_600_000), (BucketSize.DAY, 86_400_000)],
)
def test_millis(size: BucketSize, millis: int) -> None:
    assert size.millis == millis


def test_key_examples() -> None:
    assert BucketSize.HOUR.key(NOV_20_2015_MS + 3_599_999) == NOV_20_2015_MS
    assert BucketSize.HOUR.key(NOV_20_2015_MS + 3_600_000) == NOV_20_2015_MS + 3_600_000
    assert BucketSize.DAY.key(-1) == -86_400_000
    assert BucketSize.MINUTE.key(-60_000) == -60_000
    assert BucketSize.MINUTE.key(-60_001) == -120_000


def test_buckets_examples() -> None:
    hour = 3_600_000
    walked = list(
        BucketSize.HOUR.buckets(start_ms=NOV_20_2015_MS + 1, up_to_ms=NOV_20_2015_MS + 2 * hour)
    )
    assert walked == [NOV_20_2015_MS, NOV_20_2015_MS + hour, NOV_20_2015_MS + 2 * hour]
    assert list(BucketSize.HOUR.buckets(start_ms=5, up_to_ms=5)) == [0]
    assert list(BucketSize.HOUR.buckets(start_ms=6, up_to_ms=5)) == []


HOUR = BucketSize.HOUR


@pytest.mark.parametrize("value", [1.5, 3_600_000.0, True, "0", None, 2**63])
@pytest.mark.parametrize(
    ("named", "call"),
    [
        pytest.param("epoch_ms", HOUR.key, id="key"),
        pytest.param("bucket", HOUR.next, id="next"),
        pytest.param("bucket", HOUR.previous, id="previous"),
        pytest.param("start_ms", lambda v: HOUR.buckets(start_ms=v, up_to_ms=0), id="start"),
        pytest.param("up_to_ms", lambda v: HOUR.buckets(start_ms=0, up_to_ms=v), id="up_to"),
    ],
)
def test_bucket_arithmetic_takes_integers_only(
    value: object, named: str, call: Callable[[object], object]
) -> None:
    """A float gave a float bucket that equalled no stored one; True was taken for 1.

    `buckets` refuses when called, not at its first step.
    """
    with pytest.raises(InvalidInputError, match=f"^{named} "):
        call(value)


def test_key_of_a_timeuuid_is_the_key_of_its_milliseconds() -> None:
    offset = TimeUUID.max_for_epoch_ns((NOV_20_2015_MS + 3_599_999) * 1_000_000)
    assert BucketSize.HOUR.key_of(offset) == BucketSize.HOUR.key(offset.epoch_ms) == NOV_20_2015_MS


def test_default_first_time_bucket() -> None:
    assert parse_first_time_bucket(DEFAULT_FIRST_TIME_BUCKET) == NOV_20_2015_MS
    assert format_first_time_bucket(NOV_20_2015_MS) == DEFAULT_FIRST_TIME_BUCKET


@pytest.mark.parametrize(
    ("text", "epoch_ms"),
    [
        ("19700101T00:00", 0),
        ("19691231T23:59", -60_000),
        ("20240229T13:45", 1_709_214_300_000),
        ("15821016T00:00", -12_219_206_400_000),
        ("52360331T21:21", 103_072_857_660_000),
    ],
)
def test_first_time_bucket_round_trip(text: str, epoch_ms: int) -> None:
    assert parse_first_time_bucket(text) == epoch_ms
    assert format_first_time_bucket(epoch_ms) == text


def test_format_pads_the_year() -> None:
    assert format_first_time_bucket(-30_641_760_000_000) == "09990101T00:00"


@pytest.mark.parametrize(
    "text",
    [
        "09990101T00:00",
        "15000101T00:00",
        "15821015T00:00",
        "15821015T23:59",
        "52360331T21:22",
        "99991231T23:59",
    ],
)
def test_parse_first_time_bucket_rejects_instants_no_timeuuid_holds(text: str) -> None:
    """A query starts just before the bucket holding its first time bucket, a day one too: it
    failed there (15821015T00:01 with hour or day buckets), not naming the setting."""
    with pytest.raises(ConfigurationError, match="outside the range of TimeUUID offsets"):
        parse_first_time_bucket(text)


@pytest.mark.parametrize("value", [None, 20151120, b"20151120T00:00"])
def test_parse_first_time_bucket_rejects_what_is_not_a_string(value: object) -> None:
    with pytest.raises(ConfigurationError, match="first time bucket must be a string"):
        parse_first_time_bucket(value)  # type: ignore[arg-type]


def test_format_drops_seconds() -> None:
    assert format_first_time_bucket(NOV_20_2015_MS + 59_999) == DEFAULT_FIRST_TIME_BUCKET
    assert format_first_time_bucket(-1) == "19691231T23:59"


@pytest.mark.parametrize(
    ("epoch_ms", "text"),
    [
        (NOV_20_2015_MS, "2015-11-20T00:00:00+00:00"),
        (NOV_20_2015_MS + 59_999, "2015-11-20T00:00:59.999000+00:00"),
        (-1, "1969-12-31T23:59:59.999000+00:00"),
    ],
)
def test_format_epoch_ms_writes_iso_8601_in_utc(epoch_ms: int, text: str) -> None:
    assert format_epoch_ms(epoch_ms) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2015-11-20T00:00",
        "20151120",
        "20151120T0:00",
        "20151120T00:00:00",
        "20151120 00:00",
        "20151120t00:00",
        "2015112OT00:00",
    ],
)
def test_parse_first_time_bucket_rejects_other_formats(text: str) -> None:
    with pytest.raises(ConfigurationError, match="does not match yyyyMMdd'T'HH:mm"):
        parse_first_time_bucket(text)


@pytest.mark.parametrize(
    "text", ["20151320T00:00", "20150230T00:00", "20151120T24:00", "20151120T00:60"]
)
def test_parse_first_time_bucket_rejects_impossible_dates(text: str) -> None:
    with pytest.raises(ConfigurationError, match=repr(text)):
        parse_first_time_bucket(text)


@pytest.mark.parametrize("value", [None, 60_000, 1.5])
def test_parse_rejects_what_is_not_text(value: object) -> None:
    """An AttributeError (no strip()) before."""
    with pytest.raises(ConfigurationError, match="unknown bucket size"):
        BucketSize.parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, True, 1.5, "0", -(10**15), 10**15])
@pytest.mark.parametrize("write", [format_epoch_ms, format_first_time_bucket])
def test_writing_a_time_takes_the_integers_a_datetime_holds(
    write: Callable[[int], str], value: object
) -> None:
    """A float or a text was timedelta's TypeError, a time past the year 9999 an
    OverflowError, True the first millisecond of 1970."""
    with pytest.raises(InvalidInputError, match=r"^epoch_ms "):
        write(value)  # type: ignore[arg-type]


def test_writing_a_time_reaches_the_first_and_last_millisecond_a_datetime_holds() -> None:
    first = dt.datetime.min.replace(tzinfo=dt.UTC)
    last = dt.datetime.max.replace(tzinfo=dt.UTC)
    assert format_epoch_ms(epoch_ms_of(first)) == "0001-01-01T00:00:00+00:00"
    assert format_first_time_bucket(epoch_ms_of(last)) == "99991231T23:59"


@pytest.mark.parametrize(
    ("moment", "problem"),
    [
        (dt.datetime(2015, 11, 20), "moment 2015-11-20T00:00:00 is naive"),  # noqa: DTZ001 - the point
        (dt.date(2015, 11, 20), "an aware datetime is needed for moment, got date"),
        (NOV_20_2015_MS, "an aware datetime is needed for moment, got int"),
    ],
)
def test_epoch_ms_of_takes_an_aware_datetime_only(moment: object, problem: str) -> None:
    """A naive datetime or a number was a TypeError from the subtraction."""
    with pytest.raises(InvalidInputError, match=problem):
        epoch_ms_of(moment)  # type: ignore[arg-type]
