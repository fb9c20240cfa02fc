"""The tag views' contract, run once per backend through `journal_url`: recovery writes the
rows a writer left unwritten, and a failed tag_views write is retried.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import timedelta

from journal_support import BATCHED, IMMEDIATE, JournalFactory, events_of, still_clock
from ordo import BucketSize, Journal, NewEvent
from ordo.clock import ManualClock, SkewedClock, SystemClock
from ordo.errors import StorageError
from ordo.storage.stores import Stores
from ordo.tagging import TagProgress, TagViewStore
from ordo.types import PersistenceId, Tag
from tag_views_support import (
    MINUTE_BUCKETS,
    MINUTE_NS,
    MINUTE_START_NS,
    FailingTagViews,
    all_events,
    entries,
    expected_entries,
    progress_of,
)

HOUR_NS = 3_600 * 10**9

# --- recovery -----------------------------------------------------------------------------------


def test_recover_of_an_id_with_buffered_events_writes_each_row_once(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t", "u"])])

    assert journal.recover("p") == 2
    journal.flush()

    events = all_events(journal)
    assert entries(stores, "t") == expected_entries(events, "t", BucketSize.HOUR)
    assert entries(stores, "u") == expected_entries(events, "u", BucketSize.HOUR)
    assert progress_of(stores, "p", "t").tag_pid_sequence_nr == 2


def test_recovery_writes_lost_rows_into_their_own_time_buckets(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    clock = ManualClock(MINUTE_START_NS)
    lost = journal_factory(settings=MINUTE_BUCKETS, clock=clock)
    lost.append("p", [NewEvent.of(1, tags=["t"])])
    lost.flush()
    for minute in range(3):
        # Each append's batch is written when the next minute's arrives, except the last one.
        lost.append("p", [NewEvent.of(minute, tags=["t"]), NewEvent.of(minute, tags=["t", "u"])])
        clock.advance(MINUTE_NS)
    # `lost` stands for a killed writer: its last batch is never flushed.
    events = all_events(lost)
    assert entries(stores, "t") != expected_entries(events, "t", BucketSize.MINUTE)

    recovering = journal_factory(settings=MINUTE_BUCKETS, clock=clock)
    recovering.recover("p")

    assert entries(stores, "t") == expected_entries(events, "t", BucketSize.MINUTE)
    assert entries(stores, "u") == expected_entries(events, "u", BucketSize.MINUTE)
    assert len({e.time_bucket for e in entries(stores, "t")}) == 3
    assert progress_of(stores, "p", "t").sequence_nr == 7


class RecoveryBetweenReads:
    """A TagViewStore that lets another journal recover an id right after reading its progress.

    Found by `ordo simulate --handovers`: a recovery whose progress read was older than its
    tag_scanning read took the tag pid sequence nrs below tag_scanning from a stale progress.
    """

    def __init__(self, inner: TagViewStore, meanwhile: Callable[[], object]) -> None:
        self._inner = inner
        self._meanwhile = meanwhile

    def read_progress(self, persistence_id: PersistenceId) -> Mapping[Tag, TagProgress]:
        progress = self._inner.read_progress(persistence_id)
        self._meanwhile()
        return progress

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_a_recovery_racing_another_continues_the_tag_pid_sequence_nrs(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    killed = journal_factory(settings=BATCHED, clock=still_clock())
    killed.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])
    # `killed` never writes its buffered rows; another writer recovers the id while a third reads.
    other = journal_factory(settings=IMMEDIATE)
    racing = RecoveryBetweenReads(stores.tag_views, lambda: other.recover("p"))
    journal = Journal(stores.journal, racing, settings=IMMEDIATE)  # type: ignore[arg-type]
    try:
        journal.append("p", [NewEvent.of(3, tags=["t"])])
    finally:
        journal.close()

    assert [e.tags for e in other.replay("p")] == [{"t": 1}, {"t": 2}, {"t": 3}]
    assert [r.tag_pid_sequence_nr for r in entries(stores, "t")] == [1, 2, 3]


# --- failures -----------------------------------------------------------------------------------


def test_a_writer_whose_clock_is_behind_appends_after_an_untagged_newest_event(
    journal_factory: JournalFactory,
) -> None:
    """An id every event of which a recovery scanned (tag_scanning at its highest), whose newest
    event has no tag: the next journal's offsets followed the newest tagged event only, so a
    writer whose clock is behind gave the next event an offset before the untagged one (and a
    processor over the whole journal, in offset order, read the id out of order)."""
    first = journal_factory(settings=IMMEDIATE)
    first.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2)])
    first.close()
    scanning = journal_factory(settings=IMMEDIATE)
    assert scanning.recover("p") == 2  # scans both: tag_scanning is now 2
    scanning.close()
    behind = journal_factory(settings=IMMEDIATE, clock=SkewedClock(SystemClock(), skew_ns=-HOUR_NS))
    behind.append("p", [NewEvent.of(3)], expected_sequence_nr=2)
    offsets = [event.timeuuid for event in events_of(behind, "p")]
    assert offsets == sorted(offsets)


def test_a_failed_tag_write_is_retried_and_an_append_that_raises_wrote_nothing(
    stores: Stores,
) -> None:
    """The append contract: when append raises, nothing was written (the caller may retry).

    A tag_views write that fails must not turn a persisted append into an error, or a caller
    retrying it would persist the events twice.
    """
    tag_views = FailingTagViews(stores.tag_views, failures=1)
    journal = Journal(stores.journal, tag_views, settings=IMMEDIATE)  # type: ignore[arg-type]
    try:
        try:
            journal.append("p", [NewEvent.of(1, tags=["t"])])
        except StorageError:
            assert journal.highest_sequence_nr("p") == 0, "append raised but its event was written"
        journal.flush()
    finally:
        journal.close()

    assert [r.sequence_nr for r in entries(stores, "t")] == [1]
    assert progress_of(stores, "p", "t").sequence_nr == 1


def test_a_recovery_whose_progress_write_failed_leaves_the_next_one_the_numbers(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    """Recovery records tag_scanning once its tag writes are flushed, and the next recovery
    takes the numbers of the events below it from their progress. A batch whose rows were
    written but whose progress write failed was counted as written: the flush that followed
    found nothing to write, tag_scanning passed the events without progress, and the next
    journal numbered the tag from 1 again (an untagged newest event, which recovery reads
    anyway, hid nothing)."""
    killed = journal_factory(settings=MINUTE_BUCKETS, clock=still_clock())
    killed.append("p", [NewEvent.of(n, tags=["t"]) for n in range(3)] + [NewEvent.of(3)])
    # `killed` never writes its buffered rows; a journal whose first progress write fails
    # recovers the id (its tag writes go out at once, as the appender's do).
    failing = FailingTagViews(stores.tag_views, failures=1, progress=True)
    immediate = dataclasses.replace(MINUTE_BUCKETS, flush_interval=timedelta(0))
    recovering = Journal(stores.journal, failing, settings=immediate)  # type: ignore[arg-type]
    try:
        recovering.recover("p")
    finally:
        recovering.close()
    assert failing.failures == 0

    journal_factory(settings=immediate).append(
        "p", [NewEvent.of(4, tags=["t"])], expected_sequence_nr=4
    )

    assert [e.tags for e in killed.replay("p")] == [{"t": 1}, {"t": 2}, {"t": 3}, {}, {"t": 4}]
    assert [r.tag_pid_sequence_nr for r in entries(stores, "t")] == [1, 2, 3, 4]
