"""Stores, journals, live queries and processors used again after the server ended their
sessions (see connection_loss_support)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from connection_loss_support import Sessions
from ordo import NO_OFFSET, NewEvent, events_by_tag_at, open_journal, open_stores
from ordo.processing import HandlerContext, TrackingProcessor
from ordo.query import EventEnvelope
from ordo.storage.open import stores_at
from ordo.storage.stores import Stores
from ordo.tools.verification import check_tag_views_of
from processing_support import FAST, READ, WRITE, counting_handler, source, wait_for

pytestmark = pytest.mark.postgres


@pytest.fixture
def stores(sessions: Sessions) -> Iterator[Stores]:
    """The stores at the test's URL, whose sessions the test ends (not tests/conftest.py's)."""
    opened = open_stores(sessions.url)
    yield opened
    opened.close()


def _fill_pool(stores: Stores) -> None:
    """Have the pool hold all its connections at once (8 open transactions); idle after."""
    barrier = threading.Barrier(8)

    def hold() -> None:
        with stores.tokens.batch("processor", 0, "owner"):
            barrier.wait()

    threads = [threading.Thread(target=hold) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


CALLS: dict[str, Callable[[Stores], object]] = {
    "journal": lambda s: s.journal.highest_sequence_nr("p"),  # type: ignore[arg-type]
    "tokens": lambda s: s.tokens.processors(),
    "change sink": lambda s: s.change_sink.progress(),
    "schemas": lambda s: s.schemas.tables(),
    "operations": lambda s: s.operations.count_time_buckets(),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_each_store_call_after_the_sessions_ended_succeeds(
    sessions: Sessions, stores: Stores, call: Callable[[Stores], object]
) -> None:
    _fill_pool(stores)
    assert sessions.terminate() == 8
    for _ in range(3):  # each idle connection of the pool is dead: none is lent
        call(stores)


def test_appends_after_the_sessions_ended_lose_and_repeat_nothing(sessions: Sessions) -> None:
    with open_journal(sessions.url, settings=WRITE) as journal:
        for i in range(3):
            journal.append("a", [NewEvent.of({"i": i}, tags=["t"])])
        journal.flush()
        assert sessions.terminate() >= 1
        for i in range(3, 6):
            journal.append("a", [NewEvent.of({"i": i}, tags=["t", "u"])])
        journal.flush()
        numbers = [e.sequence_nr for e in journal.replay("a")]
        payloads = [e.payload for e in journal.replay("a")]
    assert numbers == [1, 2, 3, 4, 5, 6]
    assert payloads == [{"i": i} for i in range(6)]
    with stores_at(sessions.url) as stores:
        report = check_tag_views_of(stores, WRITE.bucket_size)
    assert report.is_clean, report
    assert (report.tagged_events, report.tag_view_rows) == (9, 9)


def test_a_journal_closed_after_the_sessions_ended_releases_its_writer_lease(
    sessions: Sessions,
) -> None:
    journal = open_journal(sessions.url)
    journal.append("a", [NewEvent.of({"i": 0})])
    assert sessions.terminate() >= 1
    journal.close()
    with stores_at(sessions.url) as stores:
        assert not stores.operations.live_writers(since_ms=0)


def test_a_live_query_reads_on_after_the_sessions_ended(sessions: Sessions) -> None:
    with open_journal(sessions.url, settings=WRITE) as journal:
        journal.append("a", [NewEvent.of({"i": 0}, tags=["t"])])
        journal.flush()
        with (
            events_by_tag_at(sessions.url, settings=READ, events_by_tag=WRITE) as queries,
            queries.live("t", NO_OFFSET) as stream,
        ):
            assert next(stream).sequence_nr == 1
            journal.append("a", [NewEvent.of({"i": 1}, tags=["t"])])
            journal.flush()
            assert sessions.terminate() >= 1
            assert next(stream).sequence_nr == 2


def test_a_session_ended_during_a_careful_rerun_does_not_stop_the_processor(
    sessions: Sessions, stores: Stores
) -> None:
    """A lost connection is the batch's failure, not the handler's, in a careful rerun too.

    The rerun that follows a handler failure handles each event in a savepoint, with retries
    and then error_mode. When the session ended there, the savepoint's own statements failed
    and were taken for the handler's: the retries failed alike, and error_mode FAIL stopped
    the processor with EventHandlingError instead of claiming the segment again.
    """
    with stores.tokens.batch("setup", 0, "owner") as batch:
        batch.connection.execute(
            "CREATE TABLE counts (pid TEXT PRIMARY KEY, n INT, last INT, replays INT)"
        )
    calls: dict[str, int] = {}

    def handler(event: EventEnvelope, context: HandlerContext) -> None:
        calls[event.persistence_id] = calls.get(event.persistence_id, 0) + 1
        if event.persistence_id == "p3":
            if calls["p3"] == 1:
                msg = "first call fails: the batch is rerun carefully"
                raise ValueError(msg)
            if calls["p3"] == 2:
                sessions.terminate()  # the careful rerun's session ends under it
        counting_handler(event, context)

    with open_journal(sessions.url, settings=WRITE) as journal:
        for i in range(6):
            journal.append(f"p{i}", [NewEvent.of(i, tags=["t"])])
    settings = replace(FAST, thread_count=1, initial_segment_count=1)
    with TrackingProcessor(
        "counts", source(stores), stores.tokens, handler, settings=settings
    ) as processor:
        wait_for(lambda: len(_counts(stores)) == 6 or not processor.is_running)
        assert processor.failure is None
    assert _counts(stores) == {f"p{i}": 1 for i in range(6)}


def _counts(stores: Stores) -> dict[str, int]:
    with stores.tokens.batch("reader", 0, "owner") as batch:
        rows = batch.connection.execute("SELECT pid, n FROM counts").fetchall()
    return {str(pid): int(n) for pid, n in rows}
