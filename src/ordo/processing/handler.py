"""What a tracking processor's event handlers are given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ordo.processing.connection import SqlConnection
from ordo.processing.segment import Segment
from ordo.query import EventEnvelope


@dataclass(frozen=True, slots=True, kw_only=True)
class HandlerContext:
    """What a handler knows besides the event."""

    processor: str
    segment: Segment
    is_replay: bool
    """The event was processed before the processor was reset (Axon's ReplayToken)."""
    connection: SqlConnection
    """The batch transaction's database connection: writes through it commit with the token."""
    placeholder: str
    """The connection's SQL parameter placeholder (`?` on SQLite, `%s` on PostgreSQL)."""


EventHandler = Callable[[EventEnvelope, HandlerContext], object]
