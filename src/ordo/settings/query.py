"""The read side's settings: how events-by-tag queries wait, search and back-track."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from ordo.errors import ConfigurationError
from ordo.settings.durations import longest_durations, not_negative, positive, shown
from ordo.settings.loading import BackTrackPeriod, LoadableSettings, integer_in


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QuerySettings(LoadableSettings):
    """How an events-by-tag query reads (seeds 000 and 001; Akka's defaults).

    Back-track periods are a duration, "max" (back to the start of the previous bucket, or the
    cleanup window if shorter) or, for the long one, "off". Whatever its period, no back-track
    reaches back to the events of ids the query forgot (`cleanup_old_persistence_ids`): they
    would be delivered again (seed 000). Every duration is at most LONGEST_DURATION.
    """

    TOML_TABLE = "query"

    eventual_consistency_delay: timedelta = timedelta(seconds=5)
    """Live queries stay this far behind now, so that writes from every node can arrive."""
    refresh_interval: timedelta = timedelta(seconds=3)
    """How often a live query polls (sooner on a notification when pubsub is on)."""
    page_size: int = 500
    """Rows per read."""
    gap_timeout: timedelta = timedelta(seconds=10)
    """How long the search for a missing event runs before the query fails."""
    new_persistence_id_scan_timeout: timedelta = timedelta(0)
    """How long to look for earlier events of a persistence id first seen in the current bucket."""
    offset_scanning_period: timedelta = timedelta(milliseconds=200)
    """A query from an offset in the current bucket, or one a back-track still reaches
    (`ordo.query.start_scan.needs_start_scan`), scans this far before it first."""
    max_missing_to_search: int = 5000
    """A gap wider than this fails at once instead of being searched."""
    cleanup_old_persistence_ids: timedelta | None = None
    """Forget persistence ids not seen for this long; None means twice the bucket size.

    Zero is refused: it would forget every id at once, so that each event of a known id looked
    like a first one (it used to mean the default, silently)."""
    back_track_interval: timedelta = timedelta(seconds=1)
    back_track_period: BackTrackPeriod = timedelta(seconds=5)
    back_track_long_interval: timedelta = timedelta(seconds=120)
    back_track_long_period: BackTrackPeriod = "max"

    def __post_init__(self) -> None:
        for name in (
            "eventual_consistency_delay",
            "gap_timeout",
            "new_persistence_id_scan_timeout",
            "offset_scanning_period",
            "back_track_interval",
            "back_track_long_interval",
        ):
            not_negative(name, getattr(self, name))
        for name in ("refresh_interval", "back_track_interval", "back_track_long_interval"):
            positive(name, getattr(self, name))
        integer_in("page_size", self.page_size, 1)
        integer_in("max_missing_to_search", self.max_missing_to_search, 1)
        if self.cleanup_old_persistence_ids is not None:
            positive("cleanup_old_persistence_ids", self.cleanup_old_persistence_ids)
        if self.back_track_period == "off":
            msg = "back_track_period cannot be off (only back_track_long_period can)"
            raise ConfigurationError(msg, setting="back_track_period")
        for name in ("back_track_period", "back_track_long_period"):
            period = getattr(self, name)
            if isinstance(period, timedelta):
                not_negative(name, period)
            elif period not in ("max", "off"):
                msg = f"{name} must be a duration, 'max' or 'off', got {shown(period)}"
                raise ConfigurationError(msg, setting=name)
        longest_durations(self)
        short, long = self.back_track_period, self.back_track_long_period
        if isinstance(long, timedelta) and (short == "max" or long < short):
            msg = (
                f"back_track_long_period ({shown(long)}) must not be shorter than "
                f"back_track_period ({shown(short)})"
            )
            raise ConfigurationError(msg, setting="back_track_long_period")
