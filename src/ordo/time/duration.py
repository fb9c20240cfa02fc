"""Durations as the integer nanoseconds that offsets, deadlines and waits are counted in."""

from __future__ import annotations

from datetime import timedelta

_MICROSECOND = timedelta(microseconds=1)


def nanoseconds(duration: timedelta) -> int:
    """The whole nanoseconds of `duration`, exactly.

    A timedelta holds whole microseconds, so counting those (not `total_seconds()`, a float
    that rounds days-long durations) and scaling by 1000 loses nothing.
    """
    return duration // _MICROSECOND * 1000
