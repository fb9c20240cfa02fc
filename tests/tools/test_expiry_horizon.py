"""Rows deleted on purpose (expiry, `cleanup before`) stay deleted: rebuilds skip their events.

The expiry records before which time each tag's rows were deleted (its horizon); a rebuild of
one id, of every id, or of the pairs `verify --repair` names leaves those events without rows
and numbers the others as the tag writer did (G7), and a query from the start reads on from the
horizon. Both backends.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

from operations_support import WRITE, execute, progress_rows, tag_view_rows
from ordo import EventsByTag, NewEvent, QuerySettings, open_journal
from ordo.clock import ManualClock
from ordo.query import NO_OFFSET
from ordo.query.offset import past_expiry
from ordo.storage.open import stores_at
from ordo.time import TimeUUID, format_first_time_bucket
from ordo.tools.cleanup import Cleanup
from ordo.tools.reconciliation import Reconciliation
from ordo.types import PersistenceId, Tag

NOW_NS = time.time_ns()
HOUR_MS = 3_600_000
HOUR_NS = HOUR_MS * 10**6


def _write_old_and_new(url: str) -> None:
    """Events of tags `t` and `u` three hours ago, then more of both now, across two ids."""
    clock = ManualClock(NOW_NS - 3 * HOUR_NS)
    with open_journal(url, settings=WRITE, clock=clock) as journal:
        for n in range(5):
            journal.append(f"p{n % 2}", [NewEvent.of(n, tags=["t", "u"])])
        clock.advance(3 * HOUR_NS)
        for n in range(3):
            journal.append(f"p{n % 2}", [NewEvent.of(n, tags=["t", "u"])])


def _old(rows: set[tuple[object, ...]], tag: str) -> set[tuple[object, ...]]:
    """The rows of `tag` in buckets before an hour ago: the old events'."""
    return {r for r in rows if r[0] == tag and int(str(r[1])) < NOW_NS // 10**6 - HOUR_MS}


def test_rebuilds_after_an_expiry_write_no_expired_event_and_keep_the_numbers(
    journal_url: str,
) -> None:
    _write_old_and_new(journal_url)
    with stores_at(journal_url) as stores:
        assert Cleanup.of(stores).expire(timedelta(hours=1)).deleted == 10
        expired, progress = tag_view_rows(journal_url), progress_rows(journal_url)
        assert len(expired) == 6
        assert {r[4] for r in expired if r[3] == "p0"} == {4, 5}  # the writer's numbers
        reconciliation = Reconciliation.of(stores)

        one = reconciliation.rebuild_tag_views(PersistenceId("p0"))
        assert one.written_rows == 4
        assert (tag_view_rows(journal_url), progress_rows(journal_url)) == (expired, progress)

        execute(journal_url, "DELETE FROM tag_views WHERE persistence_id = 'p1'")
        pairs = [(Tag("t"), PersistenceId("p1")), (Tag("u"), PersistenceId("p1"))]
        assert reconciliation.rebuild_pairs(pairs).written_rows == 2  # what verify --repair runs
        assert (tag_view_rows(journal_url), progress_rows(journal_url)) == (expired, progress)

        reconciliation.truncate()
        dry = reconciliation.rebuild_all_locally(dry_run=True)
        assert (dry.written_rows, tag_view_rows(journal_url)) == (6, set())
        assert reconciliation.rebuild_all_locally().written_rows == 6
    assert (tag_view_rows(journal_url), progress_rows(journal_url)) == (expired, progress)


def test_cleanup_before_a_time_of_one_tag_holds_back_only_that_tag(journal_url: str) -> None:
    _write_old_and_new(journal_url)
    written = tag_view_rows(journal_url)
    with stores_at(journal_url) as stores:
        cleanup, reconciliation = Cleanup.of(stores), Reconciliation.of(stores)
        cleanup.delete_tag_views_before(NOW_NS // 10**6 - HOUR_MS, tag=Tag("t"))
        kept = tag_view_rows(journal_url)
        assert kept == written - _old(written, "t")
        # Earlier than the horizon: it deletes nothing and leaves the horizon where it was.
        earlier = cleanup.delete_tag_views_before(NOW_NS // 10**6 - 5 * HOUR_MS, tag=Tag("t"))
        assert earlier.deleted == 0

        reconciliation.truncate()
        reconciliation.rebuild_all_locally()
    assert tag_view_rows(journal_url) == kept


def test_a_dry_run_sets_no_horizon(journal_url: str) -> None:
    _write_old_and_new(journal_url)
    written = tag_view_rows(journal_url)
    with stores_at(journal_url) as stores:
        Cleanup.of(stores).expire(timedelta(hours=1), dry_run=True)
        execute(journal_url, "DELETE FROM tag_views WHERE tag = 't'")
        Reconciliation.of(stores).rebuild_all_locally()
    assert tag_view_rows(journal_url) == written


def test_a_query_from_the_start_reads_on_from_the_horizon(journal_url: str) -> None:
    """A query from no offset expects each id's tag pid sequence nr 1, which an expiry deleted.

    p0's events 1-3 and p1's 1-2 are expired: the query took p0#4 for a gap and failed with
    MissingTaggedEventError after gap_timeout (restarting from its last_known_offset could not
    bring deleted rows back). It now starts at the horizon, as a query from that offset.
    """
    _write_old_and_new(journal_url)
    quick = QuerySettings(eventual_consistency_delay=timedelta(0), gap_timeout=timedelta(0))
    with stores_at(journal_url) as stores:
        Cleanup.of(stores).expire(timedelta(hours=1))
        query = EventsByTag(
            stores.tag_view_reader,
            settings=quick,
            events_by_tag=WRITE,
        )
        with query.current("t") as events:
            delivered = [(e.persistence_id, e.tag_pid_sequence_nr) for e in events]
    assert delivered == [("p0", 4), ("p1", 3), ("p0", 5)]


def test_a_horizon_before_the_first_time_bucket_leaves_a_query_from_the_start_as_it_was(
    journal_url: str,
) -> None:
    """An expiry records its horizon whether it deletes anything or not. One before the first
    time bucket deleted nothing a query from the start reads, yet moved its start there: back,
    before its first time bucket, and with no check of each id's tag pid sequence nr 1."""
    _write_old_and_new(journal_url)
    first_ms = NOW_NS // 10**6 - 4 * HOUR_MS
    with stores_at(journal_url) as stores:
        # at NOW_NS, not the wall clock: run minutes after the import, the horizon could pass
        # the start of first_ms's bucket, which this test means it to be before
        Cleanup.of(stores, clock=ManualClock(NOW_NS)).expire(timedelta(hours=5))
        reader, hours = stores.tag_view_reader, WRITE.bucket_size
        kept = past_expiry(
            NO_OFFSET, reader, Tag("t"), first_time_bucket_ms=first_ms, bucket_size=hours
        )
        earlier_ms = first_ms - 2 * HOUR_MS
        moved = past_expiry(
            NO_OFFSET, reader, Tag("t"), first_time_bucket_ms=earlier_ms, bucket_size=hours
        )
    assert kept is NO_OFFSET
    assert isinstance(moved, TimeUUID)  # the horizon, about 5 hours ago
    assert earlier_ms < moved.epoch_ns // 10**6 < first_ms


def test_a_horizon_in_the_first_time_buckets_bucket_moves_a_query_from_the_start(
    journal_url: str,
) -> None:
    """A query from no offset reads the first time bucket's bucket from its start (Akka rounds
    first-time-bucket down). A horizon between that start and first-time-bucket was taken for
    one before the query: it read from the bucket's start, found p0's nr 1 expired and failed
    with MissingTaggedEventError instead of reading on from the horizon."""
    hour_ms = (NOW_NS // 10**6 // HOUR_MS - 3) * HOUR_MS  # an hour bucket three hours ago
    minute_ns = 60_000 * 10**6
    clock = ManualClock(hour_ms * 10**6 + 5 * minute_ns)
    with open_journal(journal_url, settings=WRITE, clock=clock) as journal:
        journal.append("p0", [NewEvent.of(1, tags=["t"])])  # at :05, expired below
        clock.advance(15 * minute_ns)
        journal.append("p0", [NewEvent.of(2, tags=["t"])])  # at :20, kept
    quick = QuerySettings(eventual_consistency_delay=timedelta(0), gap_timeout=timedelta(0))
    first = replace(WRITE, first_time_bucket=format_first_time_bucket(hour_ms + 30 * 60_000))
    with stores_at(journal_url) as stores:
        assert Cleanup.of(stores).delete_tag_views_before(hour_ms + 15 * 60_000).deleted == 1
        query = EventsByTag(stores.tag_view_reader, settings=quick, events_by_tag=first)
        with query.current("t") as events:
            delivered = [(e.persistence_id, e.tag_pid_sequence_nr, e.payload) for e in events]
    assert delivered == [("p0", 2, 2)]
