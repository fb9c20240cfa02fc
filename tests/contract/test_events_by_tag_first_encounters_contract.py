"""Persistence ids an offset query meets for the first time, against real storage.

A query from an offset in the current bucket learns where each id stands from a start scan,
and looks back for the earlier events of an id it meets later (new_persistence_id_scan_timeout).
These tests append with a manual clock, hide chosen rows of tag_views (moved to a table
`late`) and show them again, and drive the query's polls with explicit clock readings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from operations_support import execute
from ordo import EventsByTagSettings, Journal, NewEvent
from ordo.clock import ManualClock
from ordo.errors import MissingTaggedEventError
from ordo.query import EventEnvelope, TagQuery
from ordo.settings import QuerySettings
from ordo.storage.stores import Stores
from ordo.time import BucketSize, TimeUUID
from ordo.types import Tag

WRITE = EventsByTagSettings(flush_interval=timedelta(0))
MINUTES = EventsByTagSettings(flush_interval=timedelta(0), bucket_size=BucketSize.MINUTE)
SECOND_NS = 10**9
HOUR_NS = 3_600 * SECOND_NS


class _Rows:
    """Appends one id's events at chosen seconds, hides some rows and shows them again.

    start_ns is a minute into the last hour: the start of a bucket with `minutes`.
    """

    def __init__(
        self, journal_url: str, journal_factory: Callable[..., Journal], *, minutes: bool = False
    ) -> None:
        self.start_ns = (time.time_ns() // HOUR_NS - 1) * HOUR_NS + 60 * SECOND_NS
        self._url = journal_url
        self._clock = ManualClock(self.start_ns)
        self._journal = journal_factory(settings=MINUTES if minutes else WRITE, clock=self._clock)
        execute(journal_url, "CREATE TABLE late AS SELECT * FROM tag_views WHERE 1 = 0")

    def append(self, pid: str, *seconds: float) -> list[TimeUUID]:
        """Append one event of `pid` tagged `t` at each of `seconds` after start_ns."""
        offsets: list[TimeUUID] = []
        for second in seconds:
            at_ns = self.start_ns + round(second * SECOND_NS)
            self._clock.advance(at_ns - self._clock.now_ns())
            offsets += self._journal.append(pid, [NewEvent.of(second, tags=["t"])]).offsets
        return offsets

    def hide(self, pid: str, *nrs: int) -> None:
        where = f"FROM tag_views WHERE persistence_id = '{pid}' AND tag_pid_sequence_nr IN "
        where += f"({', '.join(map(str, nrs))})"
        execute(self._url, f"INSERT INTO late SELECT * {where}")
        execute(self._url, f"DELETE {where}")

    def show(self, pid: str, nr: int) -> None:
        where = f"FROM late WHERE persistence_id = '{pid}' AND tag_pid_sequence_nr = {nr}"
        execute(self._url, f"INSERT INTO tag_views SELECT * {where}")
        execute(self._url, f"DELETE {where}")


@pytest.fixture
def rows(journal_url: str, journal_factory: Callable[..., Journal]) -> _Rows:
    return _Rows(journal_url, journal_factory)


def _query(
    stores: Stores,
    *,
    offset: TimeUUID,
    now_ns: int,
    settings: QuerySettings,
    bucket_size: BucketSize = WRITE.bucket_size,
) -> TagQuery[EventEnvelope]:
    return TagQuery(
        stores.tag_view_reader,
        tag=Tag("t"),
        offset=offset,
        settings=settings,
        bucket_size=bucket_size,
        first_time_bucket_ms=WRITE.first_time_bucket_ms,
        now_ns=now_ns,
        is_live=True,
    )


def _nrs(query: TagQuery[EventEnvelope], now_ns: int) -> list[int]:
    return [envelope.tag_pid_sequence_nr for envelope in query.poll(now_ns).rows]


def test_a_look_back_that_found_some_earlier_events_delivers_them_and_fails_on_the_rest(
    rows: _Rows, stores: Stores
) -> None:
    """c#3 is the first event of c the query sees; its look-back finds c#1 but never c#2.

    At the look-back's timeout the query delivered c#3 alone: c#1, found and after the offset,
    was dropped (and later dropped again as a duplicate), and c#3 went out past the missing
    c#2 with no error. c#1 is the first event then, and c#2 a gap like any other (G1).
    """
    offsets = rows.append("c", 1, 2, 3)
    rows.hide("c", 1, 2)
    settings = QuerySettings(
        eventual_consistency_delay=timedelta(0),
        new_persistence_id_scan_timeout=timedelta(seconds=2),
        gap_timeout=timedelta(seconds=3),
    )
    start = rows.start_ns
    query = _query(stores, offset=TimeUUID.min_for_epoch_ns(start), now_ns=start, settings=settings)
    assert _nrs(query, start + SECOND_NS // 2) == []  # the start scan sees nothing of c yet
    assert _nrs(query, start + 4 * SECOND_NS) == []  # c#3 is held, c#1 and c#2 looked for
    rows.show("c", 1)
    assert _nrs(query, start + 5 * SECOND_NS) == []
    assert _nrs(query, start + 7 * SECOND_NS) == [1]  # the look-back timed out
    assert _nrs(query, start + 8 * SECOND_NS) == []  # c#2 is a gap now
    with pytest.raises(MissingTaggedEventError) as caught:
        query.poll(start + 11 * SECOND_NS)
    assert (caught.value.persistence_id, caught.value.missing) == ("c", (2,))
    assert caught.value.last_known_offset == offsets[0]


def test_a_start_scan_from_an_offset_younger_than_the_delay_learns_the_ids_before_it(
    rows: _Rows, stores: Stores
) -> None:
    """A query resumed from an offset less than the eventual-consistency delay old (its last
    run had a shorter delay, or it starts "from now") scanned only up to now minus the delay:
    it missed b#3 just before the offset, took b#5 for b's first event while b#4 was late,
    and then dropped b#4 as a duplicate: lost.
    """
    offsets = rows.append("b", 1, 2, 3, 5, 6)
    rows.hide("b", 4)
    settings = QuerySettings(eventual_consistency_delay=timedelta(seconds=2))
    start = rows.start_ns
    query = _query(stores, offset=offsets[2], now_ns=start + 4 * SECOND_NS, settings=settings)
    assert _nrs(query, start + 4 * SECOND_NS) == []
    assert _nrs(query, start + 9 * SECOND_NS) == []  # b#5 is held: b#4 is missing
    rows.show("b", 4)
    assert _nrs(query, start + 10 * SECOND_NS) == [4, 5]


def test_a_start_scan_just_after_a_bucket_starts_learns_the_ids_of_the_bucket_before(
    journal_url: str, journal_factory: Callable[..., Journal], stores: Stores
) -> None:
    """A query from 50 ms into a minute bucket scans 200 ms back, into the minute before.

    The scan read the offset's bucket only: it missed b#3, 100 ms before the minute, took b#5
    for b's first event while b#4 was late, and then dropped b#4 as a duplicate: lost.
    """
    rows = _Rows(journal_url, journal_factory, minutes=True)
    rows.append("b", 50, 55, 59.9, 60.5, 61)
    rows.hide("b", 4)
    settings = QuerySettings(eventual_consistency_delay=timedelta(seconds=1))
    now = rows.start_ns + 63 * SECOND_NS
    offset = TimeUUID.min_for_epoch_ns(rows.start_ns + 60_050_000_000)
    query = _query(
        stores, offset=offset, now_ns=now, settings=settings, bucket_size=BucketSize.MINUTE
    )
    assert _nrs(query, now) == []  # b#5 is held: b#4 is missing
    rows.show("b", 4)
    assert _nrs(query, now + SECOND_NS) == [4, 5]


def test_a_query_from_a_young_offset_of_the_bucket_before_scans_before_it(
    journal_url: str, journal_factory: Callable[..., Journal], stores: Stores
) -> None:
    """A 3.5 s old offset lies in the minute before now's: a bucket change, not an old offset.

    Only an offset of the current bucket was scanned: the query did not know b#3, the offset
    itself, took b#5 for b's first event while b#4 was late, and dropped b#4 as a duplicate.
    """
    rows = _Rows(journal_url, journal_factory, minutes=True)
    offsets = rows.append("b", 50, 55, 57, 58, 59)
    rows.hide("b", 4)
    settings = QuerySettings(eventual_consistency_delay=timedelta(seconds=1))
    now = rows.start_ns + 60_500_000_000
    query = _query(
        stores, offset=offsets[2], now_ns=now, settings=settings, bucket_size=BucketSize.MINUTE
    )
    assert _nrs(query, now) == []  # b#5 is held: b#4 is missing
    rows.show("b", 4)
    assert _nrs(query, now + SECOND_NS) == [4, 5]
