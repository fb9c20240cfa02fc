"""Events-by-tag queries: bucket walking, eventual-consistency delay, gaps and back-tracking.

Its names are imported on first use: the stores import the envelope and the ports, and every
command that opens a journal opened its tag view store and with it this package; loading the
query itself there cost every `ordo append` about 10 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ordo.lazy_names import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ordo.query.envelope import EventEnvelope, KeyRun
    from ordo.query.events_by_tag import EventsByTag, TagStream
    from ordo.query.offset import NO_OFFSET, NoOffset, Offset, looking_back, to_offset
    from ordo.query.ports import RowKey, RunPage, RunReader, TagViewPage, TagViewReader
    from ordo.query.step import Step
    from ordo.query.tag_query import TagQuery

_MODULES = {
    **dict.fromkeys(("EventEnvelope", "KeyRun"), "ordo.query.envelope"),
    **dict.fromkeys(("EventsByTag", "TagStream"), "ordo.query.events_by_tag"),
    **dict.fromkeys(
        ("NO_OFFSET", "NoOffset", "Offset", "looking_back", "to_offset"), "ordo.query.offset"
    ),
    **dict.fromkeys(
        ("RowKey", "RunPage", "RunReader", "TagViewPage", "TagViewReader"), "ordo.query.ports"
    ),
    "Step": "ordo.query.step",
    "TagQuery": "ordo.query.tag_query",
}
"""Where each public name lives."""

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


__getattr__ = _lazy_names(__name__, _MODULES)
