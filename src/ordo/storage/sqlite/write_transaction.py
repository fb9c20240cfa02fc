"""One atomic SQLite write, as a class: an interrupt cannot leave its transaction open.

Python runs a signal's handler where a call into C returns, so Ctrl-C's KeyboardInterrupt (and
SIGTERM's `Terminated` in the commands that end on it) can be raised between any two such calls.
A generator's context manager (contextlib) has one such point between its BEGIN and the
caller's block, where no `__exit__` runs: the connection kept its transaction, and with it the
database's write lock, and the journal's close then failed to flush its tag views on that
connection ("cannot start a transaction within a transaction"): an `ordo append` stopped by
SIGTERM exited 1. Here whatever `__enter__` raises after the lend rolls back and gives the
connection back, and `__exit__` does so whatever is raised during its COMMIT.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Protocol

from ordo.storage.lend import Lend
from ordo.storage.sqlite.driver_errors import translate_sqlite_error


class ConnectionLender(Protocol):
    """Where the transaction's connection comes from (`SQLiteDatastore`)."""

    path: Path

    def lend(self) -> sqlite3.Connection:
        """The calling thread's connection, counted as lent until `give_back`."""
        ...

    def give_back(self, conn: sqlite3.Connection) -> None:
        """End one lend of `conn`."""
        ...

    def refuse_replaced_file(self) -> None:
        """Raise StorageAccessError if the file is no longer the one the store opened."""
        ...


class WriteTransaction(Lend[sqlite3.Connection]):
    """BEGIN IMMEDIATE on entry, COMMIT on a clean exit, ROLLBACK otherwise.

    A driver's error leaves as ordo's StorageError (`translate_sqlite_error`).
    """

    def __init__(self, lender: ConnectionLender) -> None:
        self._lender = lender

    def __enter__(self) -> sqlite3.Connection:
        self._conn = conn = self._lender.lend()
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._lender.refuse_replaced_file()
        except BaseException as exc:
            self._abandon(conn, exc)
            raise
        return conn

    def _commit(self, conn: sqlite3.Connection) -> None:
        conn.execute("COMMIT")

    def _give_back(self, conn: sqlite3.Connection) -> None:
        self._lender.give_back(conn)

    def _abandon(self, conn: sqlite3.Connection, exc: BaseException) -> None:
        """Roll back what is open and give the connection back; a driver's error is ordo's."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            self._give_back(conn)
        if isinstance(exc, sqlite3.Error):
            raise translate_sqlite_error(exc, self._lender.path) from exc
