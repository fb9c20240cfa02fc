"""A journal whose tag views or writer lease cannot be written: appends refused, not buffered.

On real SQLite files: a table dropped by another connection is an error no retry mends, a write
lock held by another connection past the busy timeout an outage.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from ordo import EventsByTagSettings, Journal, NewEvent, open_journal
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
from ordo.tagging import outage_log
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


TAG_WRITER = "ordo.tagging.tag_writer"
RETRIED = EventsByTagSettings(flush_interval=timedelta(milliseconds=10), max_message_batch_size=100)


def _tag_rows(path: Path) -> int:
    """Rows in tag_views, read as another process would (WAL: while a writer holds the lock)."""
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM tag_views").fetchone()[0])


@contextmanager
def _tag_writes_locked_out(journal: Journal, path: Path) -> Iterator[None]:
    """Hold the write lock while an event of tag t waits for its tag write.

    The flusher may write an appended event before the lock is taken: then append another.
    """
    while True:
        journal.append("a", _events(1))
        appended = journal.highest_sequence_nr("a")
        with _write_lock(path):
            if _tag_rows(path) < appended:
                yield
                return


def _logged(caplog: pytest.LogCaptureFixture, *levels: int) -> list[str]:
    """The tag writer's messages at `levels`, in order."""
    return [r.getMessage() for r in caplog.records if r.name == TAG_WRITER and r.levelno in levels]


def test_a_tag_write_outage_logs_one_warning_and_one_info_not_one_per_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The flusher retries at every flush_interval, and logged a WARNING at each retry: about
    1,200 identical lines per tag in a 5-minute outage. Now the retries are DEBUG lines between
    one WARNING and one INFO when the writes resume."""
    monkeypatch.setattr(datastore, "BUSY_TIMEOUT_S", 0.05)
    caplog.set_level(logging.DEBUG, logger=TAG_WRITER)
    path = tmp_path / "j.db"
    url = f"sqlite:///{path}"
    with open_journal(url, settings=RETRIED) as journal:
        with _tag_writes_locked_out(journal, path):
            wait_for(lambda: len(_logged(caplog, logging.WARNING, logging.DEBUG)) >= 4)
        journal.flush()  # the flusher's retry, or this flush, writes them
        appended = journal.highest_sequence_nr("a")

    assert _tag_rows(path) == appended
    assert _heads(url) == {"a": appended}
    (warning,) = _logged(caplog, logging.WARNING)
    assert warning.startswith("tag write failed, will retry: tag=t error=")
    retries = _logged(caplog, logging.DEBUG)
    assert all(r.startswith("tag write failed again, will retry: tag=t") for r in retries)
    (resumed,) = _logged(caplog, logging.INFO)
    match = re.fullmatch(
        r"tag writes resumed after [0-9.]+ s \((\d+) failed attempts\): tag=t", resumed
    )
    assert match is not None
    assert int(match.group(1)) == 1 + len(retries)


def test_a_long_tag_write_outage_is_recalled_by_warnings_that_say_what_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A reminder at most every OUTAGE_REMINDER (a minute; 0 here, so at every retry)."""
    monkeypatch.setattr(datastore, "BUSY_TIMEOUT_S", 0.05)
    monkeypatch.setattr(outage_log, "OUTAGE_REMINDER", timedelta(0))
    caplog.set_level(logging.DEBUG, logger=TAG_WRITER)
    path = tmp_path / "j.db"
    with open_journal(f"sqlite:///{path}", settings=RETRIED) as journal:
        with _tag_writes_locked_out(journal, path):
            wait_for(lambda: len(_logged(caplog, logging.WARNING)) >= 3)
            buffered = journal.highest_sequence_nr("a") - _tag_rows(path)
        journal.flush()  # the flusher's retry, or this flush, writes them

    first, *reminders = _logged(caplog, logging.WARNING)
    assert first.startswith("tag write failed, will retry: tag=t error=")
    assert reminders
    for reminder in reminders:
        assert re.match(
            rf"tag writes still failing after [0-9]+ s, will retry: tag=t failed_attempts=\d+ "
            rf"buffered={buffered} error=",
            reminder,
        )
    assert _logged(caplog, logging.DEBUG) == []
