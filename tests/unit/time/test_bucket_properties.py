from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from ordo.time import BucketSize, epoch_ms_of
from ordo.types import TimeBucket

epoch_ms = st.integers(min_value=-(2**53), max_value=2**53)
sizes = st.sampled_from(BucketSize)


@given(epoch_ms, sizes)
def test_key_holds_the_instant(t: int, size: BucketSize) -> None:
    bucket = size.key(t)
    assert bucket <= t < size.next(bucket)
    assert bucket % size.millis == 0
    assert size.key(bucket) == bucket


@given(epoch_ms, sizes)
def test_previous_undoes_next(t: int, size: BucketSize) -> None:
    bucket = size.key(t)
    assert size.previous(size.next(bucket)) == bucket
    assert size.next(size.previous(bucket)) == bucket
    assert size.key(size.next(bucket)) == size.next(bucket)


@given(epoch_ms, st.integers(min_value=-(10**9), max_value=10**9), sizes)
def test_buckets_are_contiguous_and_cover_the_range(
    start: int, span: int, size: BucketSize
) -> None:
    up_to = start + span
    walked = list(size.buckets(start_ms=start, up_to_ms=up_to))
    if start > up_to:
        assert walked == []
        return
    assert walked[0] == size.key(start)
    assert walked[-1] == size.key(up_to)
    for earlier, later in pairwise(walked):
        assert later == size.next(earlier)
    assert len(walked) == (size.key(up_to) - size.key(start)) // size.millis + 1


@given(epoch_ms, epoch_ms, sizes)
def test_key_is_monotonic(a: int, b: int, size: BucketSize) -> None:
    if a <= b:
        assert size.key(a) <= size.key(b)


def test_next_of_a_bucket_is_typed() -> None:
    assert BucketSize.MINUTE.next(TimeBucket(0)) == TimeBucket(60_000)


@given(
    st.datetimes(
        timezones=st.builds(timezone, st.integers(-1439, 1439).map(lambda m: timedelta(minutes=m)))
    )
)
def test_epoch_ms_of_is_the_millisecond_holding_the_instant(moment: datetime) -> None:
    """Floored, also before 1970 (int(timestamp() * 1000) truncated toward zero)."""
    start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=epoch_ms_of(moment))
    assert start <= moment < start + timedelta(milliseconds=1)
