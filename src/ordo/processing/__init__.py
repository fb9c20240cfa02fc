"""Segmented event processing: segments, their split and merge, and sequencing policies."""

from __future__ import annotations

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

__all__ = [
    "CallableSequencingPolicy",
    "FullyConcurrentPolicy",
    "FullySequentialPolicy",
    "PropertySequencingPolicy",
    "Segment",
    "SequencedEvent",
    "SequencingPolicy",
    "SequentialPerAggregatePolicy",
    "compute_segments",
    "initial_segments",
    "policy_from_name",
    "sequence_hash",
]
