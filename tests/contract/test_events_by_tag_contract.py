"""Events-by-tag queries against real storage, on both backends."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ordo import EventsByTagSettings, Journal, NewEvent
from ordo.clock import ManualClock, SkewedClock, SystemClock
from ordo.errors import (
    FutureOffsetError,
    InvalidIdentifierError,
    OffsetFormatError,
    StorageUnavailableError,
)
from ordo.query import EventEnvelope, EventsByTag, TagQuery, TagViewPage
from ordo.settings import QuerySettings
from ordo.storage.open import events_by_tag_at, init_storage
from ordo.storage.stores import Stores
from ordo.time import BucketSize, TimeUUID, format_first_time_bucket
from ordo.types import Tag
from tag_view_doubles import OutageAtReads

# Start a few buckets back, not at the default 2015: a NoOffset query reads every bucket.
RECENTLY = format_first_time_bucket(time.time_ns() // 1_000_000 - 3 * 3_600_000)
WRITE = EventsByTagSettings(first_time_bucket=RECENTLY, flush_interval=timedelta(0))
FAST = QuerySettings(
    eventual_consistency_delay=timedelta(milliseconds=100),
    refresh_interval=timedelta(milliseconds=50),
    back_track_interval=timedelta(milliseconds=200),
    back_track_period=timedelta(seconds=2),
)


@pytest.fixture
def queries(journal_url: str) -> Iterator[EventsByTag]:
    init_storage(journal_url)  # queries read an existing journal only
    with events_by_tag_at(journal_url, settings=FAST, events_by_tag=WRITE) as opened:
        yield opened


def _settled() -> None:
    time.sleep(0.15)  # past the 100 ms eventual-consistency delay


def _per_pid(envelopes: list[EventEnvelope]) -> dict[str, list[int]]:
    delivered: dict[str, list[int]] = {}
    for e in envelopes:
        delivered.setdefault(e.persistence_id, []).append(e.tag_pid_sequence_nr)
    return delivered


def test_current_delivers_every_tagged_event_in_offset_order(
    journal_factory: Callable[..., Journal], queries: EventsByTag
) -> None:
    journal = journal_factory(settings=WRITE)
    for i in range(30):
        journal.append(
            f"order-{i % 4}",
            [NewEvent.of({"i": i}, tags=["order", "all"], manifest="M", metadata={"n": i})],
        )
    journal.append("other", [NewEvent.of(b"\x00\x01", tags=["other"])])
    _settled()
    with queries.current("order") as stream:
        delivered = list(stream)
    assert [e.offset for e in delivered] == sorted(e.offset for e in delivered)
    assert _per_pid(delivered) == {
        f"order-{p}": list(range(1, 9 if p < 2 else 8)) for p in range(4)
    }
    first = delivered[0]
    assert (first.payload, first.metadata, first.manifest) == ({"i": 0}, {"n": 0}, "M")
    assert first.tags == {"all": 1, "order": 1}
    assert first.sequence_nr == 1
    assert abs(first.timestamp - datetime.now(UTC)) < timedelta(minutes=1)
    assert [e.payload for e in queries.current("other")] == [b"\x00\x01"]


def test_a_query_resumes_after_the_offset_it_is_given(
    journal_factory: Callable[..., Journal], queries: EventsByTag
) -> None:
    journal = journal_factory(settings=WRITE)
    for i in range(10):
        journal.append(f"p{i % 3}", [NewEvent.of(i, tags=["t"])])
    _settled()
    everything = list(queries.current("t"))
    middle = everything[4]
    assert list(queries.current("t", middle.offset)) == everything[5:]
    assert list(queries.current("t", str(middle.offset))) == everything[5:]
    assert list(queries.current("t", middle.timestamp - timedelta(seconds=1))) == everything


@pytest.mark.parametrize("progress", ["written", "lost with the first writer"])
def test_a_writer_whose_clock_is_behind_continues_an_id_after_its_offsets(
    journal_url: str,
    journal_factory: Callable[..., Journal],
    queries: EventsByTag,
    progress: str,
) -> None:
    """An id handed to a writer whose clock is 1 s behind gets offsets after its last one.

    Found by a stress run: the second writer stamped its events before the first writer's, so a
    query saw tag pid sequence nr 2 before 1, searched up to 2's offset only and failed with
    MissingTaggedEventError for an event it had; resumed from the error's offset it dropped 1
    as a duplicate. The floor comes from the tag progress, or, when the first writer died
    before writing its tag views, from the events recovery reads.
    """
    first = journal_factory(
        settings=WRITE
        if progress == "written"
        else replace(WRITE, flush_interval=timedelta(hours=1))
    )
    behind = SkewedClock(SystemClock(), skew_ns=-1_000_000_000)
    first.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])
    if progress == "written":
        first.close()
    second = journal_factory(settings=WRITE, clock=behind)
    second.append("p", [NewEvent.of(3, tags=["t"])], expected_sequence_nr=2)
    second.append("p", [NewEvent.of(4)], expected_sequence_nr=3)
    second.append("p", [NewEvent.of(5, tags=["t"])], expected_sequence_nr=4)

    offsets = [event.timeuuid for event in second.replay("p")]
    assert offsets == sorted(offsets)
    assert len(set(offsets)) == 5
    _settled()
    assert [e.payload for e in queries.current("t")] == [1, 2, 3, 5]


def test_journals_sharing_a_frozen_clock_give_each_event_its_own_offset(
    journal_url: str, journal_factory: Callable[..., Journal], stores: Stores
) -> None:
    """Offsets are unique within a tag by construction, so pages of one row lose no event.

    Every reader pages on the offset alone (`after` the last row's), which would skip the rest
    of a tie at a page boundary; tag_views would store a tie (its key has the persistence id
    and tag pid sequence nr too). Journals reading one instant still issue distinct offsets:
    each draws its own node and clock_seq.
    """
    frozen = ManualClock(time.time_ns() - 60 * 10**9)
    journals = [journal_factory(settings=WRITE, clock=frozen) for _ in range(3)]
    for _ in range(2):
        for j, journal in enumerate(journals):
            for p in range(2):
                journal.append(f"w{j}-p{p}", [NewEvent.of(j, tags=["t"])])
    rows = list(stores.tag_views.tag_view_entries(Tag("t")))
    assert len({row.timeuuid for row in rows}) == len(rows) == 12

    with events_by_tag_at(
        journal_url, settings=replace(FAST, page_size=1), events_by_tag=WRITE
    ) as queries:
        delivered = list(queries.current("t"))
    assert [(e.offset, e.persistence_id, e.tag_pid_sequence_nr) for e in delivered] == [
        (row.timeuuid, row.persistence_id, row.tag_pid_sequence_nr) for row in rows
    ]


def test_unknown_tags_give_an_empty_stream(queries: EventsByTag) -> None:
    assert list(queries.current("no-such-tag")) == []


@pytest.mark.parametrize(
    ("offset", "error"),
    [
        ("not-a-uuid", OffsetFormatError),
        ("6ba7b810-9dad-41d1-80b4-00c04fd430c8", OffsetFormatError),  # version 4
        (12345, OffsetFormatError),
        (datetime(2015, 1, 1), OffsetFormatError),  # naive  # noqa: DTZ001
        (datetime.now(UTC) + timedelta(days=1), FutureOffsetError),
    ],
)
def test_bad_offsets_are_refused(queries: EventsByTag, offset: object, error: type) -> None:
    with pytest.raises(error):
        queries.current("t", offset)


def test_a_bad_tag_is_refused(queries: EventsByTag) -> None:
    with pytest.raises(InvalidIdentifierError):
        queries.live("")


def test_a_query_changes_nothing_stored(
    journal_factory: Callable[..., Journal], queries: EventsByTag, stores: Stores
) -> None:
    journal = journal_factory(settings=WRITE)
    journal.append("p", [NewEvent.of(i, tags=["t"]) for i in range(5)])
    _settled()
    before = (stores.journal.summary(), list(stores.tag_views.tag_view_entries(Tag("t"))))
    list(queries.current("t"))
    with queries.live("t") as stream:
        next(stream)
    assert (stores.journal.summary(), list(stores.tag_views.tag_view_entries(Tag("t")))) == before


def test_a_closed_stream_delivers_nothing_it_had_read_ahead(
    journal_factory: Callable[..., Journal], queries: EventsByTag
) -> None:
    """close() ends the stream, from any thread: next() then ends at once.

    A poll reads up to PAGES_PER_POLL pages ahead (10,000 events by default), and next()
    after close() went on delivering them: a consumer stopped from another thread (a shutdown,
    the simulator's restarts) handled them all first.
    """
    journal = journal_factory(settings=WRITE)
    journal.append("p", [NewEvent.of(i, tags=["t"]) for i in range(5)])
    _settled()
    stream = queries.live("t")
    assert next(stream).payload == 0  # the poll read all five

    stream.close()

    assert next(stream, None) is None
    assert stream.next_batch() == []


def test_concurrent_appenders_race_a_tailing_live_query(
    journal_factory: Callable[..., Journal], queries: EventsByTag
) -> None:
    writers = [journal_factory(settings=WRITE) for _ in range(3)]
    expected: dict[str, int] = {}

    def append(writer: int) -> None:
        journal = writers[writer]
        for i in range(60):
            journal.append(f"w{writer}-p{i % 5}", [NewEvent.of(i, tags=["race"])])

    threads = [threading.Thread(target=append, args=(w,)) for w in range(3)]
    delivered: list[EventEnvelope] = []
    with queries.live("race") as stream:
        for thread in threads:
            thread.start()
        for w in range(3):
            for p in range(5):
                expected[f"w{w}-p{p}"] = 12
        deadline = time.monotonic() + 30
        while len(delivered) < 180 and time.monotonic() < deadline:
            delivered.append(next(stream))
        for thread in threads:
            thread.join()
    assert _per_pid(delivered) == {pid: list(range(1, n + 1)) for pid, n in expected.items()}


def test_pubsub_wakes_a_live_query_before_its_refresh(journal_url: str) -> None:
    write = EventsByTagSettings(
        first_time_bucket=RECENTLY, flush_interval=timedelta(0), pubsub_notification=True
    )
    slow = QuerySettings(
        eventual_consistency_delay=timedelta(milliseconds=50),
        refresh_interval=timedelta(seconds=30),
        back_track_interval=timedelta(seconds=30),
        back_track_long_interval=timedelta(seconds=60),
    )
    init_storage(journal_url)  # the query starts before anything is written
    with events_by_tag_at(journal_url, settings=slow, events_by_tag=write) as queries:
        with queries.live("ping") as stream:
            started = time.monotonic()
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys, datetime\n"
                    "from ordo import EventsByTagSettings, NewEvent, open_journal\n"
                    f"s = EventsByTagSettings(first_time_bucket={RECENTLY!r},"
                    " flush_interval=datetime.timedelta(0), pubsub_notification=True)\n"
                    "with open_journal(sys.argv[1], settings=s) as j:\n"
                    "    j.append('p', [NewEvent.of(1, tags=['ping'])])\n",
                    journal_url,
                ],
                check=True,
            )
            if not journal_url.startswith("postgresql"):
                # SQLite notifies within a process only: append here as well to wake it.
                with open_journal_here(journal_url, write) as journal:
                    journal.append("q", [NewEvent.of(2, tags=["ping"])])
            envelope = next(stream)
        assert time.monotonic() - started < 10
        assert envelope.tag_pid_sequence_nr == 1


def open_journal_here(url: str, settings: EventsByTagSettings) -> Journal:
    from ordo import open_journal

    return open_journal(url, settings=settings)


def test_async_iterators_deliver_the_same_events(
    journal_factory: Callable[..., Journal], queries: EventsByTag
) -> None:
    journal = journal_factory(settings=WRITE)
    journal.append("p", [NewEvent.of(i, tags=["t"]) for i in range(7)])
    _settled()

    async def collect() -> list[EventEnvelope]:
        return [e async for e in queries.current_async("t")]

    async def first_live() -> EventEnvelope:
        async for envelope in queries.live_async("t"):
            return envelope
        raise AssertionError

    assert asyncio.run(collect()) == list(queries.current("t"))
    assert asyncio.run(first_live()).tag_pid_sequence_nr == 1


def test_quiet_live_async_streams_leave_the_loops_default_executor_free(
    journal_factory: Callable[..., Journal], queries: EventsByTag
) -> None:
    """A live stream on a quiet tag waits in its thread until an event comes.

    Run in the loop's default executor, as many quiet live_async streams as it has threads
    (min(32, cpus + 4) unless the application sets its own) held every one of them: a later
    stream, on a tag with events, delivered nothing, and the application's own
    asyncio.to_thread calls waited for ever. The wait_for timeouts end such a hang.
    """
    journal = journal_factory(settings=WRITE)
    journal.append("p", [NewEvent.of(1, tags=["busy"])])
    _settled()
    executor_threads = 2

    async def quiet() -> None:
        async for _ in queries.live_async("quiet"):
            raise AssertionError

    async def first_busy() -> EventEnvelope:
        async for envelope in queries.live_async("busy"):
            return envelope
        raise AssertionError

    async def main() -> tuple[EventEnvelope, str]:
        executor = ThreadPoolExecutor(max_workers=executor_threads)
        asyncio.get_running_loop().set_default_executor(executor)
        waiting = [asyncio.create_task(quiet()) for _ in range(executor_threads)]
        await asyncio.sleep(0)  # each quiet stream starts its first wait
        try:
            envelope = await asyncio.wait_for(first_busy(), timeout=30)
            return envelope, await asyncio.wait_for(asyncio.to_thread(str, 7), timeout=30)
        finally:
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)

    envelope, text = asyncio.run(main())
    assert (envelope.persistence_id, text) == ("p", "7")


def test_next_after_a_read_failed_mid_poll_delivers_the_pages_read_before_it(
    journal_factory: Callable[..., Journal], stores: Stores
) -> None:
    """A stream "reads on from where it was" after StorageUnavailableError (docs/operations.md).

    The poll had already passed the rows of the pages read before the failing one: called
    again, next() went on after them, and they were never delivered (a current stream here,
    the same TagStream and TagQuery as a live one).
    """
    journal = journal_factory(settings=WRITE)
    for i in range(7):
        journal.append(f"p{i}", [NewEvent.of(i, tags=["t"])])
    _settled()
    # Read 1 is the first time bucket's (empty), read 2 the first page with rows.
    reader = OutageAtReads(stores.tag_view_reader, failing={3})
    queries = EventsByTag(reader, settings=replace(FAST, page_size=2), events_by_tag=WRITE)
    with queries.current("t") as stream:
        with pytest.raises(StorageUnavailableError, match="read 3"):
            next(stream)
        delivered = list(stream)
    assert [e.payload for e in delivered] == list(range(7))


def test_the_outage_logged_lasts_until_the_read_that_succeeded_ended(
    journal_factory: Callable[..., Journal], stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """The first read after an outage may wait for the server itself (up to the pool's 30 s):
    a 50 s outage was logged as "after 30.1 s", counted to that read's start.
    """
    journal = journal_factory(settings=WRITE)
    journal.append("p", [NewEvent.of(1, tags=["t"])])
    clock = ManualClock(time.time_ns() + SECOND_NS)  # past the eventual-consistency delay

    class WaitingForTheServer(OutageAtReads[EventEnvelope]):
        def read_tag_view(self, page: TagViewPage) -> Sequence[EventEnvelope]:
            if self.reads == 1:  # the read after the failed one waits 30 s, then succeeds
                clock.advance(30 * SECOND_NS)
            return super().read_tag_view(page)

    reader = WaitingForTheServer(stores.tag_view_reader, failing={1})
    queries = EventsByTag(reader, settings=FAST, events_by_tag=WRITE, clock=clock)
    caplog.set_level(logging.INFO, logger="ordo")
    with queries.current("t") as stream:
        with pytest.raises(StorageUnavailableError):
            next(stream)
        assert [e.payload for e in stream] == [1]
    assert "tag query reads the journal again after 30.0 s" in caplog.text


SECOND_NS = 10**9


@pytest.mark.parametrize("reach", ["back-track", "first-encounter look-back"])
def test_an_id_the_query_forgot_is_not_given_its_delivered_events_again(
    journal_factory: Callable[..., Journal], stores: Stores, reach: str
) -> None:
    """cleanup_old_persistence_ids forgets an id not seen for 30 s; reads that reach further
    back took its delivered event for a new one and delivered it again (seed 000: back tracks
    longer than the cleanup redeliver): a back-track of 60 s, or the look-back for earlier
    events of an id seen again after it was forgotten (new_persistence_id_scan_timeout).
    """
    hour_ns = 3_600 * SECOND_NS
    start_ns = (time.time_ns() // hour_ns - 1) * hour_ns + 60 * SECOND_NS  # one hour bucket
    clock = ManualClock(start_ns)
    journal = journal_factory(settings=WRITE, clock=clock)
    clock.advance(SECOND_NS)
    journal.append("quiet", [NewEvent.of(0, tags=["t"])])
    for i in range(1, 6):
        clock.advance(10 * SECOND_NS)
        journal.append("busy", [NewEvent.of(i, tags=["t"])])
    if reach == "first-encounter look-back":
        journal.append("quiet", [NewEvent.of(6, tags=["t"])])
    settings = replace(FAST, cleanup_old_persistence_ids=timedelta(seconds=30))
    if reach == "back-track":
        settings = replace(settings, back_track_period=timedelta(seconds=60))
    else:
        settings = replace(settings, new_persistence_id_scan_timeout=timedelta(seconds=1))
    query = TagQuery(
        stores.tag_view_reader,
        tag=Tag("t"),
        offset=TimeUUID.min_for_epoch_ns(start_ns),
        settings=settings,
        bucket_size=WRITE.bucket_size,
        first_time_bucket_ms=WRITE.first_time_bucket_ms,
        now_ns=start_ns,
        is_live=True,
    )
    delivered = [
        envelope.payload
        for now_ns in range(start_ns, start_ns + 70 * SECOND_NS, SECOND_NS // 4)
        for envelope in query.poll(now_ns).rows
    ]
    assert delivered == list(range(6 if reach == "back-track" else 7))


@pytest.mark.parametrize("bucket_size", [BucketSize.HOUR, BucketSize.DAY])
def test_a_query_from_no_offset_reads_the_whole_bucket_of_its_first_time_bucket(
    journal_url: str, journal_factory: Callable[..., Journal], bucket_size: BucketSize
) -> None:
    """A first time bucket inside a bucket (10:30 of an hour bucket) starts at that bucket.

    It is a bucket, as in Akka (TimeBucket rounds it down): the query started at 10:30 itself,
    so a#1 at 10:10 was never read and a#2 at 10:40, whose predecessor it searched for from
    10:30 on, failed with MissingTaggedEventError.
    """
    bucket_ms = bucket_size.key(time.time_ns() // 1_000_000) - 2 * bucket_size.millis
    clock = ManualClock((bucket_ms + 10 * 60_000) * 1_000_000)
    journal = journal_factory(settings=replace(WRITE, bucket_size=bucket_size), clock=clock)
    journal.append("a", [NewEvent.of(1, tags=["t"])])
    clock.advance(30 * 60 * 1_000_000_000)
    journal.append("a", [NewEvent.of(2, tags=["t"])])
    read = replace(
        WRITE,
        bucket_size=bucket_size,
        first_time_bucket=format_first_time_bucket(bucket_ms + 1_800_000),
    )
    settings = replace(FAST, gap_timeout=timedelta(0))
    with events_by_tag_at(journal_url, settings=settings, events_by_tag=read) as queries:
        assert [envelope.payload for envelope in queries.current("t")] == [1, 2]
