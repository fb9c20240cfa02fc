"""The tag writer against an in-memory TagViewStore: batching, buckets, progress, failures."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import ClassVar

import pytest

from ordo.errors import (
    JournalClosedError,
    StorageError,
    StorageUnavailableError,
    TagWriteBacklogError,
    TagWriteFailedError,
)
from ordo.tagging import TagProgress, TagWrite, TagWriter, TagWriters
from ordo.tagging.tag_writer import BACKLOG_BATCHES
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket
from processing_support import wait_for

HOUR_MS = 3_600_000
BASE_NS = 1_700_000_000_000_000_000


class MemoryTagViews:
    """Records every write, in order; the next `failures` tag_views writes raise `error`, an
    outage unless a test says otherwise."""

    BACKGROUND_WRITES: ClassVar[bool] = True  # TagWriters hand full batches to their flusher

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.batches: list[list[TagWrite]] = []
        self.progress: list[list[TagProgress]] = []
        self.failures = 0
        self.error: type[StorageError] = StorageUnavailableError
        self._lock = threading.Lock()

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        with self._lock:
            if self.failures > 0:
                self.failures -= 1
                msg = "injected failure"
                raise self.error(msg)
            self.kinds.append("rows")
            self.batches.append(list(writes))

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        with self._lock:
            self.kinds.append("progress")
            self.progress.append(list(progress))

    def rows(self) -> list[TagWrite]:
        with self._lock:
            return [row for batch in self.batches for row in batch]


def tagged(
    pid: str, first: int, last: int | None = None, *, tag: str = "t", hour: int = 0
) -> TagWrite:
    """A write of events first..last (all tagged) of `pid`, numbered like their sequence nrs."""
    last = first if last is None else last
    return TagWrite(
        tag=Tag(tag),
        time_bucket=TimeBucket((BASE_NS // 10**6 // HOUR_MS + hour) * HOUR_MS),
        persistence_id=PersistenceId(pid),
        from_sequence_nr=SequenceNr(first),
        to_sequence_nr=SequenceNr(last),
        events=last - first + 1,
        last_tag_pid_sequence_nr=TagPidSequenceNr(last),
        last_timeuuid=TimeUUID.min_for_epoch_ns(BASE_NS + hour * HOUR_MS * 10**6 + last * 1000),
    )


def progress_for(write: TagWrite) -> TagProgress:
    return TagProgress(
        persistence_id=write.persistence_id,
        tag=write.tag,
        sequence_nr=write.to_sequence_nr,
        tag_pid_sequence_nr=write.last_tag_pid_sequence_nr,
        timeuuid=write.last_timeuuid,
    )


def test_events_wait_in_the_buffer_until_flush() -> None:
    store = MemoryTagViews()
    writer = TagWriter(Tag("t"), store, max_message_batch_size=10)
    events = [tagged("a", 1), tagged("b", 1), tagged("a", 2)]

    writer.add(events)
    assert store.kinds == []
    assert writer.buffered == 3

    writer.flush()

    assert store.kinds == ["rows", "progress"]
    assert store.batches == [events]
    assert sorted(store.progress[0], key=lambda p: p.persistence_id) == [
        progress_for(events[2]),
        progress_for(events[1]),
    ]
    assert writer.buffered == 0
    writer.flush()
    assert store.kinds == ["rows", "progress"]  # nothing more to write


def test_a_full_batch_is_written_at_once() -> None:
    store = MemoryTagViews()
    writer = TagWriter(Tag("t"), store, max_message_batch_size=2)

    writer.add([tagged("a", n) for n in range(1, 6)])

    assert [[w.from_sequence_nr for w in batch] for batch in store.batches] == [[1, 2], [3, 4]]
    assert writer.buffered == 1


def test_batch_size_counts_events_not_writes() -> None:
    store = MemoryTagViews()
    writer = TagWriter(Tag("t"), store, max_message_batch_size=5)

    writer.add([tagged("a", 1, 3)])
    assert store.batches == []
    writer.add([tagged("b", 1, 2)])

    assert store.batches == [[tagged("a", 1, 3), tagged("b", 1, 2)]]
    assert writer.buffered == 0
    writer.add([tagged("a", 4, 10)])  # one write larger than a batch is written whole
    assert store.batches[1:] == [[tagged("a", 4, 10)]]


def test_a_new_time_bucket_writes_the_previous_buckets_batch() -> None:
    store = MemoryTagViews()
    writer = TagWriter(Tag("t"), store, max_message_batch_size=100)

    writer.add([tagged("a", 1), tagged("b", 1)])
    writer.add([tagged("a", 2, hour=1)])

    assert store.rows() == [tagged("a", 1), tagged("b", 1)]
    writer.add([tagged("a", 3, hour=1), tagged("a", 4, hour=2)])
    assert store.rows()[2:] == [tagged("a", 2, hour=1), tagged("a", 3, hour=1)]
    for batch in store.batches:
        assert len({e.time_bucket for e in batch}) == 1


def test_progress_is_written_after_the_rows() -> None:
    store = MemoryTagViews()
    writer = TagWriter(Tag("t"), store, max_message_batch_size=3)

    writer.add([tagged("a", n) for n in range(1, 8)])
    writer.flush()

    assert store.kinds == ["rows", "progress"] * 3
    assert store.progress == [
        [progress_for(tagged("a", 3))],
        [progress_for(tagged("a", 6))],
        [progress_for(tagged("a", 7))],
    ]


def test_a_failed_write_keeps_the_batch_for_the_next_flush() -> None:
    store = MemoryTagViews()
    writer = TagWriter(Tag("t"), store, max_message_batch_size=10)
    writer.add([tagged("a", 1), tagged("a", 2)])
    store.failures = 1

    with pytest.raises(StorageError):
        writer.flush()

    assert store.kinds == []
    assert writer.buffered == 2
    writer.add([tagged("a", 3)])
    writer.flush()
    assert store.batches == [[tagged("a", 1), tagged("a", 2)], [tagged("a", 3)]]
    assert store.progress == [[progress_for(tagged("a", 2))], [progress_for(tagged("a", 3))]]


def test_tag_writers_route_each_tag_to_its_own_batches() -> None:
    store = MemoryTagViews()
    writers = TagWriters(store, max_message_batch_size=2, flush_interval=timedelta(hours=1))
    try:
        writers.write([tagged("a", 1, tag="x"), tagged("a", 1, tag="y"), tagged("a", 2, tag="x")])

        wait_for(store.rows)  # the flusher writes a full batch long before the interval
        assert store.rows() == [tagged("a", 1, tag="x"), tagged("a", 2, tag="x")]
        assert writers.buffered == 1
        writers.flush()
        assert writers.buffered == 0
        for batch in store.batches:
            assert len({e.tag for e in batch}) == 1
    finally:
        writers.close()


def test_flush_interval_0_writes_every_event_at_once() -> None:
    store = MemoryTagViews()
    writers = TagWriters(store, max_message_batch_size=100, flush_interval=timedelta(0))

    writers.write([tagged("a", 1)])
    assert store.rows() == [tagged("a", 1)]
    writers.write([tagged("a", 2), tagged("b", 1)])
    assert store.rows() == [tagged("a", 1), tagged("a", 2), tagged("b", 1)]
    assert writers.buffered == 0
    writers.close()


def test_the_flusher_writes_periodically_and_survives_storage_errors() -> None:
    store = MemoryTagViews()
    store.failures = 2
    writers = TagWriters(
        store, max_message_batch_size=100, flush_interval=timedelta(milliseconds=5)
    )
    try:
        writers.write([tagged("a", 1)])
        wait_for(lambda: store.rows())
        assert store.rows() == [tagged("a", 1)]
        assert store.failures == 0

        writers.write([tagged("a", 2)])
        wait_for(lambda: len(store.rows()) == 2)
        assert store.rows() == [tagged("a", 1), tagged("a", 2)]
    finally:
        writers.close()


def test_close_writes_what_is_buffered_and_stops_the_flusher() -> None:
    store = MemoryTagViews()
    before = set(threading.enumerate())
    writers = TagWriters(store, max_message_batch_size=100, flush_interval=timedelta(hours=1))
    flushers = set(threading.enumerate()) - before
    writers.write([tagged("a", 1)])

    writers.close()
    writers.close()  # idempotent

    assert store.rows() == [tagged("a", 1)]
    assert [t.name for t in flushers] == ["ordo-tag-flusher"]
    assert not any(t.is_alive() for t in flushers)
    with pytest.raises(JournalClosedError):
        writers.write([tagged("a", 2)])


class BlockingTagViews(MemoryTagViews):
    """Each tag_views write waits until `release` is set; `entered` says one is waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        self.entered.set()
        assert self.release.wait(10), "the test never released the store"
        super().write_tag_views(writes)


