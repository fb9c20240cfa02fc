"""The tag writer: buffers each tag's events and writes them to tag_views in batches."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from ordo.errors import (
    JournalClosedError,
    StorageError,
    TagWriteBacklogError,
    TagWriteFailedError,
)
from ordo.reconnection import is_outage
from ordo.tagging.outage_log import OutageLog
from ordo.tagging.ports import TagViewWriter, TagWrite
from ordo.types import PersistenceId, Tag

logger = logging.getLogger(__name__)

BACKLOG_BATCHES = 4
"""Full batches a tag writer holds for its background writer before appenders write them.

This is the back-pressure: appenders run ahead of a slow store by at most this many batches
per tag, then write (and wait) themselves.
"""

RETRY_INTERVAL = timedelta(milliseconds=250)
"""How often the flusher retries failed writes where flush_interval is 0.

Appenders write at once then, so no periodic flush would retry a write that failed: its events
waited for the tag's next append, for as long as none came.
"""


class TagWriter:
    """Batches the events of one tag (seed 000: one TagWriter per tag, created on demand).

    A batch is closed when it holds `max_message_batch_size` events and when an event of
    another time bucket arrives (a new bucket is a new partition); owners flush() the open batch
    periodically. Closed batches are written by whoever `on_full` hands them to (the journal's
    flusher thread, so that an append does not wait for tag writes, as Akka's TagWriter actor
    writes apart from the persisting actor), or at once by the appender when there is no
    `on_full` or `BACKLOG_BATCHES` are waiting. Batches of a tag are written one at a time in
    order, each rows first and progress after, so a crash between the two leaves rows that
    recovery rewrites with the same numbers. A batch is buffered until its progress is written:
    a write of either that fails keeps it for the next flush to retry, its outage logged by an
    OutageLog (one WARNING, not one per retry), unless it failed as no retry mends (not
    `is_outage`) and there is an `on_failure` to hear of it. Thread-safe.
    """

    def __init__(
        self,
        tag: Tag,
        store: TagViewWriter,
        *,
        max_message_batch_size: int,
        on_written: Callable[[Tag], None] | None = None,
        on_full: Callable[[TagWriter], None] | None = None,
        on_failure: Callable[[TagWriter, StorageError], None] | None = None,
    ) -> None:
        self.tag = tag
        self._store = store
        self._max = max_message_batch_size
        self._on_written = on_written
        self._on_full = on_full
        self._on_failure = on_failure
        self._outage = OutageLog(tag, logger)  # used under _write_lock
        self._open: list[TagWrite] = []
        self._open_events = 0
        self._buffered = 0  # events in the open and closed batches
        self._closed: list[tuple[list[TagWrite], int]] = []  # (batch, events), oldest first
        self._lock = threading.Lock()  # guards the batches
        self._write_lock = threading.Lock()  # one write of this tag at a time, in order

    def add(self, writes: Sequence[TagWrite], *, is_immediate: bool = False) -> int:
        """Buffer writes of this tag (in sequence nr order per persistence id); return `buffered`.

        Never raises a storage error: the events are already in the journal, so the appender
        must not see a failure. A failed write stays buffered and is retried by the next flush;
        a crash before that is what recovery repairs.
        """
        with self._lock:
            for write in writes:
                if self._open and write.time_bucket != self._open[-1].time_bucket:
                    self._close_open_locked()
                self._open.append(write)
                self._open_events += write.events
                self._buffered += write.events
                if self._open_events >= self._max:
                    self._close_open_locked()
            if is_immediate:
                self._close_open_locked()
            waiting = len(self._closed)
            buffered = self._buffered
        if not waiting:
            return buffered
        if is_immediate or self._on_full is None or waiting >= BACKLOG_BATCHES:
            self.write_full()
            return self.buffered
        self._on_full(self)
        return buffered

    def write_full(self) -> None:
        """Write the closed batches, reporting (not raising) a storage error."""
        self._try_write(self._write_closed_locked)

    def try_flush(self) -> None:
        """Flush, reporting (not raising) a storage error; the batch stays buffered."""
        self._try_write(self._flush_locked)

    def flush(self) -> None:
        """Write whatever is buffered now; on a storage error the batch stays buffered."""
        with self._write_lock:
            self._flush_locked()

    @property
    def buffered(self) -> int:
        """How many events wait to be written."""
        with self._lock:
            return self._buffered

    def _close_open_locked(self) -> None:
        if self._open:
            self._closed.append((self._open, self._open_events))
            self._open, self._open_events = [], 0

    def _try_write(self, write: Callable[[], None]) -> None:
        """Run `write` and report its failure, under the write lock (as the OutageLog needs)."""
        with self._write_lock:
            try:
                write()
            except StorageError as exc:
                if self._on_failure is not None and not is_outage(exc):
                    self._on_failure(self, exc)
                else:
                    self._outage.failed(exc, buffered=self.buffered)

    def _flush_locked(self) -> None:
        with self._lock:
            self._close_open_locked()
        self._write_closed_locked()

    def _write_closed_locked(self) -> None:
        """Write the closed batches in order, each rows first and progress after.

        A batch stays buffered until its progress is written too, so a retry writes its rows
        again (an upsert) and then the progress. Dropped once its rows were in, a batch whose
        progress write failed left a flush that found nothing to write and succeeded, and the
        recovery that flushed recorded tag_scanning past events without progress: the next
        journal's recovery, which takes their numbers from progress, numbered the tag again
        from an older tag pid sequence nr.
        """
        while True:
            with self._lock:
                if not self._closed:
                    return
                batch, events = self._closed.pop(0)
            latest: dict[PersistenceId, TagWrite] = {w.persistence_id: w for w in batch}
            try:
                self._store.write_tag_views(batch)
                self._store.write_progress([write.progress() for write in latest.values()])
            except BaseException:
                with self._lock:
                    self._closed.insert(0, (batch, events))
                raise
            with self._lock:
                self._buffered -= events
            self._outage.succeeded()
            if self._on_written is not None:
                self._on_written(self.tag)


class TagWriters:
    """The tag writers of one journal, and the thread that flushes them every flush_interval.

    Where the store asks for it (`BACKGROUND_WRITES`), the same thread also writes each full
    batch as soon as it closes, so appends do not wait for tag writes; otherwise the appender
    that fills a batch writes it. With flush_interval 0 every write is flushed at once by the
    appender (seed 000: "write each individually without delay"), and the thread only retries
    what failed, every RETRY_INTERVAL. `on_written(tag)` runs after each stored batch (pubsub
    notification). Thread-safe; close() flushes and stops the flusher thread.

    Failures: an outage (`is_outage`) is retried by the next flush, logged as a WARNING when it
    starts (and once a minute while it lasts) and at INFO when the tag's writes resume. A
    tag that holds more than `max_buffer_size` events unwritten makes admit() write its backlog
    first, and refuse (TagWriteBacklogError) if that fails. Any other StorageError is one no
    retry mends: it is logged once at ERROR, nothing is retried from then on, and admit(),
    flush() and close() raise TagWriteFailedError; the buffered events are in the journal, and
    recovery writes their tag views in the journal opened again.
    """

    def __init__(
        self,
        store: TagViewWriter,
        *,
        max_message_batch_size: int = 150,
        max_buffer_size: int = 100_000,
        flush_interval: timedelta = timedelta(milliseconds=250),
        on_written: Callable[[Tag], None] | None = None,
    ) -> None:
        self._store = store
        self._max = max_message_batch_size
        self._max_buffer = max_buffer_size
        self._on_written = on_written
        self._is_immediate = flush_interval <= timedelta(0)
        self._interval = (RETRY_INTERVAL if self._is_immediate else flush_interval).total_seconds()
        self._writers: dict[Tag, TagWriter] = {}
        self._full: dict[Tag, TagWriter] = {}  # writers with closed batches, for the flusher
        self._over: dict[Tag, TagWriter] = {}  # writers that held more than max_buffer_size
        self._failure: tuple[Tag, StorageError] | None = None  # the first that no retry mends
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = threading.Thread(
            target=self._flush_periodically, name="ordo-tag-flusher", daemon=True
        )
        self._flusher.start()
        self._is_background = not self._is_immediate and store.BACKGROUND_WRITES

    def admit(self) -> None:
        """Refuse an append before it writes anything, while the tag views cannot keep up.

        The journal calls it before each append: unless a tag went over `max_buffer_size` it
        costs two attribute reads. Raises TagWriteFailedError once a tag write failed for good;
        a tag over the bound has its backlog written here, by the appender (as an appender
        writes full batches past BACKLOG_BATCHES), and TagWriteBacklogError is raised if that
        write fails with an outage.
        """
        if (failure := self._failure) is not None:
            raise _failed(failure)
        if self._over:
            self._write_backlogs()

    def write(self, writes: Sequence[TagWrite]) -> None:
        """Hand tag writes to their tags' writers (created on demand).

        Once the writers have failed for good the writes are dropped: nothing would write them,
        and recovery writes them from the journal.
        """
        if self._stopped.is_set():
            msg = "the tag writers are closed"
            raise JournalClosedError(msg)
        if self._failure is not None:
            return
        by_tag: dict[Tag, list[TagWrite]] = {}
        for write in writes:
            by_tag.setdefault(write.tag, []).append(write)
        for tag, tagged in by_tag.items():
            writer = self._writer(tag)
            if writer.add(tagged, is_immediate=self._is_immediate) > self._max_buffer:
                with self._lock:
                    self._over[tag] = writer

    def flush(self) -> None:
        """Write everything buffered in every tag writer.

        Raises the StorageError of a write that failed with an outage (the rows stay buffered:
        flush again), and TagWriteFailedError once a write failed for good (this one or an
        earlier one): nothing is written from then on.
        """
        if (failure := self._failure) is not None:
            raise _failed(failure)
        for writer in self._snapshot():
            try:
                writer.flush()
            except StorageError as exc:
                if is_outage(exc):
                    raise
                raise self._fail(writer, exc) from exc

    @property
    def buffered(self) -> int:
        """How many events wait to be written, over all tags."""
        return sum(writer.buffered for writer in self._snapshot())

    def close(self) -> None:
        """Stop the flusher thread and write what is buffered, raising as flush() does.

        Once the writers have failed for good it writes nothing and raises TagWriteFailedError
        (as Python's files raise at close() what they could not write).
        """
        with self._wake:
            self._stopped.set()
            self._wake.notify()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        self.flush()

    def _writer(self, tag: Tag) -> TagWriter:
        with self._lock:
            writer = self._writers.get(tag)
            if writer is None:
                writer = TagWriter(
                    tag,
                    self._store,
                    max_message_batch_size=self._max,
                    on_written=self._on_written,
                    on_full=self._hand_over if self._is_background else None,
                    on_failure=self._stop,
                )
                self._writers[tag] = writer
            return writer

    def _hand_over(self, writer: TagWriter) -> None:
        with self._wake:
            self._full[writer.tag] = writer
            self._wake.notify()

    def _stop(self, writer: TagWriter, error: StorageError) -> None:
        """A write of the flusher or an appender failed as no retry mends."""
        self._fail(writer, error)  # logged there, raised by the next admit()

    def _fail(self, writer: TagWriter, error: StorageError) -> TagWriteFailedError:
        """Stop writing for good; the error to raise (of the first such failure, kept).

        The first failure is logged, and ends the flusher thread.
        """
        with self._wake:
            if (failure := self._failure) is not None:
                return _failed(failure)
            self._failure = failure = (writer.tag, error)
            self._wake.notify()
        logger.error(
            "tag write failed, no retry mends it; appends are refused until the journal is "
            "opened again: tag=%s buffered=%d error=%s",
            writer.tag,
            writer.buffered,
            error,
        )
        return _failed(failure)

    def _write_backlogs(self) -> None:
        """Write the backlog of each tag over max_buffer_size, or refuse the append."""
        with self._lock:
            over = list(self._over.values())
        for writer in over:
            if writer.buffered > self._max_buffer:
                try:
                    writer.flush()
                except StorageError as exc:
                    if not is_outage(exc):
                        raise self._fail(writer, exc) from exc
                    raise TagWriteBacklogError(
                        tag=writer.tag,
                        buffered=writer.buffered,
                        limit=self._max_buffer,
                        cause=exc,
                    ) from exc
            with self._lock:
                if self._over.get(writer.tag) is writer and writer.buffered <= self._max_buffer:
                    del self._over[writer.tag]

    def _snapshot(self) -> list[TagWriter]:
        with self._lock:
            return list(self._writers.values())

    def _flush_periodically(self) -> None:
        next_flush = time.monotonic() + self._interval
        while True:
            with self._wake:
                self._wake.wait_for(
                    lambda: self._full or self._stopped.is_set() or self._failure is not None,
                    timeout=max(0.0, next_flush - time.monotonic()),
                )
                if self._stopped.is_set() or self._failure is not None:
                    return  # failed for good: nothing is retried
                full, self._full = list(self._full.values()), {}
            for writer in full:
                writer.write_full()
            if time.monotonic() >= next_flush:
                for writer in self._snapshot():
                    writer.try_flush()
                next_flush = time.monotonic() + self._interval


def _failed(failure: tuple[Tag, StorageError]) -> TagWriteFailedError:
    """A new error for a kept failure (one instance raised in many threads gathers tracebacks)."""
    tag, cause = failure
    error = TagWriteFailedError(tag=tag, cause=cause)
    error.__cause__ = cause
    return error
