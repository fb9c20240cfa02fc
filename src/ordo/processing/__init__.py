"""Segmented event processing (Axon): segments, sequencing policies, tokens and processors.

Its names are imported on first use: the stores import a few of its modules (the connection,
the ports, segments and tokens), and with them every command that opened a journal loaded the
processor, its workers and the sequencing policies (about 20 ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ordo.lazy_names import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ordo.processing.connection import SqlConnection, SqlCursor
    from ordo.processing.control import (
        ControlReceipt,
        merge_segment,
        release_segment,
        reset_processor,
        split_segment,
    )
    from ordo.processing.handler import EventHandler, HandlerContext
    from ordo.processing.ports import TokenEntry, TokenStore
    from ordo.processing.processor import TrackingProcessor
    from ordo.processing.segment import Segment, compute_segments, initial_segments
    from ordo.processing.sequencing import (
        CallableSequencingPolicy,
        FullyConcurrentPolicy,
        FullySequentialPolicy,
        PropertySequencingPolicy,
        SequencedEvent,
        SequencingPolicy,
        SequentialPerAggregatePolicy,
        policy_from_name,
        sequence_hash,
    )
    from ordo.processing.source import ALL_EVENTS, EventSource
    from ordo.processing.token import TrackingToken

_MODULES = {
    **dict.fromkeys(("SqlConnection", "SqlCursor"), "ordo.processing.connection"),
    **dict.fromkeys(
        ("ControlReceipt", "merge_segment", "release_segment", "reset_processor", "split_segment"),
        "ordo.processing.control",
    ),
    **dict.fromkeys(("EventHandler", "HandlerContext"), "ordo.processing.handler"),
    **dict.fromkeys(("TokenEntry", "TokenStore"), "ordo.processing.ports"),
    "TrackingProcessor": "ordo.processing.processor",
    **dict.fromkeys(("Segment", "compute_segments", "initial_segments"), "ordo.processing.segment"),
    **dict.fromkeys(
        (
            "CallableSequencingPolicy",
            "FullyConcurrentPolicy",
            "FullySequentialPolicy",
            "PropertySequencingPolicy",
            "SequencedEvent",
            "SequencingPolicy",
            "SequentialPerAggregatePolicy",
            "policy_from_name",
            "sequence_hash",
        ),
        "ordo.processing.sequencing",
    ),
    **dict.fromkeys(("ALL_EVENTS", "EventSource"), "ordo.processing.source"),
    "TrackingToken": "ordo.processing.token",
}
"""Where each public name lives."""

__all__ = [
    "ALL_EVENTS",
    "CallableSequencingPolicy",
    "ControlReceipt",
    "EventHandler",
    "EventSource",
    "FullyConcurrentPolicy",
    "FullySequentialPolicy",
    "HandlerContext",
    "PropertySequencingPolicy",
    "Segment",
    "SequencedEvent",
    "SequencingPolicy",
    "SequentialPerAggregatePolicy",
    "SqlConnection",
    "SqlCursor",
    "TokenEntry",
    "TokenStore",
    "TrackingProcessor",
    "TrackingToken",
    "compute_segments",
    "initial_segments",
    "merge_segment",
    "policy_from_name",
    "release_segment",
    "reset_processor",
    "sequence_hash",
    "split_segment",
]


__getattr__ = _lazy_names(__name__, _MODULES)
