"""One lend of a pooled PostgreSQL connection, as a class: an interrupt cannot keep it lent.

Python runs a signal's handler where a call into C returns, so Ctrl-C's KeyboardInterrupt (and
SIGTERM's `Terminated` in the commands that end on it) can be raised between any two such calls.
The lend was a stack of generators' context managers (contextlib): where one had yielded and
its caller's block had not begun, no `__exit__` ran. The connection stayed lent, in a write
with its transaction open (and its row locks held), for as long as the interrupt's exception
was referenced: throughout a caller's `except` block, where the journal's close waits for a
connection of the same pool. And psycopg's own `conn.transaction()` is such a generator: an
interrupt after its BEGIN had the pool discard the connection it could not roll back. Here
whatever `__enter__` raises after the lend rolls back and gives the connection back, and
`__exit__` does so whatever is raised during its COMMIT. (An interrupt inside psycopg_pool's
`getconn`, once it took a connection and before it returns it, still loses that connection for
the pool's life: psycopg_pool's window, which no caller can close.)
"""

from __future__ import annotations

from contextlib import suppress
from typing import Protocol

import psycopg

from ordo.storage.lend import Lend
from ordo.storage.postgres.connection import Connection


class ConnectionLender(Protocol):
    """Where the connection comes from, and how its errors read (`PostgresDatastore`)."""

    def lend(self) -> Connection:
        """A pooled connection, lent until `give_back`; raises ordo's errors or an interrupt."""
        ...

    def give_back(self, conn: Connection) -> None:
        """End the lend of `conn`: the pool takes it back (and resets or replaces it)."""
        ...

    def translated(self, conn: Connection | None, exc: BaseException) -> BaseException:
        """The StorageError for a driver's `exc` (asked on `conn` if needed); others as is."""
        ...


class LentConnection(Lend[Connection]):
    """An autocommit connection for the block; with `transaction`, inside BEGIN ... COMMIT.

    The block's clean end commits what is open, any other end rolls it back (as psycopg's
    `with conn:` does), and the connection goes back to the pool either way. A driver's error
    leaves as ordo's StorageError (`ConnectionLender.translated`).
    """

    def __init__(self, lender: ConnectionLender, *, transaction: bool) -> None:
        self._lender = lender
        self._transaction = transaction

    def __enter__(self) -> Connection:
        try:
            conn = self._lender.lend()
        except BaseException as exc:
            _raise_translated(self._lender.translated(None, exc), exc)
            raise
        try:
            if self._transaction:
                conn.execute("BEGIN")  # the session's default isolation: read committed
        except BaseException as exc:
            self._abandon(conn, exc)
            raise
        self._conn = conn
        return conn

    def _commit(self, conn: Connection) -> None:
        conn.commit()  # nothing to do when no transaction is open

    def _give_back(self, conn: Connection) -> None:
        self._lender.give_back(conn)

    def _abandon(self, conn: Connection, exc: BaseException) -> None:
        """Roll back what is open and give the connection back; a driver's error is ordo's.

        A rollback that fails (the session is lost) is left to the pool, which closes and
        replaces a connection it cannot reset.
        """
        try:
            with suppress(psycopg.Error):
                conn.rollback()
            error = self._lender.translated(conn, exc)  # asked before the pool resets `conn`
        finally:
            self._give_back(conn)
        _raise_translated(error, exc)


def _raise_translated(error: BaseException, exc: BaseException) -> None:
    """Raise ordo's `error` for `exc`, unless it is `exc` itself (the caller raises that)."""
    if error is not exc:
        raise error from exc
