"""The writer lease: how an open Journal tells the operations tools that it is alive.

Reconciliation and cleanup must not change a persistence id while a writer uses it (seed 000:
"It can only be run while the application is offline but per persistence id operations can
be used if it is known that the persistence id is not running"). Each Journal therefore holds
a lease: a row with a heartbeat, renewed every WRITER_HEARTBEAT_INTERVAL by a background
thread, and the persistence ids the journal has started. The append path only adds an id to
an in-memory set when it is first started in this journal, and the heartbeat thread writes it,
so appends pay nothing per call but a clock read (`check`); only an id with events is written
at once, when its recovery starts (`publish`), since a tool may change its state from then on.

A lease that lapses while its journal goes on appending would let a tool change what the
journal appends to: a journal whose lease was not renewed for WRITER_LEASE_DEADLINE, or whose
renewal failed with an error no retry mends, refuses appends for good (WriterLeaseLostError).
For good: a tool may have run during the lapse, and only a journal opened again reads each
persistence id's state anew.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from ordo.clock import Clock
from ordo.errors import StorageError, WriterLeaseLostError
from ordo.journal.ports import JournalStore
from ordo.reconnection import is_outage
from ordo.settings import WRITER_HEARTBEAT_INTERVAL, WRITER_LEASE_DEADLINE
from ordo.types import PersistenceId

logger = logging.getLogger(__name__)


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)
"""Linux's clock that counts the time the machine is suspended; None elsewhere."""


def _elapsed() -> float:
    """Seconds on a clock that goes on while the machine sleeps (Linux's CLOCK_BOOTTIME).

    The lease's deadline is about the time the tools see pass: a journal whose machine slept
    past it must find its lease lapsed on waking, which CLOCK_MONOTONIC (time.monotonic) would
    not show, since it stands still during a suspend. Elsewhere: time.monotonic.
    """
    if _BOOTTIME is None:
        return time.monotonic()
    return time.clock_gettime(_BOOTTIME)


_NS_PER_MS = 1_000_000


