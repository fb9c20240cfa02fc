"""Settings: one frozen dataclass per concern, validated on creation, loadable from TOML and env."""

from __future__ import annotations

from ordo.settings.cdc import CaptureSettings
from ordo.settings.events_by_tag import EventsByTagSettings
from ordo.settings.loading import ENV_PREFIX, BackTrackPeriod, LoadableSettings
from ordo.settings.operations import (
    WRITER_HEARTBEAT_INTERVAL,
    WRITER_LEASE_DEADLINE,
    OperationsSettings,
)
from ordo.settings.processor import ErrorMode, ProcessorSettings
from ordo.settings.query import QuerySettings

__all__ = [
    "ENV_PREFIX",
    "WRITER_HEARTBEAT_INTERVAL",
    "WRITER_LEASE_DEADLINE",
    "BackTrackPeriod",
    "CaptureSettings",
    "ErrorMode",
    "EventsByTagSettings",
    "LoadableSettings",
    "OperationsSettings",
    "ProcessorSettings",
    "QuerySettings",
]
