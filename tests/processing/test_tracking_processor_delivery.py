"""What a tracking processor applies: each event once and in order, while segments split and
merge and across restarts, from a tag or from the whole journal, under the sequencing policy."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from ordo import Journal, NewEvent, QuerySettings
from ordo.errors import (
    AlreadyRunningError,
    BucketSizeMismatchError,
    ConfigurationError,
    InvalidIdentifierError,
    UnknownProcessorError,
    UnknownSegmentError,
)
from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.processing.segment import Segment
from ordo.processing.sequencing import FullySequentialPolicy
from ordo.processing.source import ALL_EVENTS, EventSource
from ordo.query import EventEnvelope
from ordo.storage.stores import Stores
from ordo.time import BucketSize
from ordo.types import Tag
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


async def _awaited_handler(event: EventEnvelope, context: HandlerContext) -> None:
    """Its calls made coroutines nothing awaited: every event was recorded as processed."""


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"policy": "per_aggregate"}, r"^policy must be a SequencingPolicy"),
        ({"policy": 0}, r"^policy must be a SequencingPolicy"),
        ({"handler": None}, r"^handler must be callable, got None"),
        ({"handler": _awaited_handler}, r"^handler <function _awaited_handler .* coroutine fu"),
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


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        ("source", r"^source must be an EventSource, got NoneType: None$"),
        ("tokens", r"^tokens must be a TokenStore, got None"),
    ],
)
def test_a_processor_refuses_a_source_or_token_store_of_the_wrong_kind(
    stores: Stores, part: str, problem: str
) -> None:
    """The token store failed start() with AttributeError; the source failed every worker
    thread, which ended unreported: the processor ran nothing and its `failure` stayed None."""
    parts: dict[str, object] = {"source": source(stores), "tokens": stores.tokens, part: None}
    with pytest.raises(ConfigurationError, match=problem):
        TrackingProcessor("counts", parts["source"], parts["tokens"], counting_handler)  # type: ignore[arg-type]


def test_a_processor_refuses_a_source_of_another_bucket_size_than_its_journals(
    stores: Stores,
) -> None:
    """Its query walked the journal's minute buckets as hours: a live processor's scan sat in
    the minute it reached until the hour ended, so later events waited up to an hour.
    events_by_tag_at, the Spark source and a journal refuse such settings; the processor did not.
    """
    recorded = stores.journal.record_bucket_size(BucketSize.HOUR.value)
    other = BucketSize.MINUTE if recorded == BucketSize.HOUR.value else BucketSize.HOUR
    mismatched = EventSource(
        reader=stores.tag_view_reader,
        tag=Tag("t"),
        query=QuerySettings(),
        events_by_tag=replace(WRITE, bucket_size=other),
    )
    processor = TrackingProcessor("counts", mismatched, stores.tokens, counting_handler)
    with pytest.raises(BucketSizeMismatchError, match=recorded):
        processor.start()
    with pytest.raises(UnknownProcessorError):
        stores.tokens.entries("counts")  # nothing was initialized


@pytest.mark.parametrize("name", [None, "", "a\x00b"])
def test_a_processor_refuses_a_name_the_token_store_would_refuse(
    stores: Stores, name: object
) -> None:
    """It was refused only by start(), once the processor had been built and handed around."""
    with pytest.raises(InvalidIdentifierError, match=r"^processor name"):
        TrackingProcessor(name, source(stores), stores.tokens, counting_handler)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("tag", None, InvalidIdentifierError),
        ("tag", "", InvalidIdentifierError),
        ("query", None, ConfigurationError),
        ("events_by_tag", QuerySettings(), ConfigurationError),
        ("reader", None, ConfigurationError),
        ("can_select_segments", "no", ConfigurationError),  # selected segments in storage
    ],
)
def test_an_event_source_refuses_parts_of_the_wrong_kind(
    stores: Stores, field: str, value: object, error: type[Exception]
) -> None:
    """A processor's worker threads failed on them (AttributeError), unreported, or read no
    tag ("" or None) for ever."""
    with pytest.raises(error, match=f"^{field}"):
        replace(source(stores), **{field: value})  # type: ignore[arg-type]


def test_a_processor_started_twice_is_refused_and_stop_stops_every_thread(
    stores: Stores,
) -> None:
    """The second start() started another set of threads, and stop() stopped only those."""
    processor = counts_processor(stores)
    with processor, pytest.raises(AlreadyRunningError, match=r"^processor 'counts' is running"):
        processor.start()
    assert not [t for t in threading.enumerate() if t.name.startswith("ordo-counts-")]


def test_a_stopped_processor_starts_again(stores: Stores, journal: Journal, sql: SqlRunner) -> None:
    """Its new threads ended at once: `with processor:` a second time applied nothing."""
    processor = counts_processor(stores)
    append_events(journal, 100)
    with processor:
        wait_for(lambda: counted(sql) == 100)
    append_events(journal, 50)
    with processor:
        assert processor.is_running
        wait_for(lambda: counted(sql) == 150)
    assert processor.failure is None


def test_a_handler_that_stops_its_processor_has_its_batch_applied(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """stop() from the handler joined the handler's own thread: RuntimeError ("cannot join
    current thread") in the handler, its batch rolled back, and the processor stopped having
    applied nothing (and so again at every start: the handler stops it on the same event).
    """
    append_events(journal, 10, pids=1)
    errors: list[Exception] = []

    def handle(event: EventEnvelope, context: HandlerContext) -> None:
        counting_handler(event, context)
        if event.tag_pid_sequence_nr == 10:
            try:
                processor.stop()
            except Exception as exc:
                errors.append(exc)
                raise

    settings = replace(FAST, thread_count=2, initial_segment_count=2)
    processor = TrackingProcessor(
        "counts", source(stores), stores.tokens, handle, settings=settings
    )
    processor.start()
    wait_for(lambda: not processor.is_running)
    processor.stop(timeout=30)
    assert not [t for t in threading.enumerate() if t.name.startswith("ordo-counts-")]
    assert (errors, processor.failure) == ([], None)
    assert sql("SELECT n, last FROM counts WHERE pid = ?", "p0") == [(10, 10)]


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


@pytest.mark.parametrize("action", ["split", "merge", "release"])
def test_a_request_for_a_segment_the_processor_lacks_is_unknown_segment_error(
    stores: Stores, action: str
) -> None:
    """merge() raised InvalidSegmentOperationError, split() and release() (and the command line)
    UnknownSegmentError: a caller catching the one missed the other."""
    processor = counts_processor(stores)
    with processor:
        wait_for(lambda: all(entry.owner is not None for entry in processor.status()))
        with pytest.raises(UnknownSegmentError, match=r"^processor 'counts' has no segment 9$"):
            getattr(processor, action)(9)
        assert stores.tokens.pending_requests("counts") == []


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
