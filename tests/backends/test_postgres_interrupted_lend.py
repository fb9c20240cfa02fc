"""Ctrl-C or SIGTERM while a PostgreSQL connection is lent loses no connection, leaves no
transaction open.

The interrupt lands at each point of the calling thread where a signal's could
(`interrupt_support`), but not within psycopg_pool: its `getconn` loses a connection it took
when interrupted before it returns, a window of the library no caller can close (see
`ordo.storage.postgres.lent_connection`). The pool's own threads are not interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack

import psycopg
import pytest

from connection_loss_support import Sessions
from interrupt_support import interrupted_after
from ordo.errors import StorageUnavailableError
from ordo.storage.postgres.datastore import PostgresDatastore

pytestmark = pytest.mark.postgres

MAX_SIZE = 2
"""A small pool: every one of its connections is taken at once after each interrupt."""
MAX_CALLS = 5000
"""More C calls than a lend makes before the caller's block: the loop ends before, or fails."""

OPEN_TRANSACTION = "starts_with(state, 'idle in transaction')"
"""A session of the test's between two statements of a transaction."""

Lend = Callable[[], AbstractContextManager[psycopg.Connection[tuple[object, ...]]]]


@pytest.mark.parametrize("lend_name", ["write_transaction", "connection"])
def test_an_interrupt_as_a_connection_is_lent_loses_none_and_leaves_no_transaction(
    sessions: Sessions, lend_name: str
) -> None:
    """Checked while the interrupt is still being handled, as a caller that closes the journal
    in its `except` block does: where a generator's context manager (contextlib) had yielded
    and the caller's block had not begun, the connection stayed lent, under
    `write_transaction` with its transaction open, until the exception was dropped."""
    store = PostgresDatastore(sessions.url, max_size=MAX_SIZE)
    lend: Lend = getattr(store, lend_name)
    # A name of its own: rebound by the loop's `as conn` while armed, this connection (let go
    # by the pool meanwhile) ran psycopg's __del__ there, and Python ignores an interrupt in it.
    with store.write_transaction() as creating:
        creating.execute("CREATE TABLE written (n integer)")
    interrupted = 0
    for calls in range(1, MAX_CALLS):
        try:
            with interrupted_after(calls, sparing="psycopg_pool"), lend() as conn:
                sys.setprofile(None)  # the block began: no interrupt from here on
                conn.execute("INSERT INTO written VALUES (%s)", (calls,))
        except KeyboardInterrupt:
            interrupted += 1
            assert sessions.count(OPEN_TRANSACTION) == 0, f"at C call {calls}"
            try:
                with ExitStack() as stack:  # every connection of the pool is lent again
                    for _ in range(MAX_SIZE):
                        stack.enter_context(store.connection()).execute("SELECT 1")
            except StorageUnavailableError as exc:
                msg = f"a connection stayed lent after an interrupt at C call {calls}"
                raise AssertionError(msg) from exc
            continue
        break
    else:
        msg = f"a lend made more than {MAX_CALLS} C calls before the caller's block"
        raise AssertionError(msg)
    assert interrupted > 1
    with store.connection() as conn:
        assert conn.execute("SELECT n FROM written").fetchall() == [(calls,)]  # none before
    store.close()
