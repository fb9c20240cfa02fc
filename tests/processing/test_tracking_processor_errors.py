"""A tracking processor's handler failures: retried, skipped, dead-lettered, or stopping it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from ordo import Journal
from ordo.clock import SkewedClock, SystemClock
from ordo.errors import EventHandlingError, FutureOffsetError, StorageError
from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.processing.sequencing import CallableSequencingPolicy, SequencedEvent
from ordo.processing.token import TrackingToken
from ordo.query import EventEnvelope
from ordo.settings import ErrorMode
from ordo.storage.stores import Stores
from processing_support import (
    FAST,
    SqlRunner,
    append_events,
    counted,
    counting_handler,
    counts_processor,
    source,
    wait_for,
)


def _flaky(fails: dict[str, int]) -> Callable[[EventEnvelope, HandlerContext], None]:
    """A counting handler that raises on the events named, `fails[...]` times each."""
    lock = threading.Lock()

    def handle(event: EventEnvelope, context: HandlerContext) -> None:
        key = f"{event.persistence_id}#{event.tag_pid_sequence_nr}"
        with lock:
            remaining = fails.get(key, 0)
            if remaining:
                fails[key] = remaining - 1
        if remaining:
            counting_handler(event, context)  # a write that the failure must undo
            msg = f"boom at {key}"
            raise RuntimeError(msg)
        counting_handler(event, context)

    return handle


def test_a_transient_failure_is_retried_and_applied_once(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    append_events(journal, 100)
    handler = _flaky({"p3#2": 2})
    with TrackingProcessor("counts", source(stores), stores.tokens, handler, settings=FAST) as p:
        wait_for(lambda: counted(sql) == 100)
    assert p.failure is None
    assert sql("SELECT n, last FROM counts WHERE pid = ?", "p3") == [(5, 5)]


@pytest.mark.parametrize("mode", [ErrorMode.SKIP, ErrorMode.DEAD_LETTER])
def test_a_poison_event_is_skipped_or_dead_lettered(
    stores: Stores, journal: Journal, sql: SqlRunner, mode: ErrorMode
) -> None:
    append_events(journal, 100)
    settings = replace(FAST, error_mode=mode, max_retries=1)
    handler = _flaky({"p3#5": 99})  # p3's last event
    with TrackingProcessor("counts", source(stores), stores.tokens, handler, settings=settings):
        wait_for(lambda: counted(sql) == 99)
        wait_for(
            lambda: len(stores.tokens.dead_letters("counts")) == (mode is ErrorMode.DEAD_LETTER)
        )
    letters = stores.tokens.dead_letters("counts")
    if mode is ErrorMode.DEAD_LETTER:
        assert [(d.persistence_id, d.position) for d in letters] == [("p3", 5)]
        assert "boom at p3#5" in letters[0].error
    assert sql("SELECT n FROM counts WHERE pid = ?", "p3") == [(4,)]


def test_a_failure_in_fail_mode_stops_the_processor_and_applies_nothing_of_its_batch(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    append_events(journal, 100)
    journal.flush()
    time.sleep(0.3)  # settled: the first poll reads all 100 events, one batch
    settings = replace(
        FAST, thread_count=1, initial_segment_count=1, batch_size=1000, max_retries=0
    )
    processor = TrackingProcessor(
        "counts", source(stores), stores.tokens, _flaky({"p3#5": 99}), settings=settings
    )
    processor.start()
    wait_for(lambda: processor.failure is not None)
    processor.stop()
    failure = processor.failure
    assert isinstance(failure, EventHandlingError)
    assert (failure.persistence_id, failure.sequence_nr) == ("p3", 5)
    assert counted(sql) == 0  # the whole batch was rolled back
    (entry,) = stores.tokens.entries("counts")
    assert (entry.token, entry.owner) == (TrackingToken(), None)


@pytest.mark.parametrize("exit_error", [SystemExit, KeyboardInterrupt, GeneratorExit])
def test_a_handler_raising_an_exit_stops_the_processor_with_the_event_named(
    stores: Stores, journal: Journal, sql: SqlRunner, exit_error: type[BaseException]
) -> None:
    """A BaseException that is no Exception ended the thread that handled the event, with no
    failure kept (threading drops SystemExit without a word) while the other threads went on
    with their segments: the processor stopped processing the event's segment for ever.
    """
    append_events(journal, 100)

    def handle(event: EventEnvelope, context: HandlerContext) -> None:
        if (event.persistence_id, event.tag_pid_sequence_nr) == ("p3", 5):
            raise exit_error
        counting_handler(event, context)

    processor = TrackingProcessor("counts", source(stores), stores.tokens, handle, settings=FAST)
    processor.start()
    try:
        wait_for(lambda: processor.failure is not None)
    finally:
        processor.stop(timeout=30)
    failure = processor.failure
    assert isinstance(failure, EventHandlingError)
    assert (failure.persistence_id, failure.sequence_nr) == ("p3", 5)
    assert type(failure.cause) is exit_error
    assert not [t for t in threading.enumerate() if t.name.startswith("ordo-counts-")]
    ((last_applied,),) = sql("SELECT coalesce(max(last), 0) FROM counts WHERE pid = ?", "p3")
    assert int(str(last_applied)) < 5


def _failing_every_event(stores: Stores, **changes: Any) -> tuple[TrackingProcessor, list[str]]:
    """A one-thread processor (FAST with `changes`) whose handler fails every event, and the
    attempts it made ("pid#n" each), in the order made."""
    calls: list[str] = []

    def handle(event: EventEnvelope, context: HandlerContext) -> None:
        calls.append(f"{event.persistence_id}#{event.tag_pid_sequence_nr}")
        msg = "always"
        raise RuntimeError(msg)

    settings = replace(FAST, thread_count=1, initial_segment_count=1, **changes)
    processor = TrackingProcessor(
        "counts", source(stores), stores.tokens, handle, settings=settings
    )
    return processor, calls


def test_retry_waits_stop_doubling_at_half_the_claim_timeout(
    stores: Stores, journal: Journal
) -> None:
    """A one-day backoff: uncapped, the first retry would wait a day (and the 17th overflow)."""
    append_events(journal, 1, pids=1)
    processor, calls = _failing_every_event(
        stores,
        claim_timeout=timedelta(milliseconds=400),
        token_claim_interval=timedelta(milliseconds=100),
        error_mode=ErrorMode.DEAD_LETTER,
        max_retries=5,
        retry_backoff=timedelta(days=1),
    )
    processor.start()
    try:
        wait_for(lambda: len(stores.tokens.dead_letters("counts")) == 1)
    finally:
        processor.stop(timeout=5)
    assert processor.failure is None
    assert calls == ["p0#1"] * (1 + 1 + 5)  # the batch's try, then the first attempt and retries


def test_stopping_ends_a_retry_wait_and_leaves_the_event_for_the_next_claim(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    append_events(journal, 1, pids=1)
    processor, calls = _failing_every_event(
        stores,
        claim_timeout=timedelta(hours=1),
        error_mode=ErrorMode.DEAD_LETTER,
        retry_backoff=timedelta(hours=1),
    )
    processor.start()
    try:
        wait_for(lambda: len(calls) == 2)  # the batch's try and the first attempt: now waiting
    finally:
        processor.stop(timeout=10)
    (entry,) = stores.tokens.entries("counts")
    assert (entry.token, entry.owner) == (TrackingToken(), None)  # rolled back, released
    assert stores.tokens.dead_letters("counts") == []  # retries not used up: no error mode
    assert processor.failure is None
    with counts_processor(stores, settings=processor.settings):
        wait_for(lambda: counted(sql) == 1)


def test_a_storage_error_no_retry_mends_stops_the_processor(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """Its token table renamed away: a plain StorageError ("no such table"), which the threads
    retried for ever, a WARNING per claim interval, while they handled nothing."""
    append_events(journal, 10)
    with TrackingProcessor(
        "counts", source(stores), stores.tokens, counting_handler, settings=FAST
    ) as p:
        wait_for(lambda: counted(sql) == 10)
        sql("ALTER TABLE tokens RENAME TO tokens_away")
        wait_for(lambda: not p.is_running)
    assert type(p.failure) is StorageError  # no subclass, such as an outage
    assert "tokens" in str(p.failure)


def test_a_sequencing_policy_that_fails_on_an_event_stops_the_processor(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """An application's policy that raises on an event (a payload without its property, say):
    the processor's threads died of it one after another, each once it read the event, and the
    processor stopped processing with no failure. The event belongs to no segment, whatever the
    error mode: the processor stops and keeps the failure, naming the event."""
    append_events(journal, 20)

    def by_aggregate_but_p3_s_first(event: SequencedEvent) -> str | None:
        if (event.persistence_id, event.sequence_nr) == ("p3", 1):
            key = "customer"  # a payload without the property the policy reads
            raise KeyError(key)
        return event.persistence_id

    processor = TrackingProcessor(
        "counts",
        source(stores),
        stores.tokens,
        counting_handler,
        settings=replace(FAST, thread_count=2, initial_segment_count=2, error_mode=ErrorMode.SKIP),
        policy=CallableSequencingPolicy(by_aggregate_but_p3_s_first),
    )
    processor.start()
    wait_for(lambda: processor.failure is not None or not processor.is_running)
    processor.stop()
    failure = processor.failure
    assert isinstance(failure, EventHandlingError), failure
    assert (failure.persistence_id, failure.sequence_nr) == ("p3", 1)
    assert isinstance(failure.cause, KeyError)
    assert [e.owner for e in stores.tokens.entries("counts")] == [None, None]
    assert stores.tokens.dead_letters("counts") == []


def test_a_token_ahead_of_the_processor_s_clock_stops_it_with_the_failure(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """A token stored by a process whose clock is an hour ahead: the stream refuses to start at
    an offset in its future (FutureOffsetError), which ended every worker thread silently, and
    the processor stopped processing with no failure."""
    append_events(journal, 10)
    with counts_processor(stores):
        wait_for(lambda: counted(sql) == 10)
    behind = SkewedClock(SystemClock(), skew_ns=-3_600 * 10**9)
    with counts_processor(stores, clock=behind) as processor:
        wait_for(lambda: not processor.is_running)
    assert isinstance(processor.failure, FutureOffsetError), processor.failure
    assert {e.owner for e in stores.tokens.entries("counts")} == {None}  # released
