"""The tag writer: buffers each tag's events and writes them to tag_views in batches."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import timedelta

from ordo.errors import JournalClosedError, StorageError
from ordo.tagging.ports import TaggedEvent, TagProgress, TagViewStore
from ordo.types import PersistenceId, Tag

logger = logging.getLogger(__name__)


class TagWriter:
    """Batches the events of one tag (seed 000: one TagWriter per tag, created on demand).

    A batch is written when it reaches `max_message_batch_size`, when an event of another time
    bucket arrives (a new bucket is a new partition), and when the owner calls flush() (the
    periodic flush of TagWriters). Progress is written after the tag_views rows, so a crash
    between the two leaves rows that recovery rewrites with the same numbers. Thread-safe: one
    lock guards the buffer and serializes the writes of this tag.
    """

    def __init__(self, tag: Tag, store: TagViewStore, *, max_message_batch_size: int) -> None:
        self.tag = tag
        self._store = store
        self._max = max_message_batch_size
        self._buffer: list[TaggedEvent] = []
        self._lock = threading.Lock()

    def add(self, events: Sequence[TaggedEvent]) -> None:
        """Buffer events of this tag (in sequence nr order per persistence id)."""
        with self._lock:
            for event in events:
                if self._buffer and event.time_bucket != self._buffer[-1].time_bucket:
                    self._flush_locked()
                self._buffer.append(event)
                if len(self._buffer) >= self._max:
                    self._flush_locked()

    def flush(self) -> None:
        """Write whatever is buffered now; on a storage error the batch stays buffered."""
        with self._lock:
            self._flush_locked()

    @property
    def buffered(self) -> int:
        """How many events wait to be written."""
        return len(self._buffer)

    def _flush_locked(self) -> None:
        batch = self._buffer
        if not batch:
            return
        self._store.write_tag_views(batch)
        self._buffer = []
        latest: dict[PersistenceId, TaggedEvent] = {}
        for event in batch:
            latest[event.persistence_id] = event
        self._store.write_progress(
            [
                TagProgress(
                    persistence_id=e.persistence_id,
                    tag=e.tag,
                    sequence_nr=e.sequence_nr,
                    tag_pid_sequence_nr=e.tag_pid_sequence_nr,
                    timeuuid=e.timeuuid,
                )
                for e in latest.values()
            ]
        )


class TagWriters:
    """The tag writers of one journal, and the thread that flushes them every flush_interval.

    With flush_interval 0 every write is flushed at once (seed 000: "write each individually
    without delay"). Thread-safe; close() flushes and stops the flusher thread.
    """

    def __init__(
        self,
        store: TagViewStore,
        *,
        max_message_batch_size: int = 150,
        flush_interval: timedelta = timedelta(milliseconds=250),
    ) -> None:
        self._store = store
        self._max = max_message_batch_size
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

    def write(self, events: Sequence[TaggedEvent]) -> None:
        """Hand tagged events to their tags' writers (created on demand)."""
        if self._stopped.is_set():
            msg = "the tag writers are closed"
            raise JournalClosedError(msg)
        by_tag: dict[Tag, list[TaggedEvent]] = {}
        for event in events:
            by_tag.setdefault(event.tag, []).append(event)
        for tag, tagged in by_tag.items():
            writer = self._writer(tag)
            writer.add(tagged)
            if self._interval <= 0:
                writer.flush()

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
                writer = TagWriter(tag, self._store, max_message_batch_size=self._max)
                self._writers[tag] = writer
            return writer

    def _snapshot(self) -> list[TagWriter]:
        with self._lock:
            return list(self._writers.values())

    def _flush_periodically(self) -> None:
        while not self._stopped.wait(self._interval):
            for writer in self._snapshot():
                try:
                    writer.flush()
                except StorageError as exc:
                    logger.warning("tag write failed, retrying: tag=%s error=%s", writer.tag, exc)
