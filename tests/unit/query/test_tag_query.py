"""The events-by-tag state machine, scenario by scenario as seeds 000 and 001 tell them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ordo.errors import FutureOffsetError, MissingTaggedEventError, StorageUnavailableError
from ordo.query import TagQuery
from ordo.types import PersistenceId
from tag_view_doubles import (
    InMemoryTagView,
    OutageAtReads,
    Row,
    at,
    drain,
    offset_at,
    row,
    tag_query,
)


def test_a_live_query_stays_the_consistency_delay_behind_now() -> None:
    view = InMemoryTagView()
    view.add(row("a", 1, 1_000), row("b", 1, 2_000))
    query = tag_query(view, now_ms=0, eventual_consistency_delay=timedelta(seconds=1))
    assert drain(query, now_ms=2_500) == [("a", 1)]
    assert drain(query, now_ms=3_001) == [("b", 1)]


def test_events_are_delivered_in_offset_order_with_paging() -> None:
    view = InMemoryTagView()
    view.add(*(row(f"p{i % 3}", i // 3 + 1, 100 + i) for i in range(10)))
    query = tag_query(view, now_ms=0, is_live=False)
    assert drain(query, now_ms=5_000) == []  # the current query was fixed at its start
    query = tag_query(view, now_ms=5_000, is_live=False)
    assert drain(query, now_ms=5_000) == [(f"p{i % 3}", i // 3 + 1) for i in range(10)]


def test_a_delayed_event_is_found_by_the_next_event_of_its_persistence_id() -> None:
    view = InMemoryTagView()
    view.add(row("a", 1, 1_000), row("b", 1, 1_500), row("a", 3, 3_000), row("b", 2, 3_500))
    query = tag_query(view, now_ms=0)
    assert drain(query, now_ms=4_000) == [("a", 1), ("b", 1)]  # a#3 is held back
    view.add(row("a", 2, 2_000))  # arrives late, within gap_timeout
    assert drain(query, now_ms=4_500) == [("a", 2), ("a", 3), ("b", 2)]


def test_a_delayed_event_is_found_by_back_tracking_when_its_id_writes_no_more() -> None:
    view = InMemoryTagView()
    view.add(row("a", 1, 1_000), row("b", 1, 3_000))
    query = tag_query(view, now_ms=3_000)
    assert drain(query, now_ms=3_000) == [("a", 1), ("b", 1)]
    view.add(row("a", 2, 2_000))  # behind the query's position: only a back-track sees it
    assert drain(query, now_ms=3_500) == []
    assert drain(query, now_ms=4_001) == [("a", 2)]


def test_a_back_track_whose_read_failed_runs_again_at_the_next_poll() -> None:
    """A back-track was rescheduled when it fell due: after its read failed it waited a whole
    interval, and by then the long one no longer reached a late event (its position had moved
    a bucket on, and "max" reaches back to the previous bucket only): a#2 was lost."""
    view = InMemoryTagView()
    view.add(row("a", 1, 50_000), *(row("b", n, n * 10_000) for n in range(1, 17)))
    failing: set[int] = set()
    reader = OutageAtReads(view, failing=failing)
    query = tag_query(reader, now_ms=0)  # the long back-track is due every 30 s
    delivered: list[tuple[str, int]] = []
    for now_ms in range(0, 160_000, 500):
        if now_ms == 95_000:
            view.add(row("a", 2, 55_000))  # late, behind the short back-track's 5 s
        if now_ms == 120_000:
            failing.add(reader.reads + 1)  # the long back-track's first read
        try:
            delivered += [
                (r.persistence_id, r.tag_pid_sequence_nr) for r in query.poll(at(now_ms)).rows
            ]
        except StorageUnavailableError:
            assert now_ms == 120_000
    assert [(pid, nr) for pid, nr in delivered if pid == "a"] == [("a", 1), ("a", 2)]


