"""The tag views' contract, run once per backend through `journal_url`: what the tag writer puts
in tag_views and tag_write_progress.

When it writes them is in test_tag_views_flush_contract, concurrent writes in
test_tag_views_concurrency_contract, recovery and failed writes in
test_tag_views_recovery_contract.
"""

from __future__ import annotations

from datetime import timedelta

from journal_support import BATCHED, IMMEDIATE, JournalFactory, still_clock, tag_names
from ordo import BucketSize, EventsByTagSettings, Journal, NewEvent, PersistedEvent
from ordo.clock import ManualClock
from ordo.query import RowKey, TagViewReader
from ordo.storage.stores import Stores
from ordo.tagging import TagProgress
from ordo.types import PersistenceId, Tag, TagPidSequenceNr, TimeBucket
from tag_views_support import MINUTE_NS, MINUTE_START_NS, all_events, entries, expected_entries


def test_tag_views_hold_every_tagged_event_after_flush(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("a", [NewEvent.of(1, tags=["red"]), NewEvent.of(2, tags=["red", "blue"])])
    journal.append("b", [NewEvent.of(1, tags=["blue"]), NewEvent.of(2)])
    journal.append("a", [NewEvent.of(3), NewEvent.of(4, tags=["blue", "green"])])
    journal.append("b", [NewEvent.of(3, tags=["blue"])])

    journal.flush()

    events = all_events(journal)
    assert tag_names(stores) == ["blue", "green", "red"]
    for tag in ["blue", "green", "red"]:
        assert entries(stores, tag) == expected_entries(events, tag, BucketSize.HOUR)
    numbers: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for tag in tag_names(stores):
        for e in entries(stores, tag):
            numbers.setdefault((tag, e.persistence_id), []).append(
                (e.sequence_nr, e.tag_pid_sequence_nr)
            )
    assert numbers == {
        ("blue", "a"): [(2, 1), (4, 2)],
        ("blue", "b"): [(1, 1), (3, 2)],
        ("green", "a"): [(4, 1)],
        ("red", "a"): [(1, 1), (2, 2)],
    }


def test_tag_pid_sequence_nrs_in_tag_views_are_contiguous_per_pid_and_tag(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    for round_nr in range(4):
        for pid in ["a", "b", "c"]:
            tags = ["even"] if round_nr % 2 == 0 else ["odd"]
            journal.append(pid, [NewEvent.of(round_nr, tags=[*tags, "all"])])
    journal.flush()

    numbers: dict[tuple[str, str, int], int] = {
        (tag, e.persistence_id, e.sequence_nr): e.tag_pid_sequence_nr
        for tag in tag_names(stores)
        for e in entries(stores, tag)
    }
    for pid in ["a", "b", "c"]:
        assert [numbers[("all", pid, seq)] for seq in range(1, 5)] == [1, 2, 3, 4]
        assert [numbers[("even", pid, seq)] for seq in (1, 3)] == [1, 2]
        assert [numbers[("odd", pid, seq)] for seq in (2, 4)] == [1, 2]
    assert len(numbers) == 3 * (4 + 2 + 2)


FIRST_MINUTE = MINUTE_START_NS // 10**6 - 10_000
"""The minute bucket of MINUTE_START_NS (10 s into it)."""


def _minute_journal(journal_factory: JournalFactory) -> tuple[Journal, ManualClock]:
    """A journal of minute buckets writing each event's tags at once, on a clock it returns."""
    clock = ManualClock(MINUTE_START_NS)
    settings = EventsByTagSettings(bucket_size=BucketSize.MINUTE, flush_interval=timedelta(0))
    return journal_factory(settings=settings, clock=clock), clock


def test_time_buckets_follow_the_offsets_and_bucket_size(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal, clock = _minute_journal(journal_factory)
    journal.append("p", [NewEvent.of(1, tags=["t"])])
    clock.advance(MINUTE_NS)
    journal.append("p", [NewEvent.of(2, tags=["t"])])
    clock.advance(3 * MINUTE_NS)
    journal.append("p", [NewEvent.of(3, tags=["t"])])

    rows = entries(stores, "t")
    minute = FIRST_MINUTE
    assert [r.time_bucket for r in rows] == [minute, minute + 60_000, minute + 240_000]
    assert rows == expected_entries(all_events(journal), "t", BucketSize.MINUTE)


def test_an_append_across_a_bucket_boundary_puts_each_event_in_its_own_bucket(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    """An append's offsets are consecutive 100 ns ticks: these start 30 ticks before a minute.

    Its tag writes are split there (the journal skips working out each event's bucket only
    when the first and last offsets share one).
    """
    journal, clock = _minute_journal(journal_factory)
    clock.advance(MINUTE_NS - 10 * 10**9 - 30 * 100)
    journal.append("p", [NewEvent.of(i, tags=["t"] if i % 2 else ["t", "u"]) for i in range(100)])

    minute = FIRST_MINUTE
    rows = entries(stores, "t")
    assert [r.time_bucket for r in rows] == [minute] * 30 + [minute + 60_000] * 70
    assert [r.tag_pid_sequence_nr for r in rows] == list(range(1, 101))
    events = all_events(journal)
    for tag in ("t", "u"):
        assert entries(stores, tag) == expected_entries(events, tag, BucketSize.MINUTE)


def test_next_bucket_names_the_first_bucket_holding_rows_up_to_a_limit(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    """Where a query's forward scan jumps over empty buckets, in tag_views and the journal."""
    journal, clock = _minute_journal(journal_factory)
    journal.append("p", [NewEvent.of(1, tags=["t"])])
    clock.advance(5 * MINUTE_NS)
    journal.append("p", [NewEvent.of(2, tags=["t"]), NewEvent.of(3, tags=["u"])])
    minute = FIRST_MINUTE
    later = minute + 5 * 60_000

    def first_after(reader: TagViewReader[RowKey], after: int, up_to: int) -> int | None:
        return reader.next_bucket(Tag("t"), after=TimeBucket(after), up_to=TimeBucket(up_to))

    for reader in (stores.tag_view_reader, stores.all_events(BucketSize.MINUTE)):
        assert first_after(reader, minute - 60_000, later) == minute
        assert first_after(reader, minute, later) == later
        assert first_after(reader, minute, later - 60_000) is None
        assert first_after(reader, later, later + 60_000) is None
    assert (
        stores.tag_view_reader.next_bucket(
            Tag("u"), after=TimeBucket(minute - 60_000), up_to=TimeBucket(later)
        )
        == later
    )


def _progress_to(event: PersistedEvent, tag: Tag, tag_pid_sequence_nr: int) -> TagProgress:
    """The progress of `tag` written up to `event`, the tag's `tag_pid_sequence_nr`th of its
    persistence id."""
    return TagProgress(
        persistence_id=event.persistence_id,
        tag=tag,
        sequence_nr=event.sequence_nr,
        tag_pid_sequence_nr=TagPidSequenceNr(tag_pid_sequence_nr),
        timeuuid=event.timeuuid,
    )


def test_progress_after_flush_is_the_last_written_event(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("a", [NewEvent.of(n, tags=["t"]) for n in range(5)])
    journal.append("a", [NewEvent.of("x", tags=["u"]), NewEvent.of("y")])
    journal.append("b", [NewEvent.of(1, tags=["u"])])
    journal.flush()

    a_events = list(journal.replay("a"))
    b_events = list(journal.replay("b"))
    t, u = Tag("t"), Tag("u")
    assert stores.tag_views.read_progress(PersistenceId("a")) == {
        t: _progress_to(a_events[4], t, 5),
        u: _progress_to(a_events[5], u, 1),
    }
    assert stores.tag_views.read_progress(PersistenceId("b")) == {
        u: _progress_to(b_events[0], u, 1)
    }
    assert stores.tag_views.read_progress(PersistenceId("nobody")) == {}


def test_untagged_events_have_no_tag_views(journal_factory: JournalFactory, stores: Stores) -> None:
    journal = journal_factory(settings=IMMEDIATE)
    journal.append("p", [NewEvent.of(1), NewEvent.of(2)])
    journal.flush()

    assert tag_names(stores) == []
    assert stores.tag_views.read_progress(PersistenceId("p")) == {}
