"""A journal whose tag views or writer lease cannot be written: appends refused, not buffered.

On real SQLite files: a table dropped by another connection is an error no retry mends, a write
lock held by another connection past the busy timeout an outage.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.clock import SystemClock
from ordo.errors import (
    StorageError,
    StorageUnavailableError,
    TagWriteBacklogError,
    TagWriteFailedError,
    WriterLeaseLostError,
)
from ordo.journal.lease import WriterLease
from ordo.reconnection import is_outage
from ordo.storage.open import stores_at
from ordo.storage.sqlite import datastore
from ordo.types import PersistenceId, Tag
from processing_support import wait_for
from sqlite_support import run_sql

BATCHED = EventsByTagSettings(flush_interval=timedelta(hours=1), max_message_batch_size=2)


def _events(count: int) -> list[NewEvent]:
    return [NewEvent.of(n, tags=["t"]) for n in range(count)]


def _heads(url: str) -> dict[PersistenceId, int]:
    """The highest tag pid sequence nr of each persistence id in tag t's views."""
    with stores_at(url) as stores:
        return dict(stores.tag_views.heads(Tag("t")))


def _table_sql(path: Path, table: str) -> list[str]:
    """The statements that create `table` and its indexes, as the journal's schema made them."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type "
            "DESC",
            (table,),
        )
        return [str(sql) for (sql,) in rows]


def _refusals(caplog: pytest.LogCaptureFixture, logger: str) -> list[int]:
    return [r.levelno for r in caplog.records if r.name == logger and r.levelno >= logging.WARNING]


def test_a_dropped_tag_views_table_refuses_appends_and_recovery_completes_the_views(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The tag writer retried for ever, a WARNING every flush, while appends went on and its
    buffer grew. The failure is logged once, later appends are refused with nothing written,
    and the journal opened again once the table is back writes the missing rows."""
    path = tmp_path / "j.db"
    url = f"sqlite:///{path}"
    journal = open_journal(url, settings=BATCHED)
    journal.append("a", _events(1), expected_sequence_nr=0)
    journal.flush()
    tag_views = _table_sql(path, "tag_views")
    run_sql(path, "DROP TABLE tag_views")

    journal.append("a", _events(2))  # a full batch: the appender's write of it fails
    with pytest.raises(TagWriteFailedError) as refused:
        journal.append("b", _events(1), expected_sequence_nr=0)
    assert refused.value.tag == "t"
    assert not is_outage(refused.value.cause)
    assert not is_outage(refused.value)
    assert "no such table: tag_views" in str(refused.value)
    with pytest.raises(TagWriteFailedError):
        journal.append("a", _events(1))
    with pytest.raises(TagWriteFailedError):
        journal.flush()
    with pytest.raises(TagWriteFailedError):
        journal.close()
    assert _refusals(caplog, "ordo.tagging.tag_writer") == [logging.ERROR]

    run_sql(path, *tag_views)  # the store fixed
    with open_journal(url, settings=BATCHED) as reopened:
        assert (reopened.highest_sequence_nr("a"), reopened.highest_sequence_nr("b")) == (3, 0)
        assert reopened.recover("a") == 3
        reopened.append("b", _events(1), expected_sequence_nr=0)
    assert _heads(url) == {"a": 3, "b": 1}