def test_a_gap_never_filled_fails_and_a_restart_from_its_last_known_offset_finds_it() -> None:
    view = InMemoryTagView()
    view.add(row("a", 1, 1_000), row("b", 1, 1_500), row("a", 3, 3_000))
    query = tag_query(view, now_ms=0, gap_timeout=timedelta(seconds=2))
    assert drain(query, now_ms=4_000) == [("a", 1), ("b", 1)]
    assert drain(query, now_ms=5_000) == []
    with pytest.raises(MissingTaggedEventError) as caught:
        drain(query, now_ms=6_001)
    error = caught.value
    assert (error.tag, error.persistence_id, error.missing) == ("t", "a", (2,))
    assert error.last_known_offset.to_bytes() == row("a", 1, 1_000).offset_key
    assert error.searched_up_to.to_bytes() == row("a", 3, 3_000).offset_key
    view.add(row("a", 2, 2_000))
    restarted = tag_query(view, now_ms=7_000, offset=error.last_known_offset)
    assert drain(restarted, now_ms=7_000) == [("b", 1), ("a", 2), ("a", 3)]


def test_a_gap_wider_than_max_missing_to_search_fails_at_once() -> None:
    view = InMemoryTagView()
    view.add(row("a", 1, 1_000), row("a", 9, 2_000))
    query = tag_query(view, now_ms=0, max_missing_to_search=5)
    with pytest.raises(MissingTaggedEventError) as caught:
        drain(query, now_ms=3_000)
    assert caught.value.missing == (2, 3, 4, 5, 6, 7, 8)


def test_from_no_offset_every_persistence_id_starts_at_one() -> None:
    view = InMemoryTagView()
    view.add(row("a", 2, 1_000))
    query = tag_query(view, now_ms=0, gap_timeout=timedelta(seconds=1))
    assert drain(query, now_ms=2_000) == []
    view.add(row("a", 1, 500))
    assert drain(query, now_ms=2_500) == [("a", 1), ("a", 2)]


def test_a_first_encounter_in_a_past_bucket_takes_the_first_event_seen() -> None:
    view = InMemoryTagView()
    view.add(row("a", 5, 1_000), row("a", 6, 2_000))
    start = offset_at(500)
    query = tag_query(view, now_ms=120_000, offset=start)  # two minute buckets later
    assert drain(query, now_ms=120_000) == [("a", 5), ("a", 6)]


def test_a_first_encounter_in_the_current_bucket_scans_for_the_lowest_nr_first() -> None:
    view = InMemoryTagView()
    # b#3 is at the offset (already delivered before the restart); c is seen only after it.
    view.add(row("b", 3, 900), row("b", 4, 1_500), row("c", 7, 1_200), row("c", 8, 1_300))
    query = tag_query(view, now_ms=2_000, offset=offset_at(1_000))
    assert drain(query, now_ms=2_000) == [("c", 7), ("c", 8), ("b", 4)]


def test_the_start_scan_counts_events_just_before_the_offset_as_delivered() -> None:
    view = InMemoryTagView()
    view.add(row("b", 3, 950), row("b", 5, 1_500))  # b#4 is missing after the offset
    query = tag_query(view, now_ms=2_000, offset=offset_at(1_000), gap_timeout=timedelta(0))
    with pytest.raises(MissingTaggedEventError) as caught:
        drain(query, now_ms=2_000)
    assert caught.value.missing == (4,)


def test_a_start_scan_whose_read_failed_is_run_again_by_the_next_poll() -> None:
    """The scan was marked done before its read: after an outage the query went on without
    it, took b#5 for b's first event and would drop b#4 as a duplicate when it showed up."""
    view = InMemoryTagView()
    view.add(row("b", 3, 950), row("b", 5, 1_500))  # b#4 is missing after the offset
    query = tag_query(
        OutageAtReads(view, failing={1}),
        now_ms=2_000,
        offset=offset_at(1_000),
        gap_timeout=timedelta(0),
    )
    with pytest.raises(StorageUnavailableError):
        query.poll(at(2_000))
    with pytest.raises(MissingTaggedEventError) as caught:
        drain(query, now_ms=2_000)
    assert caught.value.missing == (4,)


