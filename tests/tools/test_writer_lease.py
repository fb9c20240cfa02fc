"""The writer lease: held while a journal is open, renewed by a thread, never per append."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from datetime import timedelta
from pathlib import Path

import pytest

from interrupt_support import interrupted_after
from operations_support import WRITE
from ordo import Journal, NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.errors import ActiveWriterError
from ordo.journal.lease import WriterLease
from ordo.journal.ports import JournalStore
from ordo.settings import OperationsSettings
from ordo.storage.open import stores_at
from ordo.storage.stores import Stores
from ordo.tools.guard import WriterGuard
from ordo.tools.reconciliation import Reconciliation
from ordo.types import PersistenceId
from processing_support import wait_for


class CountingLeases:
    """A journal store that counts lease renewals and the threads that made them (and
    otherwise delegates)."""

    def __init__(self, inner: JournalStore) -> None:
        self._inner = inner
        self.renewals: list[tuple[int, frozenset[str]]] = []
        self.renewed_by: list[threading.Thread] = []

    def renew_writer_lease(
        self, writer_uuid: str, persistence_ids: Collection[PersistenceId], **times: int
    ) -> None:
        self._inner.renew_writer_lease(writer_uuid, persistence_ids, **times)
        self.renewals.append((times["now_ms"], frozenset(persistence_ids)))
        self.renewed_by.append(threading.current_thread())

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_an_open_journal_holds_a_lease_on_the_ids_it_started_until_it_closes(
    journal_url: str,
) -> None:
    journal = open_journal(journal_url, settings=WRITE)
    try:
        with stores_at(journal_url) as stores:
            assert stores.operations.live_writers(since_ms=0) == []  # nothing written yet
            journal.append("p1", [NewEvent.of(1, tags=["t"])])
            journal.recover("p2")
            live = stores.operations.live_writers(since_ms=0)
            assert [w.writer_uuid for w in live] == [journal.writer_uuid]
            covered = stores.operations.writers_covering(
                [PersistenceId("p1"), PersistenceId("p3")], since_ms=0
            )
            assert covered == {"p1": (journal.writer_uuid,)}
    finally:
        journal.close()
    with stores_at(journal_url) as stores:
        assert stores.operations.live_writers(since_ms=0) == []


def test_appends_do_not_write_the_lease_the_heartbeat_does(stores: Stores) -> None:
    counting = CountingLeases(stores.journal)
    journal = Journal(counting, stores.tag_views, settings=WRITE)  # type: ignore[arg-type]
    try:
        for n in range(200):
            journal.append(f"p{n % 5}", [NewEvent.of(n, tags=["t"])])
        # The first write took the lease, appends add nothing. (The heartbeat may have beaten
        # meanwhile, after 5 s on a loaded machine: its renewals are the heartbeat's thread's.)
        assert counting.renewed_by.count(threading.current_thread()) == 1
        assert counting.renewals[0][1] == {"p0"}
    finally:
        journal.close()


def test_the_heartbeat_renews_the_lease_with_the_ids_started_since(stores: Stores) -> None:
    """The heartbeat beats every 20 ms, at any moment of the test: b is started once the clock
    has moved, so whichever renewal carries it reads the moved clock. (b was started before
    the clock moved: a beat between the two, on a loaded machine, carried b at the old time.)"""
    counting = CountingLeases(stores.journal)
    clock = ManualClock(1_000_000 * 1_000_000)
    lease = WriterLease(counting, "w", clock, interval=timedelta(milliseconds=20))  # type: ignore[arg-type]
    lease.cover(PersistenceId("a"))
    lease.start()
    clock.advance(5_000 * 1_000_000)
    lease.cover(PersistenceId("b"))
    wait_for(lambda: any(ids for _, ids in counting.renewals[1:]))
    lease.close()
    first, *later = counting.renewals
    assert first == (1_000_000, frozenset({"a"}))
    assert [renewal for renewal in later if renewal[1]] == [(1_005_000, frozenset({"b"}))]


def test_a_lease_not_renewed_within_the_timeout_no_longer_guards(journal_url: str) -> None:
    now_ms = time.time_ns() // 1_000_000
    with stores_at(journal_url) as ops:
        ops.journal.renew_writer_lease(
            "crashed", [PersistenceId("p")], started_at_ms=now_ms - 60_000, now_ms=now_ms - 31_000
        )
        ops.journal.renew_writer_lease(
            "alive", [PersistenceId("q")], started_at_ms=now_ms - 60_000, now_ms=now_ms - 1_000
        )
        guard = WriterGuard(ops.operations, settings=OperationsSettings())
        assert guard.check("test", [PersistenceId("p")], force=False) == {}
        assert guard.check("test", [PersistenceId("q")], force=True) == {"q": ("alive",)}
        longer = WriterGuard(
            ops.operations, settings=OperationsSettings(writer_lease_timeout=timedelta(minutes=2))
        )
        assert longer.check("test", [PersistenceId("p")], force=True) == {"p": ("crashed",)}


def test_an_id_recovered_after_the_lease_was_taken_is_guarded_at_once(journal_url: str) -> None:
    """recover() of an id with events lists it in the lease before it reads the id's state.

    It was listed by the next heartbeat, up to 5 s later: a `reconcile delete` in between was
    not refused, and the journal, which had read the id's numbering, appended on. Its new
    progress then covered the deleted rows' numbers, so no recovery wrote them again: the
    id's tag views had a gap for good (MissingTaggedEventError).
    """
    with open_journal(journal_url, settings=WRITE) as earlier:
        earlier.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("other", [NewEvent.of(0, tags=["t"])])  # the lease is taken here
        journal.recover("p")
        with stores_at(journal_url) as stores, pytest.raises(ActiveWriterError) as refused:
            Reconciliation.of(stores).delete_tag_views(PersistenceId("p"))
        assert journal.writer_uuid in str(refused.value)


MAX_CALLS = 2_000
"""More C calls than a journal's first append makes: the loop ends before, or fails."""


