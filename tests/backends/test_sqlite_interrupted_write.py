"""Ctrl-C or SIGTERM while a SQLite write transaction begins leaves no transaction open.

The interrupt lands at each point where a signal's could (`interrupt_support`).
"""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from interrupt_support import interrupted_after
from ordo.storage.sqlite.datastore import SQLiteDatastore

MAX_CALLS = 500
"""More C calls than a write transaction's start makes: the loop ends before, or fails."""


def test_an_interrupt_as_a_write_transaction_begins_leaves_no_transaction_open(
    tmp_path: Path,
) -> None:
    """A generator-made context manager (contextlib) left the transaction open when the interrupt
    came after its BEGIN and before the caller's block: no `__exit__` ran. The journal's close
    then flushed its tag views on that connection ("cannot start a transaction within a
    transaction"): an `ordo append` stopped by SIGTERM exited 1 with TagWriteFailedError."""
    store = SQLiteDatastore(tmp_path / "j.db")
    store.migrate()
    with store.write_transaction() as conn:
        conn.execute("CREATE TABLE written (n INTEGER)")
    interrupted = 0
    for calls in range(1, MAX_CALLS):
        try:
            with interrupted_after(calls), store.write_transaction() as conn:
                sys.setprofile(None)  # the block began: no interrupt from here on
                conn.execute("INSERT INTO written VALUES (?)", (calls,))
        except KeyboardInterrupt:
            interrupted += 1
            with closing(sqlite3.connect(tmp_path / "j.db", timeout=0)) as other:
                other.execute("BEGIN IMMEDIATE")  # "database is locked" if a write is open
                other.execute("ROLLBACK")
            with store.write_transaction() as conn:  # the thread's own connection begins again
                conn.execute("SELECT 1")
            continue
        break
    else:
        msg = f"a write transaction made more than {MAX_CALLS} C calls to begin"
        raise AssertionError(msg)
    assert interrupted > 1  # the interrupts landed: before and after the BEGIN
    with store.connection() as conn:
        assert conn.execute("SELECT n FROM written").fetchall() == [(calls,)]  # none before
    store.close()
