"""Events-by-tag queries as iterators and async iterators: `current()` and `live()`."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator

from ordo.clock import Clock, clock_or_system
from ordo.errors import StorageUnavailableError
from ordo.journal import validation
from ordo.query.envelope import EventEnvelope
from ordo.query.offset import Offset, past_expiry, to_offset
from ordo.query.ports import TagViewReader
from ordo.query.tag_query import TagQuery
from ordo.settings import EventsByTagSettings, QuerySettings
from ordo.tagging.notification import IN_PROCESS, TagNotifier
from ordo.time.duration import nanoseconds
from ordo.types import Tag

logger = logging.getLogger(__name__)


class EventsByTag:
    """Queries over the tag views of one journal. Thread-safe; each stream is single-consumer.

    `current()` delivers what is settled when it starts (older than the eventual-consistency
    delay) and ends; `live()` never ends. Both are iterators that must be closed (or used in a
    `with` block); `current_async()` and `live_async()` are their asyncio forms. A query never
    writes: it only reads tag_views.
    """

    def __init__(
        self,
        reader: TagViewReader[EventEnvelope],
        *,
        settings: QuerySettings | None = None,
        events_by_tag: EventsByTagSettings | None = None,
        clock: Clock | None = None,
        notifier: TagNotifier = IN_PROCESS,
    ) -> None:
        self.settings = QuerySettings.or_default(settings)
        self.events_by_tag = EventsByTagSettings.or_default(events_by_tag, name="events_by_tag")
        self._reader = reader
        self._clock = clock_or_system(clock)
        self._notifier = notifier

    def current(self, tag: str, offset: object = None) -> TagStream:
        """The events of `tag` after `offset` that are settled now; the stream then ends."""
        return TagStream(self._query(tag, offset, is_live=False), self)

    def live(self, tag: str, offset: object = None) -> TagStream:
        """The events of `tag` after `offset`, then new ones as they settle; never ends."""
        return TagStream(self._query(tag, offset, is_live=True), self)

    async def current_async(self, tag: str, offset: object = None) -> AsyncIterator[EventEnvelope]:
        """current() for asyncio: reads run in a worker thread, waits do not block the loop."""
        async for envelope in _drain(self.current(tag, offset)):
            yield envelope

    async def live_async(self, tag: str, offset: object = None) -> AsyncIterator[EventEnvelope]:
        """live() for asyncio; cancel the task or break out of the loop to stop it."""
        async for envelope in _drain(self.live(tag, offset)):
            yield envelope

    def _query(self, tag: str, offset: object, *, is_live: bool) -> TagQuery[EventEnvelope]:
        checked = validation.tag(tag)
        start: Offset = past_expiry(
            to_offset(offset),
            self._reader,
            checked,
            first_time_bucket_ms=self.events_by_tag.first_time_bucket_ms,
            bucket_size=self.events_by_tag.bucket_size,
        )
        return TagQuery(
            self._reader,
            tag=checked,
            offset=start,
            settings=self.settings,
            bucket_size=self.events_by_tag.bucket_size,
            first_time_bucket_ms=self.events_by_tag.first_time_bucket_ms,
            now_ns=self._clock.now_ns(),
            is_live=is_live,
        )


class TagStream(Iterator[EventEnvelope]):
    """Drives one TagQuery: polls, delivers, and sleeps until the next poll is useful.

    With pubsub on, a notified write shortens the sleep: the query reads once the write has
    had the eventual-consistency delay to settle. close() ends the stream from any thread.

    StorageUnavailableError leaves next() with nothing lost: called again it reads on from where
    it was. The first poll that succeeds after such errors logs at INFO how long reads failed
    (a caller that reads on cannot tell: on a quiet tag next() returns only with an event).
    """

    def __init__(self, query: TagQuery[EventEnvelope], owner: EventsByTag) -> None:
        self._query = query
        self._clock = owner._clock
        self._delay_ns = nanoseconds(owner.settings.eventual_consistency_delay)
        self._buffer: deque[EventEnvelope] = deque()
        self._notified: deque[int] = deque()
        self._wake = threading.Event()
        self._is_closed = False
        self._is_complete = False
        self._unavailable_since: int | None = None
        """When the first poll that found storage unavailable began (ns), until one succeeds."""
        self._unsubscribe = (
            owner._notifier.subscribe(query.tag, self._on_written)
            if owner.events_by_tag.pubsub_notification
            else None
        )

    @property
    def tag(self) -> Tag:
        """The tag this stream reads."""
        return self._query.tag

    @property
    def unavailable_since_ns(self) -> int | None:
        """When the current outage began (the clock's ns at its first failed poll), else None.

        Set by a poll that raised StorageUnavailableError, cleared by the next one that
        succeeds: a caller that reads on after such errors tells one outage from the next by
        it, as on a quiet tag next() returns only with an event, not when reads succeed again.
        """
        return self._unavailable_since

    def __next__(self) -> EventEnvelope:
        """The next event; StopIteration once the stream is closed, though events wait.

        A poll reads up to PAGES_PER_POLL pages ahead: delivering them after close() made a
        consumer stopped from another thread handle thousands of events first. A stream
        started again from the last delivered offset reads them again.
        """
        while not self._buffer or self._is_closed:
            if self._is_closed or self._is_complete:
                self.close()
                raise StopIteration
            self._poll_once()
        return self._buffer.popleft()

    def next_batch(self) -> list[EventEnvelope]:
        """Block until events are available and take all of them; [] when the stream ended."""
        first = next(self, None)
        if first is None:
            return []
        batch = [first, *self._buffer]
        self._buffer.clear()
        return batch

    def close(self) -> None:
        """Stop the stream; next() then raises StopIteration, a blocked one too. Idempotent."""
        self._is_closed = True
        self._wake.set()
        # Taken in one step: the consumer's next() and another thread may close at once.
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    def __enter__(self) -> TagStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _poll_once(self) -> None:
        polled_at = self._clock.now_ns()
        try:
            step = self._query.poll(polled_at)
        except StorageUnavailableError:
            if self._unavailable_since is None:
                self._unavailable_since = polled_at
            raise
        if self._unavailable_since is not None:
            # Counted to now, not to polled_at: this poll may itself have waited for the server.
            logger.info(
                "tag query reads the journal again after %.1f s: tag=%s",
                (self._clock.now_ns() - self._unavailable_since) / 1e9,
                self.tag,
            )
            self._unavailable_since = None
        while self._notified and self._notified[0] + self._delay_ns <= polled_at:
            self._notified.popleft()
        self._buffer.extend(step.rows)
        self._is_complete = step.is_complete
        if not step.rows and not step.is_complete:
            self._sleep(polled_at + step.wait_ns)

    def _sleep(self, until_ns: int) -> None:
        while not self._is_closed:
            target = until_ns
            if self._notified:
                target = min(target, self._notified[0] + self._delay_ns)
            remaining = target - self._clock.now_ns()
            if remaining <= 0:
                return
            self._wake.wait(remaining / 1e9)
            self._wake.clear()

    def _on_written(self, _tag: Tag) -> None:
        self._notified.append(self._clock.now_ns())
        self._wake.set()


async def _drain(stream: TagStream) -> AsyncIterator[EventEnvelope]:
    """Run a stream's blocking polls in a thread of its own, one batch at a time.

    Not in the loop's default executor: a live stream waits in its thread until an event
    comes, so as many quiet live streams as that executor has threads (min(32, cpus + 4))
    held all of them, and every later stream, and whatever else the application ran there
    (asyncio.to_thread, getaddrinfo), waited for ever. The thread ends with the stream:
    close() ends its wait. The context is copied into each call, as asyncio.to_thread does.

    asyncio is imported here, its one use, where an event loop runs and has loaded it: a
    process that only reads synchronously (Spark's source process, started afresh for every
    streaming query) does not load it for `import ordo`.
    """
    import asyncio
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    loop = asyncio.get_running_loop()
    thread = ThreadPoolExecutor(
        max_workers=1, thread_name_prefix=f"ordo-events-by-tag-{stream.tag}"
    )
    try:
        while batch := await loop.run_in_executor(
            thread, contextvars.copy_context().run, stream.next_batch
        ):
            for envelope in batch:
                yield envelope
    finally:
        stream.close()
        thread.shutdown(wait=False)
