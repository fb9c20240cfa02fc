"""What a tracking processor applies: each event once and in order, while segments split and
merge and across restarts, from a tag or from the whole journal, under the sequencing policy."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from ordo import Journal, NewEvent
from ordo.errors import ConfigurationError, UnknownProcessorError
from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.processing.segment import Segment
from ordo.processing.sequencing import FullySequentialPolicy
from ordo.processing.source import ALL_EVENTS, EventSource
from ordo.query import EventEnvelope
from ordo.storage.open import Stores
from processing_support import (
    FAST,
    READ,
    WRITE,
    SqlRunner,
    append_events,
    counted,
    counting_handler,
    counts_processor,
    source,
    wait_for,
)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"policy": "per_aggregate"}, r"^policy must be a SequencingPolicy"),
        ({"policy": 0}, r"^policy must be a SequencingPolicy"),
        ({"handler": None}, r"^handler must be callable, got None"),
    ],
)
def test_a_processor_refuses_a_policy_or_handler_of_the_wrong_kind(
    stores: Stores, arguments: dict[str, object], problem: str
) -> None:
    """Both failed per event in the worker threads: under ErrorMode.SKIP, silently."""
    values: dict[str, object] = {"handler": counting_handler} | arguments
    with pytest.raises(ConfigurationError, match=problem):
        TrackingProcessor("counts", source(stores), stores.tokens, **values)  # type: ignore[arg-type]
    with pytest.raises(UnknownProcessorError):
        stores.tokens.entries("counts")  # nothing was initialized


def test_every_event_is_applied_once_in_order_while_segments_split_and_merge(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    processor = counts_processor(stores)
    with processor:
        append_events(journal, 300)
        processor.split(0)
        wait_for(lambda: len(processor.status()) == 5)
        append_events(journal, 300)
        processor.merge(0)
        wait_for(lambda: len(processor.status()) == 4)
        append_events(journal, 300)
        wait_for(lambda: counted(sql) == 900)
    assert processor.failure is None
    assert sorted(sql("SELECT pid, n, last FROM counts")) == sorted(
        (f"p{p}", 45, 45) for p in range(20)
    )


def test_a_restarted_processor_continues_from_its_tokens(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    append_events(journal, 200)
    with counts_processor(stores):
        wait_for(lambda: counted(sql) == 200)
    append_events(journal, 100)
    with counts_processor(stores):
        wait_for(lambda: counted(sql) == 300)
    assert {row[1] for row in sql("SELECT pid, n FROM counts")} == {15}
    assert all(e.owner is None for e in stores.tokens.entries("counts"))


def test_a_processor_can_read_every_event_of_the_journal(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    for i in range(90):
        journal.append(f"p{i % 9}", [NewEvent.of(i, tags=["a"] if i % 2 else [])])
    everything = EventSource(
        reader=stores.all_events(WRITE.bucket_size),
        tag=ALL_EVENTS,
        query=READ,
        events_by_tag=WRITE,
        can_select_segments=False,
    )
    settings = replace(FAST, initial_segment_count=2, thread_count=2)
    with TrackingProcessor("all", everything, stores.tokens, counting_handler, settings=settings):
        wait_for(lambda: counted(sql) == 90)
    assert {row[1] for row in sql("SELECT pid, last FROM counts")} == {10}


@pytest.mark.parametrize("segments", [1, 4])
def test_a_fully_sequential_processor_uses_one_segment(
    stores: Stores, journal: Journal, sql: SqlRunner, segments: int
) -> None:
    """With more segments than one, all but one are idle: every event has the same hash.

    With 4 segments the storage used to select rows by the persistence id's hash, so four
    segments handled events at once and out of order.
    """
    append_events(journal, 50)
    handled: list[tuple[Segment, bytes]] = []

    def handler(event: EventEnvelope, context: HandlerContext) -> None:
        counting_handler(event, context)
        handled.append((context.segment, event.offset_key))

    settings = replace(FAST, initial_segment_count=segments, thread_count=segments)
    with TrackingProcessor(
        "seq",
        source(stores),
        stores.tokens,
        handler,
        settings=settings,
        policy=FullySequentialPolicy(),
    ) as p:
        wait_for(lambda: counted(sql) == 50)
    assert len({segment for segment, _ in handled}) == 1
    offsets = [offset for _, offset in handled]
    assert offsets == sorted(offsets)
    assert len(p.status()) == segments
    assert READ.eventual_consistency_delay == timedelta(milliseconds=100)
