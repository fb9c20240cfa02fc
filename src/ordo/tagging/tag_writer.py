"""The tag writer: buffers each tag's events and writes them to tag_views in batches."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from ordo.errors import JournalClosedError, StorageError
from ordo.tagging.ports import TagViewWriter, TagWrite
from ordo.types import PersistenceId, Tag

logger = logging.getLogger(__name__)


class TagWriter:
    """Batches the events of one tag (seed 000: one TagWriter per tag, created on demand).

    A batch is written when it holds `max_message_batch_size` events, when an event of another
    time bucket arrives (a new bucket is a new partition), and when the owner calls flush() (the
    periodic flush of TagWriters). Progress is written after the tag_views rows, so a crash
    between the two leaves rows that recovery rewrites with the same numbers. Thread-safe: one
    lock guards the buffer and serializes the writes of this tag.
    """

    def __init__(
        self,
        tag: Tag,
        store: TagViewWriter,
        *,
        max_message_batch_size: int,
        on_written: Callable[[Tag], None] | None = None,
    ) -> None:
        self.tag = tag
        self._store = store
        self._max = max_message_batch_size
        self._on_written = on_written
        self._buffer: list[TagWrite] = []
        self._buffered = 0
        self._lock = threading.Lock()

    def add(self, writes: Sequence[TagWrite], *, is_immediate: bool = False) -> None:
        """Buffer writes of this tag (in sequence nr order per persistence id).

        Never raises a storage error: the events are already in the journal, so the appender
        must not see a failure. A failed write stays buffered and is retried by the next flush;
        a crash before that is what recovery repairs.
        """
        with self._lock:
            for write in writes:
                if self._buffer and write.time_bucket != self._buffer[-1].time_bucket:
                    self._try_flush_locked()
                self._buffer.append(write)
                self._buffered += write.events
                if self._buffered >= self._max:
                    self._try_flush_locked()
            if is_immediate:
                self._try_flush_locked()

    def try_flush(self) -> None:
        """Flush, logging (not raising) a storage error; the batch stays buffered."""
        with self._lock:
            self._try_flush_locked()

    def flush(self) -> None:
        """Write whatever is buffered now; on a storage error the batch stays buffered."""
        with self._lock:
            self._flush_locked()

    @property
    def buffered(self) -> int:
        """How many events wait to be written."""
        return self._buffered

    def _try_flush_locked(self) -> None:
        try:
            self._flush_locked()
        except StorageError as exc:
            logger.warning("tag write failed, will retry: tag=%s error=%s", self.tag, exc)

    def _flush_locked(self) -> None:
        batch = self._buffer
        if not batch:
            return
        self._store.write_tag_views(batch)
        self._buffer, self._buffered = [], 0
        latest: dict[PersistenceId, TagWrite] = {write.persistence_id: write for write in batch}
        self._store.write_progress([write.progress() for write in latest.values()])
        if self._on_written is not None:
            self._on_written(self.tag)


class TagWriters:
    """The tag writers of one journal, and the thread that flushes them every flush_interval.

    With flush_interval 0 every write is flushed at once (seed 000: "write each individually
    without delay"). `on_written(tag)` runs after each stored batch (pubsub notification).
    Thread-safe; close() flushes and stops the flusher thread.
    """

    def __init__(
        self,
        store: TagViewWriter,
        *,
        max_message_batch_size: int = 150,
        flush_interval: timedelta = timedelta(milliseconds=250),
        on_written: Callable[[Tag], None] | None = None,
    ) -> None:
        self._store = store
        self._max = max_message_batch_size
        self._on_written = on_written
        self._interval = flush_interval.total_seconds()
        self._writers: dict[Tag, TagWriter] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = None
        if self._interval > 0:
            self._flusher = threading.Thread(
                target=self._flush_periodically, name="ordo-tag-flusher", daemon=True
            )
            self._flusher.start()

    def write(self, writes: Sequence[TagWrite]) -> None:
        """Hand tag writes to their tags' writers (created on demand)."""
        if self._stopped.is_set():
            msg = "the tag writers are closed"
            raise JournalClosedError(msg)
        by_tag: dict[Tag, list[TagWrite]] = {}
        for write in writes:
            by_tag.setdefault(write.tag, []).append(write)
        for tag, tagged in by_tag.items():
            self._writer(tag).add(tagged, is_immediate=self._interval <= 0)

    def flush(self) -> None:
        """Write everything buffered in every tag writer; raises on a storage error."""
        for writer in self._snapshot():
            writer.flush()

    @property
    def buffered(self) -> int:
        """How many events wait to be written, over all tags."""
        return sum(writer.buffered for writer in self._snapshot())

    def close(self) -> None:
        """Stop the flusher thread and write what is buffered. Idempotent."""
        self._stopped.set()
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
                )
                self._writers[tag] = writer
            return writer

    def _snapshot(self) -> list[TagWriter]:
        with self._lock:
            return list(self._writers.values())

    def _flush_periodically(self) -> None:
        while not self._stopped.wait(self._interval):
            for writer in self._snapshot():
                writer.try_flush()
