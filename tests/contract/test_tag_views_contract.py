"""The tag views' contract, run once per backend through `journal_url`.

What the tag writer puts in tag_views and tag_write_progress, and when: after flush(), at a full
batch, at a new time bucket, at once with flush_interval 0, periodically, and on close.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from ordo import BucketSize, EventsByTagSettings, Journal, NewEvent, PersistedEvent
from ordo.clock import ManualClock, SystemClock
from ordo.errors import StorageError
from ordo.journal.recovery import tag_writes
from ordo.query import TagViewReader
from ordo.storage.open import Stores
from ordo.tagging import TaggedEvent, TagProgress, TagViewStore, TagWrite
from ordo.time import TimeUUID, TimeUUIDGenerator
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket

JournalFactory = Callable[..., Journal]

IMMEDIATE = EventsByTagSettings(flush_interval=timedelta(0))
BATCHED = EventsByTagSettings(flush_interval=timedelta(hours=1), max_message_batch_size=3)
MINUTE_BUCKETS = EventsByTagSettings(
    bucket_size=BucketSize.MINUTE, flush_interval=timedelta(hours=1), max_message_batch_size=100
)
MINUTE_START_NS = int(datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC).timestamp()) * 10**9
MINUTE_NS = 60 * 10**9
STILL_NS = MINUTE_START_NS


def still_clock() -> ManualClock:
    """A clock that does not move: no new time bucket ever cuts a batch short."""
    return ManualClock(STILL_NS)


def tag_names(stores: Stores) -> list[str]:
    return [summary.tag for summary in stores.tag_views.tags()]


def entries(stores: Stores, tag: str) -> list[TaggedEvent]:
    return list(stores.tag_views.tag_view_entries(tag))


def expected_entries(
    events: Sequence[PersistedEvent], tag: str, bucket_size: BucketSize
) -> list[TaggedEvent]:
    """The tag_views rows the journal events call for, in (bucket, timeuuid) order."""
    rows = [
        TaggedEvent(
            tag=tag,
            time_bucket=bucket_size.key(e.timeuuid.epoch_ms),
            timeuuid=e.timeuuid,
            persistence_id=e.persistence_id,
            sequence_nr=e.sequence_nr,
            tag_pid_sequence_nr=e.tags[tag],
        )
        for e in events
        if tag in e.tags
    ]
    return sorted(rows, key=lambda r: (r.time_bucket, r.timeuuid))


def wait_for_progress(stores: Stores, persistence_id: str, tag: str, sequence_nr: int) -> None:
    """Wait until the tag's progress of the id reaches `sequence_nr` (at most 10 s).

    Where the store asks for background writes (PostgreSQL) a full batch is written by the
    flusher thread a moment after the append that filled it; progress is written last.
    """
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        progress = stores.tag_views.read_progress(persistence_id).get(tag)
        if progress is not None and progress.sequence_nr >= sequence_nr:
            return
        time.sleep(0.005)


def all_events(journal: Journal) -> list[PersistedEvent]:
    return [e for pid in journal.persistence_ids() for e in journal.replay(pid)]


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

    numbers = {
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

    def first_after(reader: TagViewReader[object], after: int, up_to: int) -> int | None:
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
    assert stores.tag_views.read_progress("a") == {
        "t": TagProgress(
            persistence_id="a",
            tag="t",
            sequence_nr=5,
            tag_pid_sequence_nr=5,
            timeuuid=a_events[4].timeuuid,
        ),
        "u": TagProgress(
            persistence_id="a",
            tag="u",
            sequence_nr=6,
            tag_pid_sequence_nr=1,
            timeuuid=a_events[5].timeuuid,
        ),
    }
    assert stores.tag_views.read_progress("b") == {
        "u": TagProgress(
            persistence_id="b",
            tag="u",
            sequence_nr=1,
            tag_pid_sequence_nr=1,
            timeuuid=b_events[0].timeuuid,
        ),
    }
    assert stores.tag_views.read_progress("nobody") == {}


def race_in_opposite_orders(
    ids: list[str], rounds: int, write: Callable[[list[str], int], None]
) -> list[BaseException]:
    """Run `write(ids, round)` from two threads in step, one with the ids reversed.

    Two journals write the same ids (or one recovers what another writes); their upserts must
    lock rows in one order, or PostgreSQL stops one of two that lock the same rows in opposite
    orders as a deadlock. Returns what the threads raised.
    """
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def run(order: list[str]) -> None:
        try:
            for n in range(1, rounds + 1):
                barrier.wait(10)
                write(order, n)
        except BaseException as exc:  # reported by the caller, with the other thread's
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(order,)) for order in (ids, ids[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_concurrent_progress_writes_over_the_same_rows_in_any_order_all_succeed(
    stores: Stores,
) -> None:
    pids = [f"p{n:02d}" for n in range(30)]
    rounds = 40

    def write(order: list[str], n: int) -> None:
        stores.tag_views.write_progress(
            [
                TagProgress(
                    persistence_id=pid,
                    tag="t",
                    sequence_nr=n,
                    tag_pid_sequence_nr=n,
                    timeuuid=TimeUUID.min_for_epoch_ns(n * 10**9),
                )
                for pid in order
            ]
        )

    failures = race_in_opposite_orders(pids, rounds, write)

    assert not failures, failures[0]
    assert {stores.tag_views.read_progress(pid)["t"].sequence_nr for pid in pids} == {rounds}


def test_concurrent_writes_of_the_same_new_tag_view_rows_in_any_order_all_succeed(
    stores: Stores,
) -> None:
    pids = [f"p{n:02d}" for n in range(30)]
    rounds = 40
    uuids = TimeUUIDGenerator(SystemClock())
    events = {
        pid: [
            PersistedEvent(
                persistence_id=PersistenceId(pid),
                sequence_nr=SequenceNr(n),
                timeuuid=uuids.next(),
                writer_uuid="w",
                serializer="json",
                manifest="",
                payload_bytes=b"{}",
                metadata_json=None,
                tags={Tag("t"): TagPidSequenceNr(n)},
            )
            for n in range(1, rounds + 1)
        ]
        for pid in pids
    }
    for written in events.values():
        stores.journal.write_events(written, expected_sequence_nr=SequenceNr(0))

    def write(order: list[str], n: int) -> None:  # both threads insert the round's new rows
        stores.tag_views.write_tag_views(
            [
                write
                for pid in order
                for write in tag_writes(
                    [(events[pid][n - 1], Tag("t"), TagPidSequenceNr(n))], BucketSize.HOUR
                )
            ]
        )

    failures = race_in_opposite_orders(pids, rounds, write)

    assert not failures, failures[0]
    assert len(entries(stores, "t")) == len(pids) * rounds


def test_untagged_events_have_no_tag_views(journal_factory: JournalFactory, stores: Stores) -> None:
    journal = journal_factory(settings=IMMEDIATE)
    journal.append("p", [NewEvent.of(1), NewEvent.of(2)])
    journal.flush()

    assert tag_names(stores) == []
    assert stores.tag_views.read_progress("p") == {}


# --- when rows are written ----------------------------------------------------------------------


def test_a_partial_batch_waits_for_flush(journal_factory: JournalFactory, stores: Stores) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])

    assert entries(stores, "t") == []
    assert tag_names(stores) == []
    assert stores.tag_views.read_progress("p") == {}

    journal.flush()

    assert [(r.sequence_nr, r.tag_pid_sequence_nr) for r in entries(stores, "t")] == [
        (1, 1),
        (2, 2),
    ]
    assert stores.tag_views.read_progress("p")["t"].tag_pid_sequence_nr == 2


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
    assert stores.tag_views.read_progress("p")["t"].sequence_nr == 2
    assert stores.tag_views.read_progress("q")["t"].sequence_nr == 1


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
        assert stores.tag_views.read_progress("p")["t"].tag_pid_sequence_nr == n


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
    assert stores.tag_views.read_progress("p")["t"].sequence_nr == 2

    journal.flush()

    rows = entries(stores, "t")
    assert [(r.sequence_nr, r.time_bucket) for r in rows][2:] == [(3, first_minute + 60_000)]
    assert stores.tag_views.read_progress("p")["t"].sequence_nr == 3


def test_the_flusher_writes_buffered_events_by_itself(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    settings = EventsByTagSettings(flush_interval=timedelta(milliseconds=20))
    journal = journal_factory(settings=settings)
    journal.append("p", [NewEvent.of(1, tags=["t"])])

    deadline = time.monotonic() + 10
    while not entries(stores, "t") and time.monotonic() < deadline:
        time.sleep(0.01)

    assert [r.sequence_nr for r in entries(stores, "t")] == [1]


def test_close_writes_what_is_buffered(journal_factory: JournalFactory, stores: Stores) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["t"])])
    assert entries(stores, "t") == []

    journal.close()

    assert [r.sequence_nr for r in entries(stores, "t")] == [1]
    assert stores.tag_views.read_progress("p")["t"].sequence_nr == 1


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
    assert stores.tag_views.read_progress("p")["t"].tag_pid_sequence_nr == 2


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
    assert stores.tag_views.read_progress("p")["t"].sequence_nr == 7


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


class FailingTagViews:
    """A TagViewStore whose next `failures` tag_views writes fail like a lost connection."""

    def __init__(self, inner: TagViewStore, failures: int) -> None:
        self._inner = inner
        self.failures = failures

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        if self.failures > 0:
            self.failures -= 1
            msg = "injected: the tag_views write failed"
            raise StorageError(msg)
        self._inner.write_tag_views(writes)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


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
    assert stores.tag_views.read_progress("p")["t"].sequence_nr == 1
