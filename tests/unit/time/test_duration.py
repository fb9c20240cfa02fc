"""Durations in nanoseconds: exact for any timedelta, where float seconds round."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from ordo.time.duration import nanoseconds


@given(st.timedeltas())
def test_nanoseconds_are_the_exact_microseconds_times_1000(duration: timedelta) -> None:
    micros = (duration.days * 86_400 + duration.seconds) * 1_000_000 + duration.microseconds
    assert nanoseconds(duration) == micros * 1000


def test_a_long_duration_keeps_its_last_microsecond() -> None:
    assert nanoseconds(timedelta(days=10_000, microseconds=1)) == 864_000_000_000_001_000
