"""When a live query looks back for late events, and how far (seed 000, "Back tracking")."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from ordo.settings import BackTrackPeriod, QuerySettings
from ordo.time import BucketSize
from ordo.time.duration import nanoseconds


class BackTrack(StrEnum):
    """The two back-tracks: frequent and short, rare and long."""

    SHORT = "short"
    LONG = "long"


class BackTrackSchedule:
    """Decides which back-tracks are due and where each starts. Pure; not thread-safe.

    A back-track re-reads the tag from `reach(...)` up to the query's position and delivers
    events that arrived after the query passed their offset; it never reaches before the
    query's own start (seed 000: back tracking only goes back to the offset the query is
    started from), nor before the ids the query forgot (`Forgetting.floor`).
    """

    def __init__(
        self,
        settings: QuerySettings,
        bucket_size: BucketSize,
        *,
        cleanup: timedelta,
        now_ns: int,
    ) -> None:
        self.bucket_size = bucket_size
        """The journal's: the reaches of "max" periods are bucket starts."""
        self._cleanup_ms = cleanup // timedelta(milliseconds=1)
        self._periods: dict[BackTrack, BackTrackPeriod] = {
            BackTrack.SHORT: settings.back_track_period,
            BackTrack.LONG: settings.back_track_long_period,
        }
        self._intervals_ns = {
            BackTrack.SHORT: nanoseconds(settings.back_track_interval),
            BackTrack.LONG: nanoseconds(settings.back_track_long_interval),
        }
        self._next_ns = {
            kind: now_ns + interval
            for kind, interval in self._intervals_ns.items()
            if self._periods[kind] != "off"
        }

    def due(self, now_ns: int) -> BackTrack | None:
        """The back-track to run now, the long one first; None when neither is due.

        It stays due until `ran` says it ran: one whose read failed (an outage) runs at the
        next poll, not an interval later, when the position may have moved past its reach.
        """
        kinds = (BackTrack.LONG, BackTrack.SHORT)
        return next((kind for kind in kinds if self._is_due(kind, now_ns)), None)

    def ran(self, kind: BackTrack, now_ns: int) -> None:
        """Reschedule `kind`, and the short one if it was due too: the long one covers it."""
        short_too = kind is BackTrack.LONG and self._is_due(BackTrack.SHORT, now_ns)
        for ran in (kind, BackTrack.SHORT) if short_too else (kind,):
            self._next_ns[ran] = now_ns + self._intervals_ns[ran]

    def next_due_ns(self) -> int | None:
        """When the next back-track is due, or None when both are off."""
        return min(self._next_ns.values(), default=None)

    def reach_ms(self, kind: BackTrack, *, position_ms: int) -> int:
        """Where a back-track starting from `position_ms` reaches back to (epoch ms)."""
        period = self._periods[kind]
        previous_start = self.bucket_size.previous(self.bucket_size.key(position_ms))
        if isinstance(period, timedelta):
            return position_ms - period // timedelta(milliseconds=1)
        if kind is BackTrack.LONG:
            return max(previous_start, position_ms - self._cleanup_ms)
        return previous_start

    def _is_due(self, kind: BackTrack, now_ns: int) -> bool:
        next_ns = self._next_ns.get(kind)
        return next_ns is not None and now_ns >= next_ns
