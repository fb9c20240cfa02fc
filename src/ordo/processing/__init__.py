"""Segmented event processing (Axon): segments, sequencing policies, tokens and processors."""

from __future__ import annotations

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