class WriterLease:
    """The lease of one Journal (one writer uuid). Thread-safe.

    The journal calls cover() when it starts a persistence id (and publish() when that id has
    events) and start() before its first write; start() writes the lease at once, so a writer
    is visible before anything it appends, and starts the heartbeat thread. close() stops the
    thread and deletes the lease.
    A heartbeat that fails with an outage is logged and retried at the next beat; one that
    fails otherwise is logged once, at ERROR, and ends the heartbeat. The journal calls check()
    before each write: it raises WriterLeaseLostError once the lease may have lapsed (the
    `deadline`, WRITER_LEASE_DEADLINE, passed since the last renewal) or cannot be renewed.
    A writer that crashes leaves a lease that stops being renewed and expires.
    """

    def __init__(
        self,
        store: JournalStore,
        writer_uuid: str,
        clock: Clock,
        *,
        interval: timedelta = WRITER_HEARTBEAT_INTERVAL,
        deadline: timedelta = WRITER_LEASE_DEADLINE,
    ) -> None:
        self.writer_uuid = writer_uuid
        self._store = store
        self._clock = clock
        self._interval_s = interval.total_seconds()
        self._deadline_s = deadline.total_seconds()
        self._renewed_at = 0.0  # _elapsed() when the last renewal that worked began
        self._error: StorageError | None = None  # of the last renewal, None once one works
        self._is_lost = False  # lapsed or refused: for good
        self._pending: set[PersistenceId] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at_ms = 0
        self._is_started = False
        self._may_hold_row = False  # a lease row may be written: close() releases it

    def cover(self, persistence_id: PersistenceId) -> None:
        """Note a persistence id this writer started; it is written with the next heartbeat."""
        with self._lock:
            self._pending.add(persistence_id)

    def publish(self, persistence_id: PersistenceId) -> None:
        """Write the id to the started lease at once, not with the next heartbeat.

        For an id with events whose state the journal is about to read (recovery): a tool must
        see it in use from then on. Listed by the heartbeat alone, up to `interval` later, a
        `reconcile delete` in between was not refused, and the journal's next appends numbered
        on from the state it had read: their progress hid the deleted rows from every later
        recovery, a gap for good. An id without events needs no such write: nothing of it can
        be changed, and its first event names this writer, which the guard reads too. A failed
        write leaves the id to the heartbeat and fails as a renewal does: an outage raises its
        StorageError (try again), any other error loses the lease (WriterLeaseLostError).
        """
        with self._lock:
            self._pending.discard(persistence_id)
        try:
            self._write({persistence_id}, now_ms=self._now_ms())
        except StorageError as exc:
            if self._failed({persistence_id}, exc):
                raise
            raise self._lost() from exc

    def start(self) -> None:
        """Write the lease now and start the heartbeat (once; later calls return at once).

        Raises StorageError when the first lease cannot be written: the caller has not
        written anything yet and may retry. Ctrl-C or SIGTERM raised in here (KeyboardInterrupt
        lands where any call into C returns) may come once the row is committed, before the
        lease counts as started: close() releases the row all the same (`_may_hold_row`).
        """
        if self._is_started:
            return
        with self._lock:
            if self._is_started or self._stopped.is_set():
                return
            self._started_at_ms = self._now_ms()
            pending, self._pending = self._pending, set()
            began = _elapsed()
            self._may_hold_row = True
            try:
                self._write(pending, now_ms=self._started_at_ms)
            except StorageError:
                self._pending |= pending
                raise
            self._renewed_at = began
            self._thread = threading.Thread(
                target=self._beat, name="ordo-writer-lease", daemon=True
            )
            self._thread.start()
            self._is_started = True
            logger.info("writer lease taken: writer_uuid=%s", self.writer_uuid)

    def check(self) -> None:
        """Raise WriterLeaseLostError once the lease may have lapsed or cannot be renewed.

        The journal calls it before each write (one clock read); nothing before start().
        """
        if self._is_started and (self._is_lost or _elapsed() - self._renewed_at > self._deadline_s):
            self._lose()
            raise self._lost()

    def close(self) -> None:
        """Stop the heartbeat and delete the lease (a failure is logged: it will expire).

        A lease that an interrupt broke off in start() is deleted too, and its heartbeat joined
        only once it runs: a thread the interrupt left unstarted failed the join ("cannot join
        thread before it is started"), and one not yet in `_beat` stops there, `_stopped` set.
        """
        self._stopped.set()
        thread = self._thread
        if thread is not None:
            if thread.is_alive():
                thread.join()
            self._thread = None
        if not self._may_hold_row:
            return
        try:
            self._store.release_writer_lease(self.writer_uuid)
        except StorageError as exc:
            logger.warning(
                "writer lease not released, it will expire: writer_uuid=%s error=%s",
                self.writer_uuid,
                exc,
            )

    def _beat(self) -> None:
        while not self._stopped.wait(self._interval_s) and not self._is_lost:
            self.renew()

    def renew(self) -> None:
        """Renew the lease now with the persistence ids started since the last renewal.

        Not once the lease is lost: past the deadline it may have lapsed already (the lost
        state is kept, and the heartbeat ends).
        """
        began = _elapsed()
        if self._is_lost or began - self._renewed_at > self._deadline_s:
            self._lose()
            return
        with self._lock:
            pending, self._pending = self._pending, set()
        try:
            self._write(pending, now_ms=self._now_ms())
        except StorageError as exc:
            if self._failed(pending, exc):
                logger.warning(
                    "writer lease heartbeat failed, will retry: writer_uuid=%s error=%s",
                    self.writer_uuid,
                    exc,
                )
            return
        self._renewed_at, self._error = began, None

    def _failed(self, pending: set[PersistenceId], error: StorageError) -> bool:
        """A lease write failed: its ids wait for the next heartbeat; True for an outage.

        Anything else no retry mends: the lease is lost for good (`_lose`).
        """
        with self._lock:
            self._pending |= pending
        self._error = error
        if is_outage(error):
            return True
        self._lose()
        return False

    def _lose(self) -> None:
        """Enter the lost state for good; the first time, log it (the heartbeat then ends)."""
        with self._lock:
            if self._is_lost:
                return
            self._is_lost = True
        logger.error("%s", self._lost())

    def _lost(self) -> WriterLeaseLostError:
        error = self._error
        if error is not None and not is_outage(error):
            reason = "cannot be renewed"
        else:
            reason = f"was not renewed for {self._deadline_s:g} s"
        lost = WriterLeaseLostError(writer_uuid=self.writer_uuid, reason=reason, cause=error)
        lost.__cause__ = error
        return lost

    def _write(self, persistence_ids: set[PersistenceId], *, now_ms: int) -> None:
        """Write the lease with its heartbeat at `now_ms` and the ids started since the last."""
        self._store.renew_writer_lease(
            self.writer_uuid, persistence_ids, started_at_ms=self._started_at_ms, now_ms=now_ms
        )

    def _now_ms(self) -> int:
        return self._clock.now_ns() // _NS_PER_MS
