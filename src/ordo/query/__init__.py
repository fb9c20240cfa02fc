"""Events-by-tag queries: bucket walking, eventual-consistency delay, gaps and back-tracking."""

from __future__ import annotations

from ordo.query.envelope import EventEnvelope, KeyRun
from ordo.query.events_by_tag import EventsByTag, TagStream
from ordo.query.offset import NO_OFFSET, NoOffset, Offset, looking_back, to_offset
from ordo.query.ports import RowKey, RunPage, RunReader, TagViewPage, TagViewReader
from ordo.query.step import Step
from ordo.query.tag_query import TagQuery

__all__ = [
    "NO_OFFSET",
    "EventEnvelope",
    "EventsByTag",
    "KeyRun",
    "NoOffset",
    "Offset",
    "RowKey",
    "RunPage",
    "RunReader",
    "Step",
    "TagQuery",
    "TagStream",
    "TagViewPage",
    "TagViewReader",
    "looking_back",
    "to_offset",
]