def test_an_interrupt_in_a_journals_first_append_leaves_no_lease_behind(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM anywhere in the append that takes the lease: close() releases it.

    Landing after the lease's row was written and before `start` had marked it started (in
    the heartbeat thread's start, or as the write's COMMIT returned), it left the row: close()
    released only a started lease, and the row refused a `reconcile` of the id until it expired
    (30 s). Landing in `Thread.start` before the thread ran, close() failed joining it
    ("cannot join thread before it is started"). A simulation's writers end on Ctrl-C so.
    Where the interrupt breaks off the wait in `Thread.start`, CPython's threading raises
    "release unlocked lock" in its place (python/cpython#78667); the lease goes all the same.
    On SQLite alone: the lease is the backends' alike, and each of the hundreds of points opens
    a journal (two pools a time on PostgreSQL, each waiting for its first connection).
    """
    journal_url = f"sqlite:///{tmp_path / 'journal.db'}"
    open_journal(journal_url).close()  # the schema, outside the interrupted calls
    interrupted = 0
    for calls in range(1, MAX_CALLS):
        journal = open_journal(journal_url, settings=WRITE)
        stopped: BaseException | None = None
        try:
            with interrupted_after(calls):
                journal.append(f"p{calls}", [NewEvent.of(1, tags=["t"])], expected_sequence_nr=0)
        except KeyboardInterrupt as exc:
            stopped = exc
        except RuntimeError as exc:  # Thread.start's wait broken off (python/cpython#78667)
            stopped = exc.__context__
        finally:
            journal.close()
        if stopped is None:
            break
        assert isinstance(stopped, KeyboardInterrupt)
        interrupted += 1
        with stores_at(journal_url) as stores:
            assert stores.operations.live_writers(since_ms=0) == [], f"interrupted at {calls}"
    else:
        msg = f"a first append made more than {MAX_CALLS} C calls"
        raise AssertionError(msg)
    assert interrupted > 1
