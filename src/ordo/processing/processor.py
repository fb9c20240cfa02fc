"""The tracking processor (Axon): threads that claim segments and handle their events in order.

Each thread claims one segment in the token store, reads the segment's events from its token,
hands them to the handler in batches and stores the token after each batch, in the same
transaction as whatever the handler wrote through `context.connection` (exactly-once for such
handlers). Unclaimed or expired segments are picked up by idle threads of any process. Split,
merge and release requests reach a segment's owner through the token store, so they work
across processes and take effect between batches.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence

from ordo import arguments
from ordo.clock import Clock, clock_or_system
from ordo.errors import (
    AlreadyRunningError,
    ConfigurationError,
    InvalidSegmentOperationError,
)
from ordo.journal import validation
from ordo.processing.control import check_token_store
from ordo.processing.handler import EventHandler, HandlerContext, require_handler
from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.segment_lookup import segment_entry
from ordo.processing.segment_request import SegmentAction, SegmentRequest
from ordo.processing.sequencing import (
    FullySequentialPolicy,
    SequencingPolicy,
    SequentialPerAggregatePolicy,
    check_policy,
)
from ordo.processing.source import EventSource
from ordo.processing.worker import SegmentWorker
from ordo.settings import ProcessorSettings

__all__ = ["EventHandler", "HandlerContext", "TrackingProcessor"]

logger = logging.getLogger(__name__)


class TrackingProcessor:
    """A named processor with `thread_count` threads over the segments of its token store.

    Thread-safe. start() returns at once; stop() releases the claims. A handler failure under
    ErrorMode.FAIL, a gap its source could not fill (MissingTaggedEventError), a storage
    error no retry mends (not an outage: `ordo.reconnection.is_outage`), or stores closed
    under it (StoresClosedError) stops the processor and is kept in `failure`: a server that
    refuses the URL or a table (StorageAccessError: a password changed, a role that may no
    longer log in or use the table, a dropped database), an SQLite journal a thread cannot open
    (a folder in its place) or that was taken away under the stores, a table dropped. An
    outage (StorageUnavailableError) is retried until the server is back. A sequencing policy
    that raises on an event stops it too, under any error mode, with an EventHandlingError
    naming the event: the event belongs to no segment. So does a handler that raises
    SystemExit, KeyboardInterrupt or GeneratorExit (an EventHandlingError naming the event,
    whatever the error mode), and any error a worker thread does not expect (kept in
    `failure`: no thread ends silently). The constructor refuses a source,
    a token store, settings, a policy, a clock or a handler of the wrong kind
    (ConfigurationError), which the worker threads would otherwise fail on, and a name the
    token store would refuse (InvalidIdentifierError). split(), merge() and release() of a
    segment whose owner is to hand it over for a merge are refused (PendingHandOverError):
    they would replace that hand-over (`ordo.processing.control`'s functions replace it on
    purpose).
    """

    def __init__(
        self,
        name: str,
        source: EventSource,
        tokens: TokenStore,
        handler: EventHandler,
        *,
        settings: ProcessorSettings | None = None,
        policy: SequencingPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.name = validation.processor_name(name)
        self.settings = ProcessorSettings.or_default(settings)
        self.policy = SequentialPerAggregatePolicy() if policy is None else policy
        check_policy(self.policy)
        _check_parts(source, tokens)
        require_handler(handler)  # it failed per event, in the worker threads
        self.failure: Exception | None = None
        """What stopped the processor for good (see the class docstring), None while none did."""
        self._source, self._tokens, self._handler = source, tokens, handler
        self._clock = clock_or_system(clock)
        self._instance = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}  # segment id -> worker index, within this instance
        self._workers: list[SegmentWorker] = []
        # Each persistence id's events stay in one segment, in order, under these policies:
        # then a per-id position dedupes what a restart or a merge delivers again. Under the
        # other policies each handled event is recorded (`handled_batches`) instead.
        self._is_per_id = isinstance(
            self.policy, SequentialPerAggregatePolicy | FullySequentialPolicy
        )
        # Storage selects a segment's rows by the persistence id's hash: only right when the
        # persistence id is the sequence value (not for FullySequentialPolicy's constant).
        self._selects_by_id = isinstance(self.policy, SequentialPerAggregatePolicy)

    def start(self) -> None:
        """Create the first segments if needed and start the threads.

        A processor that stopped (stop(), or a failure, which start() forgets) starts again
        with new threads; one whose threads still run is refused (AlreadyRunningError), as a
        second set of threads would leave stop() stopping only the last.
        """
        with self._lock:
            running = sum(worker.is_alive() for worker in self._workers)
            if running:
                state = "stopping" if self._stopped.is_set() else "running"
                msg = (
                    f"processor {self.name!r} is {state} in this process ({running} of its "
                    "threads still run): start() it again once stop() has returned"
                )
                raise AlreadyRunningError(msg)
            self._stopped.clear()
            self._held.clear()
            self.failure = None
        self._source.check_bucket_size()
        entries = self._tokens.initialize(
            self.name, segment_count=self.settings.initial_segment_count
        )
        if len(entries) > self.settings.thread_count:
            # As in Axon, a thread works one segment at a time: the rest wait for other
            # processes' threads, and with none they wait for ever.
            logger.warning(
                "more segments than threads: name=%s segments=%d threads=%d (segments beyond "
                "the threads of every running process are not processed)",
                self.name,
                len(entries),
                self.settings.thread_count,
            )
        self._workers = [SegmentWorker(self, index) for index in range(self.settings.thread_count)]
        for worker in self._workers:
            worker.start()
        logger.info("processor started: name=%s threads=%d", self.name, len(self._workers))

    def stop(self, timeout: float | None = None) -> None:
        """Stop every thread and release their claims. Idempotent.

        Prompt while storage is unreachable too: the stop ends each thread's wait for a
        connection within `ordo.stopping.STOPPING_WAIT`, and a release that fails is logged and
        left to expire after `claim_timeout`, as a crashed process's claims do (waiting out the
        outage would hold up the caller for the pool's timeout, twice). Nothing handled is
        lost: a batch that was not committed is handled again by the segment's next owner.

        Called by a handler (in one of the processor's threads) it only tells the threads to
        stop, and returns: the handler's batch commits, and each thread ends after its batch.
        Joining the threads there raised RuntimeError (a thread cannot join itself) into the
        handler, whose batch rolled back (the processor stopped on the same event at every
        start), after waiting for the other threads, whose releases, on SQLite, waited for the
        handler's transaction: a deadlock until the busy timeout.
        """
        self._stopped.set()
        for worker in self._workers:
            worker.wake.set()
        if threading.current_thread() in self._workers:
            return
        for worker in self._workers:
            worker.join(timeout)
        logger.info("processor stopped: name=%s", self.name)

    def __enter__(self) -> TrackingProcessor:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def is_running(self) -> bool:
        """Whether threads are processing (false after stop() or a failure)."""
        return not self._stopped.is_set() and any(w.is_alive() for w in self._workers)

    def status(self) -> Sequence[TokenEntry]:
        """The processor's segments with owners, tokens and claims."""
        return self._tokens.entries(self.name)

    def split(self, segment_id: int) -> None:
        """Ask the segment's owner (here or in another process) to split it."""
        self._request(segment_id, SegmentAction.SPLIT)

    def merge(self, segment_id: int) -> None:
        """Ask the segment's owner to merge it with its sibling (whose owner hands it over)."""
        if segment_entry(self._tokens, self.name, segment_id).segment.is_root:
            msg = f"processor {self.name!r}: the root segment has nothing to merge with"
            raise InvalidSegmentOperationError(msg)
        self._request(segment_id, SegmentAction.MERGE)

    def release(self, segment_id: int) -> None:
        """Ask the segment's owner to release it (another thread or process may take it)."""
        self._request(segment_id, SegmentAction.RELEASE)

    def _request(self, segment_id: int, action: SegmentAction) -> None:
        self._tokens.request(
            self.name, segment_id, SegmentRequest(action=action), now_ms=self._now_ms()
        )
        for worker in self._workers:
            worker.wake.set()

    def _now_ms(self) -> int:
        return self._clock.now_ns() // 1_000_000

    def _fail(self, error: Exception) -> None:
        logger.error("processor failed: name=%s error=%s", self.name, error)
        if self.failure is None:
            self.failure = error
        self._stopped.set()
        for worker in self._workers:
            worker.wake.set()


def _check_parts(source: object, tokens: object) -> None:
    """ConfigurationError unless `source` is an EventSource and `tokens` a TokenStore.

    None or another object failed later: the token store with AttributeError in start(), the
    source in every worker thread, which ended without a word (`failure` stayed None).
    """
    arguments.instance(source, EventSource, name="source", error=ConfigurationError)
    check_token_store(tokens)
