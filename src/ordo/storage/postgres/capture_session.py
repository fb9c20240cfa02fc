"""The PostgreSQL capture's sessions: how they are opened, how their errors leave, their lock.

`PostgresChangeSource` keeps one session and opens a new one after the server ended it (restart,
failover, pg_terminate_backend). Everything that makes such a session fit for capture lives
here, apart from the slot it reads: the settings its values are decoded with, the translation of
driver errors (a vanished slot is its own error), and the advisory lock that keeps one capture
per slot, taken again with each new session.
"""

from __future__ import annotations

import math
import os
import select
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGconn

from ordo.errors import AlreadyRunningError, ReplicationSlotMissingError, StorageUnavailableError
from ordo.hashing import stable_hash
from ordo.storage.postgres.catalog import Connection
from ordo.storage.postgres.connection import connect
from ordo.storage.postgres.datastore import translate_postgres_error

# Text output the values are parsed from: ISO dates, UTC offsets, hex bytea, exact doubles.
# extra_float_digits above 0 writes each float8 and real in the fewest digits that read back
# as it; a database or role may set 0 or less (older clients did), which wrote 15 (real: 6)
# significant digits, so 0.30000000000000004 was captured as 0.3.
_SESSION = (
    "SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO, YMD', false), "
    "set_config('bytea_output', 'hex', false), set_config('extra_float_digits', '1', false)"
)


def connect_capture(dsn: str, *, autocommit: bool) -> Connection:
    """A session that reads values as the decoder parses them, whatever the database's defaults.

    UTC, ISO dates, hex bytea and every digit of a double (`_SESSION`), however the database or
    the role sets them.

    Opened by `connect`, so a server that refuses the URL (a password changed, a role that may
    no longer log in, a dropped database) is StorageAccessError, which the capture does not
    retry, and only an outage is the StorageUnavailableError it rides out.
    """
    conn = connect(dsn)
    try:
        conn.execute(_SESSION)  # session settings (not local): they outlive the transaction
        conn.autocommit = autocommit
    except BaseException:
        conn.close()
        raise
    return conn


def slot_missing(slot: str) -> ReplicationSlotMissingError:
    """The error of a slot that vanished under a capture: nothing was advanced."""
    msg = (
        f"replication slot {slot!r} does not exist (was it dropped?); nothing was advanced: "
        "create it again and take a new snapshot"
    )
    return ReplicationSlotMissingError(msg)


@contextmanager
def translated(slot: str) -> Iterator[None]:
    """Driver errors leave as StorageError subclasses; a vanished slot as its own error."""
    try:
        yield
    except psycopg.errors.UndefinedObject as exc:
        if "replication slot" in str(exc):
            raise slot_missing(slot) from exc
        raise translate_postgres_error(exc) from exc
    except psycopg.Error as exc:
        raise translate_postgres_error(exc) from exc


_CAPTURE_LOCK_CLASS = 0x6F72646F
"""The first key of a capture's advisory lock ("ordo"); the second is its slot's hash."""
_LOCK_HOLDER = (
    "SELECT a.application_name, a.pid, coalesce(host(a.client_addr), 'a local socket') "
    "FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND l.classid = %s AND l.objid = %s AND l.objsubid = 2"
)


def lock_capture(conn: Connection, slot: str, *, previous_pid: int | None) -> None:
    """Take the capture lock of `slot` for the session of `conn`: one capture per slot.

    Two captures of one slot peek the same changes, so both published them (duplicates in the
    change log), and one failed later when the other held the slot for a moment. The lock is a
    session advisory lock on the capture's own connection, so losing that session loses the
    lock with it and the capture notices at its next call: a lock on a connection of its own
    was lost unnoticed, and another capture could start beside it. The server releases the lock
    when the session ends, so a crashed capture leaves none. A slot belongs to one database, as
    do advisory locks. AlreadyRunningError names the holder: its application_name says
    `ordo cdc capture pid N on HOST`. Held by `previous_pid` (this source's last session, still
    ending after the server ended it), it is StorageUnavailableError: a retry takes it.
    """
    keys = (_CAPTURE_LOCK_CLASS, stable_hash(slot) & 0x7FFFFFFF)
    name = f"ordo cdc capture pid {os.getpid()} on {socket.gethostname()}"
    conn.execute("SELECT set_config('application_name', %s, false)", (name,))
    row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", keys).fetchone()
    if row is not None and row[0]:
        return
    holder = conn.execute(_LOCK_HOLDER, keys).fetchone()
    if previous_pid is not None and (holder is None or holder[1] == previous_pid):
        msg = f"the previous session of the capture of slot {slot!r} still holds its lock"
        raise StorageUnavailableError(msg)
    running = (
        "its holder has just ended"
        if holder is None
        else (f"{holder[0]}; PostgreSQL backend pid {holder[1]} from {holder[2]}")
    )
    msg = f"a capture of slot {slot!r} is already running ({running}); stop it first"
    raise AlreadyRunningError(msg)


UNLOCK_WAIT_S = 1.0
"""How long closing a capture's session waits for the server to release the capture lock.

A healthy server answers at once; one that stopped answering does not, and its lock then goes
with its backend, a moment after the close."""


def close_locked(conn: Connection) -> None:
    """Close a capture's session, releasing its capture lock first when the session is sound.

    The server releases a session's advisory locks only once its backend has ended, a moment
    after the client closed the connection, so the lock is released first: a capture of the slot
    started right after this one stopped is then not refused as already running. A session
    that is broken or busy is just closed (its lock goes with its backend), and so is one whose
    server does not answer the release within UNLOCK_WAIT_S (`_unlock_all`).
    """
    try:
        if not conn.broken and conn.info.transaction_status is TransactionStatus.IDLE:
            _unlock_all(conn.pgconn)
    except psycopg.Error:
        pass  # the session was lost meanwhile: its lock goes with it
    finally:
        conn.close()


def _unlock_all(pgconn: PGconn) -> None:
    """Release the session's advisory locks, waiting at most UNLOCK_WAIT_S for the answer.

    Not `execute`, which waits for a server that stopped answering (a dropped route, a frozen
    host) until the kernel gives the session up (tcp_user_timeout, 30 s), and for ever behind a
    proxy that still acknowledges what is sent: Ctrl-C on `ordo cdc capture` then hung in
    closing. The session is closed right after, so the answer is only waited for, not read.
    """
    pgconn.send_query(b"SELECT pg_advisory_unlock_all()")
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN)
    deadline = time.monotonic() + UNLOCK_WAIT_S
    while True:
        pgconn.consume_input()
        left = deadline - time.monotonic()
        if not pgconn.is_busy() or left <= 0 or not poller.poll(math.ceil(left * 1000)):
            return