def test_an_append_does_not_wait_for_its_full_batch_to_be_written() -> None:
    store = BlockingTagViews()
    writers = TagWriters(store, max_message_batch_size=2, flush_interval=timedelta(hours=1))
    try:
        writers.write([tagged("a", 1), tagged("a", 2)])  # returns while the store is blocked
        assert store.entered.wait(10), "the flusher thread did not start the write"
        writers.write([tagged("a", 3)])
        assert store.rows() == []

        store.release.set()
        wait_for(lambda: store.progress)
        assert store.batches == [[tagged("a", 1), tagged("a", 2)]]
    finally:
        store.release.set()
        writers.close()
    assert store.batches[1:] == [[tagged("a", 3)]]


def test_appenders_wait_once_the_backlog_of_full_batches_is_reached() -> None:
    store = BlockingTagViews()
    writers = TagWriters(store, max_message_batch_size=1, flush_interval=timedelta(hours=1))
    try:
        writers.write([tagged("a", 1)])
        assert store.entered.wait(10)
        # The flusher holds batch 1; the appender may run ahead by BACKLOG_BATCHES more.
        appender = threading.Thread(
            target=writers.write,
            args=([tagged("a", n) for n in range(2, 3 + BACKLOG_BATCHES)],),
        )
        appender.start()
        appender.join(0.2)
        assert appender.is_alive(), "the appender ran ahead of a blocked store without limit"

        store.release.set()
        appender.join(10)
        assert not appender.is_alive()
        writers.flush()
    finally:
        store.release.set()
        writers.close()
    assert store.batches == [[tagged("a", n)] for n in range(1, 3 + BACKLOG_BATCHES)]
    assert [p[0].sequence_nr for p in store.progress] == list(range(1, 3 + BACKLOG_BATCHES))


