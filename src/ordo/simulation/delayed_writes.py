"""A tag view store that applies writes late, as an overloaded database or a GC pause would."""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import ClassVar

from ordo.errors import OrdoError
from ordo.tagging import TaggedEvent, TagProgress, TagSummary, TagViewStore, TagWrite
from ordo.types import PersistenceId, SequenceNr, Tag

logger = logging.getLogger(__name__)

AT_ONCE_CHECK_S = 0.05
"""How often a closing store asks whether to apply its pending writes at once."""


class DelayingTagViewStore:
    """Wraps a real TagViewStore; each tag_views write is applied after a random delay.

    Seed 000 lists what delays tag writes: GC pauses, batching, clock skew, an overloaded
    database. With probability `delay_probability` a write waits up to `max_delay_s`, so events
    reach tag_views out of TimeUUID order, and a persistence id's later events may land before
    its earlier ones. Progress is applied after the rows it covers, as in the real writer, and
    recovery's tag_scanning after both.
    Reads pass straight through; `on_applied` hears of every applied row write (the simulator
    logs when each event became visible). close() waits for every pending write. Thread-safe.
    """

    BACKGROUND_WRITES: ClassVar[bool] = False  # its own thread applies every write later

    def __init__(
        self,
        store: TagViewStore,
        *,
        max_delay_s: float,
        delay_probability: float,
        rng: random.Random,
        on_applied: Callable[[Sequence[TagWrite]], None] | None = None,
    ) -> None:
        self._store = store
        self._on_applied = on_applied
        self._max_delay_s = max_delay_s
        self._probability = delay_probability
        self._rng = rng
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._latest_due = 0.0
        self._condition = threading.Condition()
        self._is_closed = False
        self._at_once = False
        self._thread = threading.Thread(target=self._apply, name="ordo-delayed-writes", daemon=True)
        self._thread.start()

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        """Schedule the write after its random delay."""
        delay = (
            self._rng.uniform(0, self._max_delay_s) if self._rng.random() < self._probability else 0
        )
        due = time.monotonic() + delay
        self._schedule(due, lambda: self._apply_rows(writes))

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        """Schedule the progress after every row write scheduled so far."""
        self._schedule(self._latest_due, lambda: self._store.write_progress(progress))

    def announce(self, tag: Tag) -> None:
        """Pass the notification through (it may arrive before the rows: a harmless early wake)."""
        self._store.announce(tag)

    def read_progress(self, persistence_id: PersistenceId) -> Mapping[Tag, TagProgress]:
        """Read through."""
        return self._store.read_progress(persistence_id)

    def read_tag_scanning(self, persistence_id: PersistenceId) -> SequenceNr:
        """Read through."""
        return self._store.read_tag_scanning(persistence_id)

    def write_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Schedule it after every write scheduled so far: it says they are done (recovery)."""
        self._schedule(
            self._latest_due, lambda: self._store.write_tag_scanning(persistence_id, sequence_nr)
        )

    def tags(self) -> Sequence[TagSummary]:
        """Read through."""
        return self._store.tags()

    def tag_view_entries(self, tag: Tag) -> Iterator[TaggedEvent]:
        """Read through."""
        return self._store.tag_view_entries(tag)

    def heads(self, tag: Tag) -> Mapping[PersistenceId, int]:
        """Read through."""
        return self._store.heads(tag)

    def close(self, *, at_once: Callable[[], bool] = lambda: False) -> None:
        """Wait until every pending write has been applied, each at its time; then stop.

        Once `at_once()` is true (looked at every AT_ONCE_CHECK_S) every write left is applied
        without waiting for its time: a stopped writer process closes within the seconds its
        parent gives it before killing it, which lost the writes due later. `at_once` is polled
        rather than told by a signal's handler, which would take the lock this thread may hold.
        """
        with self._condition:
            self._is_closed = True
            self._condition.notify()
        while self._thread.is_alive():
            if not self._at_once and at_once():
                with self._condition:
                    self._at_once = True
                    self._condition.notify()
            self._thread.join(None if self._at_once else AT_ONCE_CHECK_S)

    def _apply_rows(self, writes: Sequence[TagWrite]) -> None:
        self._store.write_tag_views(writes)
        if self._on_applied is not None:
            self._on_applied(writes)

    def _schedule(self, due: float, write: Callable[[], None]) -> None:
        with self._condition:
            self._latest_due = max(self._latest_due, due)
            heapq.heappush(self._queue, (due, next(self._order), write))
            self._condition.notify()

    def _apply(self) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._is_closed:
                    self._condition.wait()
                if not self._queue:
                    return
                due, _, write = self._queue[0]
                wait = due - time.monotonic()
                if wait > 0 and not self._at_once:
                    self._condition.wait(wait)
                    continue
                heapq.heappop(self._queue)
            try:
                write()
            except OrdoError as exc:  # the run's checker will report the rows as lost
                logger.error("delayed tag write failed: error=%s", exc)
