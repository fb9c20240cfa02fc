"""Parallel processing across keys, in order within a key, yielding offsets safe to commit."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterable,
)
from datetime import timedelta
from typing import Generic, TypeVar

from ordo import arguments
from ordo.acking.contiguous_acker import ContiguousAcker
from ordo.acking.sync_elements import SyncElements
from ordo.errors import (
    ConfigurationError,
    ElementFailedError,
    ElementTimeoutError,
    InvalidInputError,
)
from ordo.settings.durations import positive
from ordo.settings.loading import integer_in

logger = logging.getLogger(__name__)

T = TypeVar("T")


def process_in_parallel(
    source: AsyncIterable[T] | Iterable[T],
    handler: Callable[[T], Awaitable[object]],
    *,
    key: Callable[[T], Hashable],
    parallelism: int = 4,
    max_in_flight: int = 1000,
    commit_every: int = 100,
    commit_interval: timedelta = timedelta(seconds=1),
    element_timeout: timedelta | None = timedelta(seconds=30),
    start_offset: int = 0,
) -> AsyncGenerator[int, None]:
    """Run `handler` on every element of `source` and yield the offsets that may be committed.

    Seed 004 (Free2Move) in asyncio: elements are indexed in input order from `start_offset`;
    elements with the same `key(element)` are handled strictly one after another in input
    order, different keys concurrently by `parallelism` workers. Called by a consumer that
    processes a stream and stores its position:

        async for offset in process_in_parallel(events, handle, key=lambda e: e.persistence_id):
            await token_store.store(offset)

    Every yielded offset is an inclusive position: that element and every element before it
    were handled successfully. Yields are strictly increasing and throttled: one when at
    least `commit_every` more elements became committable, or when `commit_interval` has
    passed since the previous yield (or the start) and anything new is committable, whichever
    comes first; intermediate positions are skipped, never queued. When the source ends and
    all work has finished, the final committable offset is yielded (unless it was the last
    yield already, or nothing was processed).

    Yielded offsets are positions counted from `start_offset` in input order, not the source's
    own offsets: a source with gaps in its offsets (a compacted topic) must map a yielded
    position back to its element's offset (keep the handled elements' offsets), and restarting
    with `start_offset` assumes dense offsets (the next position is the stored one plus one).

    Routing: per-key FIFO queues served by `parallelism` workers. A key with queued elements
    waits in one "ready" queue; a worker takes it, handles its oldest element, and puts the
    key back at the end if more are queued, so a key is never held by two workers and keys
    take turns. This was chosen over lanes (`stable_hash(key) % parallelism`): with lanes a
    slow element also stalls every other key hashed to its lane, and a hash that is stable
    across processes buys nothing inside one process. The cost is one dict entry per key that
    has queued elements, bounded by `max_in_flight`.

    Backpressure: at most `max_in_flight` elements are read but not finished; the source is
    not pulled again until one finishes. A sync iterable is iterated on the event loop, so its
    `next()` must not block.

    Failure: when a handler raises (or `key` raises for an element, or an element's offset
    would pass 2**63-1, which no store holds), the source is no longer read (a pending pull
    is cancelled), queued elements after the failed offset are dropped (so nothing after a
    failed element of the same key runs), and elements already running or queued before it
    are finished, each bounded by `element_timeout`. Then the last
    committable offset is yielded if it moved since the previous yield, and
    `ElementFailedError(offset=, committed=, cause=)` is raised for the first failure (later
    ones are logged at WARNING). A handler still running after `element_timeout` is cancelled
    and fails with `ElementTimeoutError`. With `element_timeout=None` a hung handler hangs the
    run. An error raised by the source itself is re-raised as is, after in-flight work ends
    and the last committable offset is yielded; so is a CancelledError the source raises on
    its own (taken for the source's end, it passed a cut-short run for a complete one). Of an
    element failure and a source error, the earlier is raised and the later logged at WARNING
    (a source error before an in-flight element failed was lost). After a failure, restart
    from the committed offset: elements after it that were handled are handled again, so
    handlers must be idempotent.

    Arguments are validated when this function is called, before the first `__anext__`
    (it is a plain function returning an async generator, so a bad argument fails where it
    is written). No task starts until the first `__anext__`; closing the generator (or
    leaving an `async for` early and calling `aclose()`) cancels running handlers. A run that
    ends closes the source's iterator (`aclose()`, a generator's `close()`), so a generator
    source's `finally` has run by the time a failure is raised or the close returns. Time is
    the event loop's clock. Not thread-safe: iterate from one event loop.

    Raises:
        ConfigurationError: `parallelism`, `max_in_flight` or `commit_every` is not an int of
            at least 1, `commit_interval` or `element_timeout` is not a positive timedelta, or
            `handler` or `key` is not callable (the message names it).
        InvalidInputError: `start_offset` is not an int (a bool is not) in -2**63+1..2**63-1:
            it is an offset, and the one before it is the acker's `committed`, a 64-bit offset
            too (-2**63 failed there, naming `committed`); or `source` is neither an async
            iterable nor a collection (None, a number, a text).

    """
    for name, count in (
        ("parallelism", parallelism),
        ("max_in_flight", max_in_flight),
        ("commit_every", commit_every),
    ):
        integer_in(name, count, 1)
    positive("commit_interval", commit_interval)
    if element_timeout is not None:
        positive("element_timeout", element_timeout)
    arguments.integer(
        start_offset, name="start_offset", error=InvalidInputError, minimum=arguments.INT64_MIN + 1
    )
    for name, function in (("handler", handler), ("key", key)):
        if not callable(function):  # each element failed, as if the handler had failed on it
            msg = f"{name} must be callable, got {function!r:.80}"
            raise ConfigurationError(msg)
    if not isinstance(source, AsyncIterable):  # a text was handled character by character
        arguments.collection(source, name="source", error=InvalidInputError)
    run = _Run(
        source,
        handler,
        key=key,
        parallelism=parallelism,
        max_in_flight=max_in_flight,
        commit_every=commit_every,
        commit_interval=commit_interval,
        element_timeout=element_timeout,
        start_offset=start_offset,
    )
    return run.committable_offsets()


class _Run(Generic[T]):
    """The state of one process_in_parallel call: reader, workers and the yielding consumer."""

    def __init__(
        self,
        source: AsyncIterable[T] | Iterable[T],
        handler: Callable[[T], Awaitable[object]],
        *,
        key: Callable[[T], Hashable],
        parallelism: int,
        max_in_flight: int,
        commit_every: int,
        commit_interval: timedelta,
        element_timeout: timedelta | None,
        start_offset: int,
    ) -> None:
        self._source, self._handler, self._key = source, handler, key
        self._parallelism, self._max_in_flight = parallelism, max_in_flight
        self._commit_every = commit_every
        self._commit_interval = commit_interval.total_seconds()
        self._element_timeout = element_timeout
        self._acker = ContiguousAcker(committed=start_offset - 1)
        self._next_offset = start_offset
        self._queues: dict[Hashable, deque[tuple[int, T]]] = {}
        self._unfinished = 0
        self._is_reading = True
        self._is_closing = False
        """Set when the generator closes: a worker whose handler swallowed the cancel stops."""
        self._stop_after: int | None = None
        """Lowest failed offset: queued elements after it are dropped instead of handled."""
        self._failure: tuple[int, BaseException, bool] | None = None
        self._source_error: BaseException | None = None
        self._crash: BaseException | None = None
        self._wake_at = start_offset - 1 + commit_every
        self._wake_on_any = False
        self._ready: asyncio.Queue[Hashable] = asyncio.Queue()
        """Keys with queued elements that no worker holds, in the order they became ready."""
        self._slots = asyncio.Semaphore(max_in_flight)
        self._progress = asyncio.Event()
        """Set by workers when the consumer should look again (see `_wake_at`), and at the end."""
        self._reader: asyncio.Task[None]
        self._elements: AsyncIterator[T] | None = None
        """The source's iterator once reading began: closed as the run ends (`_close_source`)."""

    async def committable_offsets(self) -> AsyncGenerator[int, None]:
        """The async generator process_in_parallel returns; starts the tasks on first use."""
        loop = asyncio.get_running_loop()
        self._reader = asyncio.create_task(self._read(), name="ordo-acking-reader")
        tasks = [self._reader]
        # No more workers than elements may be in flight: the others could never get one,
        # and a parallelism of 2**64 spent the run creating them.
        tasks += [
            asyncio.create_task(self._work(), name=f"ordo-acking-worker-{n}")
            for n in range(min(self._parallelism, self._max_in_flight))
        ]
        for task in tasks:
            task.add_done_callback(self._on_task_done)
        last = self._acker.committed
        last_at = loop.time()
        try:
            while (self._is_reading or self._unfinished) and self._crash is None:
                committed = self._acker.committed
                now = loop.time()
                is_due = now - last_at >= self._commit_interval
                if committed > last and (is_due or committed - last >= self._commit_every):
                    last, last_at = committed, now
                    yield committed
                    continue
                # Sleep until enough is committable, the interval is up, or the run ends.
                self._wake_at = last + self._commit_every
                self._wake_on_any = is_due
                self._progress.clear()
                try:
                    async with asyncio.timeout_at(
                        None if is_due else last_at + self._commit_interval
                    ):
                        await self._progress.wait()
                except TimeoutError:
                    pass
            if self._crash is not None:
                raise self._crash
            committed = self._acker.committed
            if committed > last:
                yield committed
            self._raise_failure(committed)
        finally:
            self._is_closing = True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._close_source()

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        """Wake the consumer if a task died of an error no handler contract covers.

        A `BaseException` that is not an `Exception` (raised by a handler, or a bug here) would
        otherwise leave its element unfinished and the run waiting forever.
        """
        if not task.cancelled() and (crash := task.exception()) is not None:
            self._crash = crash
            self._progress.set()

    async def _read(self) -> None:
        """Pull elements (one free slot each), index them and queue them by key."""
        source = self._source
        elements = aiter(source) if isinstance(source, AsyncIterable) else SyncElements(source)
        self._elements = elements
        try:
            while self._stop_after is None:
                await self._slots.acquire()
                try:
                    element = await anext(elements)
                except StopAsyncIteration:
                    return
                if not self._admit(element):
                    return
        except asyncio.CancelledError as exc:
            if self._reader.cancelling():
                raise  # the run cancelled the pull: an element failed, or the run is closing
            self._source_failed(exc)  # the source cancelled itself: that is no end of it
        except Exception as exc:  # the source's own error: re-raised once in-flight work ends
            self._source_failed(exc)
        finally:
            self._is_reading = False
            self._progress.set()

    async def _close_source(self) -> None:
        """Close the source's iterator: a run that stopped early left a generator suspended.

        Its `finally` (a connection's close, a slot's release) ran only once the caller dropped
        it or the event loop shut down, so a run restarted from the committed offset found what
        the stopped source held still held. A source that ended or raised is closed already. An
        error of the close is logged: it must not hide how the run ended.
        """
        close = getattr(self._elements, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception as exc:  # the source's own cleanup failed
                logger.warning("the source failed while closing: %r", exc)

    def _source_failed(self, error: BaseException) -> None:
        """Keep the source's error to raise, unless an element failed first: then log it."""
        if self._failure is None:
            self._source_error = error
        else:
            logger.warning("the source failed while stopping: %r", error)

    def _admit(self, element: T) -> bool:
        """Give `element` the next offset and queue it behind its key's earlier elements."""
        offset = self._next_offset
        try:
            # An offset past 2**63-1 fails before its handler runs: the acker refuses it, and
            # its ack crashed the run after the handler, without yielding what was committable.
            arguments.integer(offset, name="offset", error=InvalidInputError)
            element_key = self._key(element)
            queue = self._queues.get(element_key)  # raises TypeError if the key is unhashable
        except Exception as exc:  # an element without a usable key fails at its offset
            self._fail(offset, exc, is_timeout=False)
            return False
        self._next_offset = offset + 1
        self._unfinished += 1
        if queue is None:
            self._queues[element_key] = deque(((offset, element),))
            self._ready.put_nowait(element_key)
        else:
            queue.append((offset, element))
        return True

    async def _work(self) -> None:
        """Take a ready key, handle its oldest element, requeue the key if it has more."""
        while True:
            element_key = await self._ready.get()
            queue = self._queues[element_key]
            offset, element = queue.popleft()
            if self._stop_after is None or offset < self._stop_after:
                await self._handle(offset, element)
                if self._is_closing:  # the handler swallowed the cancel: no further element
                    return
            self._unfinished -= 1
            self._slots.release()
            if queue:
                self._ready.put_nowait(element_key)
            else:
                del self._queues[element_key]
            if not self._unfinished and not self._is_reading:
                self._progress.set()

    async def _handle(self, offset: int, element: T) -> None:
        """Run the handler under the element timeout; ack on success, record a failure."""
        timeout = self._element_timeout
        deadline = asyncio.timeout(None if timeout is None else timeout.total_seconds())
        try:
            async with deadline:
                await self._handler(element)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the run is being closed
            self._fail(offset, exc, is_timeout=False)  # the handler cancelled itself
        except Exception as exc:  # any handler error fails its element: that is the contract
            if deadline.expired():
                cause = TimeoutError(f"handler ran longer than element_timeout={timeout}")
                cause.__cause__ = exc
                self._fail(offset, cause, is_timeout=True)
            else:
                self._fail(offset, exc, is_timeout=False)
        else:
            committed = self._acker.ack(offset)
            if self._wake_on_any or committed >= self._wake_at:
                self._progress.set()

    def _fail(self, offset: int, cause: BaseException, *, is_timeout: bool) -> None:
        """Record a failed element and stop reading; the first failure is the one raised.

        After a source error (which stopped reading already) an element failure is a later
        one, logged: raised instead, it hid the source's error, which nothing logged.
        """
        if self._failure is None and self._source_error is None:
            self._failure = (offset, cause, is_timeout)
            logger.info("element failed, stopping: offset=%d cause=%r", offset, cause)
            if self._reader is not asyncio.current_task():
                self._reader.cancel()
        else:
            logger.warning(
                "another element failed while stopping: offset=%d cause=%r", offset, cause
            )
        if self._stop_after is None or offset < self._stop_after:
            self._stop_after = offset

    def _raise_failure(self, committed: int) -> None:
        """Raise the first failure, an element's or the source's (only one is kept), if any."""
        if self._failure is not None:
            offset, cause, is_timeout = self._failure
            error = ElementTimeoutError if is_timeout else ElementFailedError
            raise error(offset=offset, committed=committed, cause=cause) from cause
        if self._source_error is not None:
            raise self._source_error
