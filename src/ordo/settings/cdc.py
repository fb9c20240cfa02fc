"""Change data capture settings: window size, latency bound, and riding out a lost connection."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import ClassVar

from ordo.settings.durations import longest_durations, not_negative, positive
from ordo.settings.loading import LoadableSettings, integer_in


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CaptureSettings(LoadableSettings):
    """How a capture reads its source and publishes to the change log.

    Every duration is at most LONGEST_DURATION.
    """

    TOML_TABLE = "cdc"
    ENV_VARIABLES: ClassVar[Mapping[str, str]] = {"flush_interval_ms": "ORDO_CDC_FLUSH_INTERVAL_MS"}
    """ORDO_FLUSH_INTERVAL_MS is the tag writer's (EventsByTagSettings): read here too, tuning
    one changed the other. The capture's is named as its TOML key is, `[cdc] flush_interval_ms`."""

    max_changes: int = 1000
    """Changes per window: a full window is published at once."""
    flush_interval: timedelta = timedelta(seconds=1)
    """A partially filled window is published at least this often (seed 003's latency bound);
    ORDO_CDC_FLUSH_INTERVAL_MS in the environment."""
    poll_interval: timedelta = timedelta(milliseconds=100)
    """How often the source is asked for new changes while the window fills."""
    reconnect_timeout: timedelta = timedelta(minutes=1)
    """How long a capture keeps trying after its source or journal became unavailable (a lost
    session: restart, failover, pg_terminate_backend) before it fails with the error; 0 fails
    at once. Each window is peeked again from the source's confirmed position, and the
    publisher skips what it already published, so retrying loses and repeats nothing."""

    def __post_init__(self) -> None:
        integer_in("max_changes", self.max_changes, 1)
        positive("flush_interval", self.flush_interval)
        positive("poll_interval", self.poll_interval)
        not_negative("reconnect_timeout", self.reconnect_timeout)
        longest_durations(self)