def test_known_positions_make_a_first_encounter_after_the_offset_a_gap() -> None:
    view = InMemoryTagView()
    view.add(row("b", 4, 100), row("b", 6, 1_500))  # b#5 is not visible yet
    known = {PersistenceId("b"): 4}
    query = tag_query(view, now_ms=2_000, offset=offset_at(1_000), known=known)
    assert drain(query, now_ms=2_000) == []
    view.add(row("b", 5, 1_200))
    assert drain(query, now_ms=2_100) == [("b", 5), ("b", 6)]


def _holding(view: InMemoryTagView, held: Row, *, look_back: timedelta) -> TagQuery[Row]:
    """A query from an offset at 1 s that met `held` after it as a first encounter at 1.4 s,
    and holds it while it looks back for earlier events (new_persistence_id_scan_timeout)."""
    query = tag_query(
        view, now_ms=1_000, offset=offset_at(1_000), new_persistence_id_scan_timeout=look_back
    )
    assert drain(query, now_ms=1_200) == []  # the start scan finds nothing of its id
    view.add(held)
    assert drain(query, now_ms=1_400) == []  # held while earlier events are sought
    return query


def test_new_persistence_id_scan_timeout_looks_back_for_earlier_events() -> None:
    view = InMemoryTagView()
    query = _holding(view, row("c", 3, 1_300), look_back=timedelta(seconds=1))
    view.add(row("c", 2, 1_100))
    assert drain(query, now_ms=1_500) == []  # c#1 might still come: look until the timeout
    assert drain(query, now_ms=2_401) == [("c", 2), ("c", 3)]


def test_a_look_back_that_times_out_accepts_the_first_event_seen() -> None:
    view = InMemoryTagView()
    query = _holding(view, row("c", 3, 1_300), look_back=timedelta(milliseconds=200))
    assert drain(query, now_ms=1_700) == [("c", 3)]


def test_a_look_back_that_times_out_takes_the_lowest_found_and_seeks_what_follows_it() -> None:
    """c#2 and c#4 are found, c#3 never: c#2 is the first, then a gap; c#2 is not dropped."""
    view = InMemoryTagView()
    query = _holding(view, row("c", 5, 1_300), look_back=timedelta(milliseconds=200))
    view.add(row("c", 2, 1_100), row("c", 4, 1_150))
    assert drain(query, now_ms=1_700) == [("c", 2)]
    with pytest.raises(MissingTaggedEventError) as caught:
        drain(query, now_ms=3_701)  # gap_timeout (2 s) after the look-back ended
    assert caught.value.missing == (3,)


def test_minute_buckets_are_walked_across_their_boundaries() -> None:
    view = InMemoryTagView()
    view.add(
        row("a", 1, 59_999),
        row("a", 2, 60_000),
        row("b", 1, 60_001),
        row("a", 3, 185_000),  # two empty buckets in between
    )
    query = tag_query(view, now_ms=200_000, is_live=False)
    assert drain(query, now_ms=200_000) == [("a", 1), ("a", 2), ("b", 1), ("a", 3)]
    assert query.poll(at(200_000)).is_complete


def test_duplicates_seen_again_by_back_tracking_are_dropped() -> None:
    view = InMemoryTagView()
    view.add(row("a", 1, 1_000), row("a", 2, 2_000))
    query = tag_query(view, now_ms=2_000)
    assert drain(query, now_ms=2_000) == [("a", 1), ("a", 2)]
    view.add(row("a", 1, 1_001))  # the same event written again under another offset
    assert drain(query, now_ms=3_100) == []
    assert query.duplicates >= 2


def test_an_offset_in_the_future_is_refused() -> None:
    with pytest.raises(FutureOffsetError, match="in the future"):
        tag_query(InMemoryTagView(), now_ms=0, offset=offset_at(60_000))


def test_forgotten_persistence_ids_are_taken_as_new_when_seen_again() -> None:
    """Read in two polls, so that `a` is forgotten before a#2 comes: in one poll it never was,
    and a query that took a returning id's event above 1 for a gap from NoOffset passed."""
    view = InMemoryTagView()
    view.add(row("a", 1, 1_000), row("b", 1, 200_000))
    query = tag_query(view, now_ms=0, cleanup_old_persistence_ids=timedelta(seconds=60))
    assert drain(query, now_ms=300_000, polls=50) == [("a", 1), ("b", 1)]
    view.add(row("a", 2, 400_000))
    assert drain(query, now_ms=500_000, polls=50) == [("a", 2)]