@contextmanager
def _write_lock(path: Path) -> Iterator[None]:
    """Another connection holds the database's write lock: an outage for every writer here."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")


def test_a_backlog_over_max_buffer_size_refuses_appends_until_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datastore, "BUSY_TIMEOUT_S", 0.1)
    path = tmp_path / "j.db"
    url = f"sqlite:///{path}"
    settings = EventsByTagSettings(
        flush_interval=timedelta(hours=1), max_message_batch_size=100, max_buffer_size=3
    )
    with open_journal(url, settings=settings) as journal:
        journal.append("a", _events(4), expected_sequence_nr=0)  # one more than the bound
        with _write_lock(path), pytest.raises(TagWriteBacklogError) as refused:
            journal.append("a", _events(1))
        error = refused.value
        assert (error.tag, error.buffered, error.limit) == ("t", 4, 3)
        assert isinstance(error, StorageUnavailableError)
        assert is_outage(error.cause)
        assert "cannot be used now" in str(error)
        assert journal.highest_sequence_nr("a") == 4

        journal.append("a", _events(1))  # the outage over: the backlog is written first
        assert _heads(url) == {"a": 4}
    assert _heads(url) == {"a": 5}


def _lease_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "ordo-writer-lease"}


def test_a_lease_that_cannot_be_renewed_refuses_appends_and_stops_its_heartbeat(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A heartbeat failing as no retry mends logged a WARNING every 5 s for ever, while the
    lease lapsed and the journal went on appending under tools that took it for dead."""
    path = tmp_path / "j.db"
    with stores_at(f"sqlite:///{path}") as stores:
        before = _lease_threads()
        lease = WriterLease(stores.journal, "w", SystemClock(), interval=timedelta(milliseconds=5))
        lease.cover(PersistenceId("a"))
        lease.start()
        lease.check()
        heartbeats = _lease_threads() - before
        run_sql(path, "DROP TABLE writer_lease_pids", "DROP TABLE writer_leases")
        lease.cover(PersistenceId("b"))

        wait_for(lambda: not any(t.is_alive() for t in heartbeats))
        with pytest.raises(WriterLeaseLostError) as refused:
            lease.check()
        assert isinstance(refused.value.cause, StorageError)
        assert not is_outage(refused.value.cause)
        assert "cannot be renewed" in str(refused.value)
        assert "writer_uuid=w" in str(refused.value)
        assert _refusals(caplog, "ordo.journal.lease") == [logging.ERROR]
        lease.close()  # its release fails too, and says that the lease will expire


def test_a_lease_unrenewed_past_its_deadline_is_lost_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage longer than the deadline: the tools may have taken the lease for a crashed
    writer's meanwhile, so a renewal after it does not make the journal a writer again."""
    monkeypatch.setattr(datastore, "BUSY_TIMEOUT_S", 0.05)
    path = tmp_path / "j.db"
    with stores_at(f"sqlite:///{path}") as stores:
        lease = WriterLease(
            stores.journal,
            "w",
            SystemClock(),
            interval=timedelta(milliseconds=5),
            deadline=timedelta(milliseconds=200),
        )
        lease.start()
        with _write_lock(path):
            wait_for(lambda: _is_lost(lease))
        with pytest.raises(WriterLeaseLostError) as refused:
            lease.check()
        assert "was not renewed for 0.2 s" in str(refused.value)
        assert refused.value.cause is None or is_outage(refused.value.cause)
        lease.close()


def _is_lost(lease: WriterLease) -> bool:
    try:
        lease.check()
    except WriterLeaseLostError:
        return True
    return False


def test_a_journal_whose_lease_cannot_be_renewed_refuses_appends(tmp_path: Path) -> None:
    """The heartbeat beats every 5 s: the test waits for one (recover() is refused alike)."""
    path = tmp_path / "j.db"
    with open_journal(f"sqlite:///{path}", settings=BATCHED) as journal:
        journal.append("a", _events(1), expected_sequence_nr=0)
        run_sql(path, "DROP TABLE writer_lease_pids", "DROP TABLE writer_leases")

        def is_refused() -> bool:
            try:
                journal.recover("a")
            except WriterLeaseLostError:
                return True
            return False

        wait_for(is_refused)
        with pytest.raises(WriterLeaseLostError):
            journal.append("b", _events(1), expected_sequence_nr=0)
        with pytest.raises(WriterLeaseLostError):
            journal.delete_to("a", 1)
        assert (journal.highest_sequence_nr("a"), journal.highest_sequence_nr("b")) == (1, 0)
