"""Journal.close() while an append is in flight, on a real SQLite file held by another writer."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from ordo import AppendReceipt, EventsByTagSettings, NewEvent, open_journal
from ordo.errors import JournalClosedError


def test_an_append_in_flight_when_the_journal_closes_is_written_whole_or_not_at_all(
    tmp_path: Path,
) -> None:
    """An append waiting for the file's lock when close() ran was written once the lock came
    free, and then raised JournalClosedError from its tag writes: the caller, told it failed,
    would append the events a second time. close() now waits for appends in flight and
    writes their tag views."""
    path = tmp_path / "j.db"
    url = f"sqlite:///{path}"
    journal = open_journal(url, settings=EventsByTagSettings(flush_interval=timedelta(hours=1)))
    journal.append("warm-up", [NewEvent.of(0)])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the append waits for this writer (busy timeout 60 s)
    outcome: list[AppendReceipt | Exception] = []

    def append() -> None:
        try:
            outcome.append(journal.append("p", [NewEvent.of(1, tags=["t"])]))
        except Exception as exc:
            outcome.append(exc)

    appending = threading.Thread(target=append)
    appending.start()
    time.sleep(0.5)  # the append is waiting for the lock (else close() comes first: no race)
    closing_thread = threading.Thread(target=journal.close)
    closing_thread.start()
    time.sleep(0.5)
    holder.execute("COMMIT")
    holder.close()
    appending.join(30)
    closing_thread.join(30)

    (result,) = outcome
    with closing(sqlite3.connect(path)) as conn:
        stored = conn.execute("SELECT count(*) FROM messages WHERE persistence_id = 'p'").fetchone()
        rows = conn.execute("SELECT count(*) FROM tag_views WHERE tag = 't'").fetchone()
    if isinstance(result, Exception):
        assert isinstance(result, JournalClosedError), result
        assert (stored[0], rows[0]) == (0, 0), "the append raised but its events were written"
    else:
        assert (stored[0], rows[0]) == (1, 1), "the append returned; close() wrote its tag view"