def test_the_forward_scan_jumps_over_empty_buckets() -> None:
    """A query from a first time bucket long ago read every empty bucket, one query each (about
    96,000 for the default's hours since 2015) before its first event."""
    days_ms = 3 * 24 * 3_600_000  # 4,320 minute buckets
    view = InMemoryTagView()
    view.add(row("a", 1, days_ms), row("a", 2, days_ms + 600_000), row("b", 1, days_ms + 660_000))
    query = tag_query(view, now_ms=days_ms + 700_000, is_live=False)

    assert drain(query, now_ms=days_ms + 700_000) == [("a", 1), ("a", 2), ("b", 1)]
    assert view.reads < 20


def test_a_query_from_no_offset_delivers_an_event_at_the_first_bucket_start() -> None:
    """NoOffset starts just before its first bucket, not at its first instant."""
    view = InMemoryTagView()
    view.add(row("a", 1, 0))
    query = tag_query(view, now_ms=1_000, is_live=False)
    assert drain(query, now_ms=1_000) == [("a", 1)]


def test_a_zero_new_persistence_id_scan_timeout_takes_a_first_encounter_at_once() -> None:
    """With the default 0, the poll that reads c#7 delivers it: no look back, not a poll later."""
    view = InMemoryTagView()
    query = tag_query(view, now_ms=2_000, offset=offset_at(1_000))
    assert drain(query, now_ms=2_000) == []  # the start scan finds nothing of c
    view.add(row("c", 7, 2_050))
    rows = query.poll(at(2_100)).rows
    assert [(r.persistence_id, r.tag_pid_sequence_nr) for r in rows] == [("c", 7)]


def test_a_back_track_does_not_reach_before_the_offset_the_query_started_from() -> None:
    """b#1 lies before the offset (delivered before the restart): a back-track whose period
    reaches back past the offset must not deliver it again as a first encounter."""
    view = InMemoryTagView()
    view.add(row("b", 1, 5_000))
    query = tag_query(
        view, now_ms=50_000, offset=offset_at(50_000), back_track_period=timedelta(seconds=60)
    )
    assert drain(query, now_ms=50_000) == []
    assert drain(query, now_ms=51_100) == []  # the short back-track ran


def test_a_known_position_is_kept_over_an_event_just_before_the_offset() -> None:
    """The caller processed b up to #4; b#5, just before the offset, is one it has not seen:
    it is not taken as delivered, and b#6 after the offset is a gap, never a silent skip."""
    view = InMemoryTagView()
    view.add(row("b", 5, 950), row("b", 6, 1_500))
    known = {PersistenceId("b"): 4}
    query = tag_query(
        view, now_ms=2_000, offset=offset_at(1_000), known=known, gap_timeout=timedelta(0)
    )
    with pytest.raises(MissingTaggedEventError) as caught:
        drain(query, now_ms=2_000)
    assert caught.value.missing == (5,)


def test_a_gap_search_looks_into_the_bucket_before_the_held_event() -> None:
    view = InMemoryTagView()
    view.add(row("a", 1, 58_000), row("a", 3, 61_000))
    query = tag_query(view, now_ms=0)
    assert drain(query, now_ms=62_000) == [("a", 1)]
    view.add(row("a", 2, 59_000))  # late, in the bucket before a#3's
    assert drain(query, now_ms=62_500) == [("a", 2), ("a", 3)]


def test_an_offset_a_short_back_track_just_reaches_is_scanned_around_first() -> None:
    """The offset lies exactly the back-track period (5 s) before now, in the past bucket: b#3
    at it was delivered, so b#5 waits for the late b#4 instead of being taken as b's first."""
    view = InMemoryTagView()
    view.add(row("b", 3, 56_900), row("b", 5, 58_000))
    query = tag_query(view, now_ms=62_000, offset=offset_at(57_000))
    assert drain(query, now_ms=62_000) == []
    view.add(row("b", 4, 57_500))
    assert drain(query, now_ms=62_100) == [("b", 4), ("b", 5)]
