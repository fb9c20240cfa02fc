"""The tag views' contract, run once per backend through `journal_url`: when the tag writer
writes tag_views and tag_write_progress: after flush(), at a full batch, at a new time bucket, at
once with flush_interval 0 (and again after a failure), periodically, and on close.
"""

from __future__ import annotations

from datetime import timedelta

from journal_support import BATCHED, IMMEDIATE, JournalFactory, still_clock, tag_names
from ordo import BucketSize, EventsByTagSettings, Journal, NewEvent
from ordo.clock import ManualClock
from ordo.storage.stores import Stores
from ordo.types import PersistenceId, Tag
from processing_support import wait_for
from tag_views_support import (
    MINUTE_BUCKETS,
    MINUTE_NS,
    MINUTE_START_NS,
    FailingTagViews,
    entries,
    progress_of,
)


def wait_for_progress(stores: Stores, persistence_id: str, tag: str, sequence_nr: int) -> None:
    """Wait until the tag's progress of the id reaches `sequence_nr` (at most 10 s).

    Where the store asks for background writes (PostgreSQL) a full batch is written by the
    flusher thread a moment after the append that filled it; progress is written last.
    """

    def reached() -> bool:
        progress = stores.tag_views.read_progress(PersistenceId(persistence_id)).get(Tag(tag))
        return progress is not None and progress.sequence_nr >= sequence_nr

    wait_for(reached, timeout=10, what=f"the progress of {persistence_id} in {tag}")


def test_a_partial_batch_waits_for_flush(journal_factory: JournalFactory, stores: Stores) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])

    assert entries(stores, "t") == []
    assert tag_names(stores) == []
    assert stores.tag_views.read_progress(PersistenceId("p")) == {}

    journal.flush()

    assert [(r.sequence_nr, r.tag_pid_sequence_nr) for r in entries(stores, "t")] == [
        (1, 1),
        (2, 2),
    ]
    assert progress_of(stores, "p", "t").tag_pid_sequence_nr == 2


def test_a_full_batch_is_written_without_flush(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["t"])])
    journal.append("q", [NewEvent.of(2, tags=["t"])])
    assert entries(stores, "t") == []

    journal.append("p", [NewEvent.of(3, tags=["t"])])

    wait_for_progress(stores, "p", "t", 2)
    rows = entries(stores, "t")
    assert [(r.persistence_id, r.sequence_nr) for r in rows] == [("p", 1), ("q", 1), ("p", 2)]
    assert progress_of(stores, "p", "t").sequence_nr == 2
    assert progress_of(stores, "q", "t").sequence_nr == 1


def test_batches_are_counted_per_tag(journal_factory: JournalFactory, stores: Stores) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["a"]), NewEvent.of(2, tags=["a", "b"])])
    journal.append("p", [NewEvent.of(3, tags=["b"])])

    assert [r.sequence_nr for r in entries(stores, "a")] == []
    assert [r.sequence_nr for r in entries(stores, "b")] == []

    journal.append("p", [NewEvent.of(4, tags=["a"])])

    wait_for_progress(stores, "p", "a", 4)
    assert [r.sequence_nr for r in entries(stores, "a")] == [1, 2, 4]
    assert [r.sequence_nr for r in entries(stores, "b")] == []


def test_with_flush_interval_0_every_append_is_visible_at_once(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal = journal_factory(settings=IMMEDIATE)
    for n in range(1, 4):
        journal.append("p", [NewEvent.of(n, tags=["t"])])

        assert [r.tag_pid_sequence_nr for r in entries(stores, "t")] == list(range(1, n + 1))
        assert progress_of(stores, "p", "t").tag_pid_sequence_nr == n


def test_with_flush_interval_0_a_failed_write_is_retried_without_another_append(
    stores: Stores,
) -> None:
    """With flush_interval 0 the appender writes at once and there is no periodic flush: a
    write that failed in an outage waited for the tag's next append (or close), so after a
    quiet spell its events stayed invisible to queries for as long as nothing else came."""
    tag_views = FailingTagViews(stores.tag_views, failures=1)
    journal = Journal(stores.journal, tag_views, settings=IMMEDIATE)  # type: ignore[arg-type]
    try:
        journal.append("p", [NewEvent.of(1, tags=["t"])])
        assert tag_views.failures == 0

        wait_for_progress(stores, "p", "t", 1)

        assert [r.sequence_nr for r in entries(stores, "t")] == [1]
        assert progress_of(stores, "p", "t").sequence_nr == 1
    finally:
        journal.close()


def test_an_event_in_a_new_time_bucket_writes_the_previous_buckets_batch(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    clock = ManualClock(MINUTE_START_NS)
    journal = journal_factory(settings=MINUTE_BUCKETS, clock=clock)
    journal.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])
    assert entries(stores, "t") == []

    clock.advance(MINUTE_NS)
    journal.append("p", [NewEvent.of(3, tags=["t"])])

    wait_for_progress(stores, "p", "t", 2)
    first_minute = BucketSize.MINUTE.key(MINUTE_START_NS // 10**6)
    rows = entries(stores, "t")
    assert [(r.sequence_nr, r.time_bucket) for r in rows] == [(1, first_minute), (2, first_minute)]
    assert progress_of(stores, "p", "t").sequence_nr == 2

    journal.flush()

    rows = entries(stores, "t")
    assert [(r.sequence_nr, r.time_bucket) for r in rows][2:] == [(3, first_minute + 60_000)]
    assert progress_of(stores, "p", "t").sequence_nr == 3


def test_the_flusher_writes_buffered_events_by_itself(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    settings = EventsByTagSettings(flush_interval=timedelta(milliseconds=20))
    journal = journal_factory(settings=settings)
    journal.append("p", [NewEvent.of(1, tags=["t"])])

    wait_for(lambda: entries(stores, "t"), timeout=10, what="the flusher to write the event")

    assert [r.sequence_nr for r in entries(stores, "t")] == [1]


def test_close_writes_what_is_buffered(journal_factory: JournalFactory, stores: Stores) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["t"])])
    assert entries(stores, "t") == []

    journal.close()

    assert [r.sequence_nr for r in entries(stores, "t")] == [1]
    assert progress_of(stores, "p", "t").sequence_nr == 1