class SerializedTagViews(MemoryTagViews):
    """A store whose writes serialize in this process, as SQLite's: no background writes."""

    BACKGROUND_WRITES: ClassVar[bool] = False


def test_where_writes_serialize_in_process_the_appender_writes_its_full_batch() -> None:
    store = SerializedTagViews()
    writers = TagWriters(store, max_message_batch_size=2, flush_interval=timedelta(hours=1))
    try:
        writers.write([tagged("a", 1), tagged("a", 2), tagged("a", 3)])

        assert store.batches == [[tagged("a", 1), tagged("a", 2)]]
        assert writers.buffered == 1
    finally:
        writers.close()


def test_a_write_no_retry_mends_stops_the_writers_for_good(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tag_views table dropped or refused was retried every flush interval, a WARNING each
    time, for ever, while the buffer grew: it is logged once and nothing is tried again."""
    store = MemoryTagViews()
    store.failures, store.error = 1_000, StorageError  # a plain StorageError: no outage
    before = set(threading.enumerate())
    writers = TagWriters(
        store, max_message_batch_size=100, flush_interval=timedelta(milliseconds=5)
    )
    flushers = set(threading.enumerate()) - before
    writers.write([tagged("a", 1)])

    wait_for(lambda: not any(t.is_alive() for t in flushers), what="the flusher to stop retrying")
    with pytest.raises(TagWriteFailedError) as refused:
        writers.admit()
    assert (refused.value.tag, str(refused.value.cause)) == ("t", "injected failure")
    assert "no retry mends" in str(refused.value)
    writers.write([tagged("a", 2)])  # an append that raced the failure: recovery's to write
    with pytest.raises(TagWriteFailedError):
        writers.flush()
    with pytest.raises(TagWriteFailedError):
        writers.close()
    assert (store.failures, writers.buffered, store.rows()) == (999, 1, [])
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.levelno for r in errors] == [logging.ERROR]
    assert "tag=t" in errors[0].getMessage()


def test_a_tag_over_max_buffer_size_is_refused_until_its_backlog_is_written() -> None:
    """An outage of the tag views that appends outlive grew the buffer without bound."""
    store = MemoryTagViews()
    store.failures = 1_000_000
    writers = TagWriters(
        store, max_message_batch_size=2, max_buffer_size=3, flush_interval=timedelta(hours=1)
    )
    try:
        writers.write([tagged("a", 1, 2)])  # a full batch: the flusher fails to write it
        writers.admit()  # 2 buffered: under the bound
        writers.write([tagged("a", 3, 4)])

        with pytest.raises(TagWriteBacklogError) as refused:
            writers.admit()  # the appender tried to write the backlog itself
        error = refused.value
        assert (error.tag, error.buffered, error.limit) == ("t", 4, 3)
        assert isinstance(error.cause, StorageUnavailableError)
        assert "4 events wait" in str(error)
        assert "injected failure" in str(error)

        store.failures = 0  # the outage ends
        writers.admit()
        assert writers.buffered == 0
        assert store.rows() == [tagged("a", 1, 2), tagged("a", 3, 4)]
    finally:
        writers.close()
