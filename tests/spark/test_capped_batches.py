"""`maxEventsPerTrigger` batches resumed from their offsets, as a restarted query resumes them.

The planner runs on a real journal of each backend; a restart is a new planner resuming after the
offset of the last batch, which is what Spark hands the source from its checkpoint.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest

from operations_support import execute
from order_stream_support import OPTIONS, WRITE
from ordo import NewEvent, open_journal
from ordo.spark.offsets import EventsByTagOffset
from ordo.spark.options import EventsByTagOptions
from ordo.spark.planner import EventsByTagPlanner
from ordo.spark.projection import OWNER
from ordo.storage.open import stores_at
from ordo.types import PersistenceId

Delivered = list[tuple[str, int]]
LATE = "persistence_id = 'order-a' AND tag_pid_sequence_nr IN (2, 3)"


def _delivered(batch: EventsByTagOffset) -> Delivered:
    return [(pid, nr) for pid, (first, last) in batch.pids.items() for nr in range(first, last + 1)]


def _plan(planner: EventsByTagPlanner, start: EventsByTagOffset) -> EventsByTagOffset:
    return planner.plan(start, now_ns=time.time_ns(), max_rows=3)


def _journal(url: str) -> list[tuple[object, ...]]:
    """order-a 1, 2, 3, order-b 1 .. 4, order-a 4, in this order; the tag views rows of a 2 and
    a 3, which are taken out (written late), are returned."""
    with open_journal(url, settings=WRITE) as journal:
        for pid in "aaabbbba":
            journal.append(f"order-{pid}", [NewEvent.of({}, tags=["order"])])
    late = execute(url, f"SELECT * FROM tag_views WHERE {LATE}")
    execute(url, f"DELETE FROM tag_views WHERE {LATE}")
    return late


@pytest.mark.parametrize("projection", [False, True])
def test_a_batch_cut_behind_events_found_late_resumes_after_exactly_what_it_delivered(
    journal_url: str, projection: bool
) -> None:
    """A gap search finds order-a's 2 and 3 while order-b's 3 and 4, written after them,
    wait in the planner: the batch of three takes b 3, b 4 and a 2, and a 3 waits for the
    next one. Its offset resumed after a 2, which b 3 and b 4 lie after (a restarted stream
    delivered them again) and a 3 before (it never delivered it). A projection's positions
    drop b 3 and b 4, but its source then waits for a 3 after the offset, and fails.

    Back-tracking is off (a 3 may be older than the period a projection's source looks back).
    """
    url = journal_url
    late = _journal(url)
    given = {**OPTIONS, "journal": url, "gapTimeoutMs": "600000", "backTrackIntervalMs": "600000"}
    if projection:
        given |= {"positionsOf": "totals", "backTrackPeriodMs": "0"}
    options = EventsByTagOptions.from_spark(given)
    planner = EventsByTagPlanner(options, resume_after="", now_ns=time.time_ns())
    try:
        first = _plan(planner, EventsByTagOffset(tag="order"))  # a 1, b 1, b 2; a 4 held
        for row in late:  # a 2 and a 3 show up
            execute(url, f"INSERT INTO tag_views VALUES ({', '.join('?' * len(row))})", row)
        second = _plan(planner, first)
    finally:
        planner.close()
    delivered = _delivered(first) + _delivered(second)
    if projection:  # what the projection's tasks record as they apply the two batches
        with stores_at(url) as stores, stores.tokens.batch("totals", 0, OWNER) as batch:
            for pid, nr in delivered:
                batch.record(PersistenceId(pid), nr)
    # The restart's search gives up at once (a gap it cannot fill is a failed query).
    options = replace(options, query=replace(options.query, gap_timeout=timedelta(0)))
    resumed = EventsByTagPlanner(options, resume_after=second.position, now_ns=time.time_ns())
    try:
        resumed.cap_at(time.time_ns())
        start = second
        while (end := _plan(resumed, start)) != start:
            delivered += _delivered(end)
            start = end
    finally:
        resumed.close()
    if projection:
        delivered = list(dict.fromkeys(delivered))  # the positions drop what was applied
    assert sorted(delivered) == [(f"order-{pid}", nr) for pid in "ab" for nr in range(1, 5)]
