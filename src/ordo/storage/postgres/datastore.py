"""PostgreSQL connections (a psycopg 3 pool) and the one place psycopg errors are translated."""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ordo.errors import (
    StatementCanceledError,
    StorageAccessError,
    StorageError,
    StorageIntegrityError,
    StorageUnavailableError,
    StoresClosedError,
    TransactionConflictError,
)
from ordo.forking import OpeningProcess
from ordo.stopping import STOPPING_WAIT, Stop, stop_signal
from ordo.storage.migration import (
    METADATA_TABLE,
    SCHEMA_VERSION_KEY,
    MigrationReceipt,
    finished,
    migrate,
    stored_version,
)
from ordo.storage.postgres.connection import (
    Connection,
    connect,
    connect_timeout_s,
    explain_unconnectable,
    read_committed,
    redacted_dsn,
    session_conninfo,
)
from ordo.storage.postgres.journal_schema import current_schema, has_metadata
from ordo.storage.postgres.lent_connection import LentConnection
from ordo.storage.postgres.read_only import read_only_refusal
from ordo.storage.schema_reads import SchemaReads, listed_tables

logger = logging.getLogger(__name__)

_PACKAGE = "ordo.storage.postgres"

POOL_MAX_SIZE = 8
POOL_TIMEOUT_S = 30.0
"""How long a call waits for a connection (psycopg_pool's default); read when a pool opens.

An outage shorter than this only delays the calls made during it.
"""
CLOSE_WAIT_S = 0.25
"""How long closing waits for each of the pool's threads (psycopg_pool waits 5 s); see close()."""
_STOP_CHECK_S = 0.1
"""How often a wait for a connection looks at the thread's stop signal (`ordo.stopping`)."""

_ENDED_FOR_NOW = (
    psycopg.errors.IdleInTransactionSessionTimeout,
    psycopg.errors.ReadOnlySqlTransaction,
)
"""The transaction errors (SQLSTATE class 25, InternalError to psycopg) that a retry mends."""

_SERVER_UP: tuple[
    tuple[tuple[type[psycopg.Error], ...], type[StorageUnavailableError], str], ...
] = (
    (
        (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure),
        TransactionConflictError,
        "PostgreSQL rolled the transaction back in a conflict with a concurrent one "
        "(nothing of it was written; it may be retried)",
    ),
    (
        (psycopg.errors.LockNotAvailable,),
        TransactionConflictError,
        "PostgreSQL gave up waiting for a lock a concurrent transaction holds, after the "
        "session's lock_timeout (nothing of the transaction was written; it may be retried)",
    ),
    (
        (psycopg.errors.QueryCanceled,),
        StatementCanceledError,
        "PostgreSQL canceled the statement (the server is up: the session's statement_timeout "
        "ran out, or a cancel request ended it; nothing of the transaction was written, it may "
        "be retried)",
    ),
)
"""The driver errors of a server that is up, which retrying may mend, as the outages' subclasses
that say so (each message then the driver's); several are OperationalErrors to psycopg."""


def translate_postgres_error(exc: psycopg.Error | PoolTimeout) -> StorageError:
    """Map a driver error onto ordo's storage errors (stores may narrow them further).

    A table this role may no longer use (a REVOKE) is StorageAccessError, and a transaction
    ended for idling (a batch's idle limit) or refused by a server in recovery (a failover's
    standby) is StorageUnavailableError: as a plain StorageError the first was retried for
    ever by a tracking processor, and the others would end it (`is_outage`). A primary's
    read-only refusal looks the same here; the datastore, which can ask the session, makes it
    StorageAccessError first (`read_only_refusal`). A statement
    canceled at the session's lock_timeout or statement_timeout (OperationalErrors to psycopg)
    is retried as before, but said "PostgreSQL is unavailable" of a server that is up: it is
    TransactionConflictError or StatementCanceledError, whose message names the setting.
    """
    if isinstance(exc, psycopg.IntegrityError):
        return StorageIntegrityError(f"PostgreSQL constraint failed: {exc}")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StorageAccessError(f"PostgreSQL refuses access: {exc}")
    if isinstance(exc, _ENDED_FOR_NOW):
        return StorageUnavailableError(f"PostgreSQL is unavailable: {exc}")
    for driver_errors, error, says in _SERVER_UP:
        if isinstance(exc, driver_errors):
            return error(f"{says}: {exc}")
    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        return StorageUnavailableError(f"PostgreSQL is unavailable: {exc}")
    return StorageError(f"PostgreSQL error: {exc}")


class PostgresDatastore(SchemaReads):
    """A connection pool to one PostgreSQL database (schema chosen by the URL's search_path).

    Connections are in autocommit mode; writes run in explicit transactions. After close()
    every call is refused (StoresClosedError). Thread-safe; not picklable (Spark executors
    open their own), and refused in a forked child (ForkedProcessError: the pool's connections
    are the parent's sessions, and its threads do not run in the child).

    A connection is checked before it is lent (`lend`): when the server ended the
    pool's sessions (a restart, a failover, pg_terminate_backend), the calls after it get new
    connections instead of failing with StorageUnavailableError once per idle connection.
    """

    MIGRATIONS = _PACKAGE
    TABLE_NAMES = (
        "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p', 'v', 'm', 'f') "
        "AND relnamespace = to_regnamespace(current_schema()) ORDER BY relname"
    )
    """The tables and views of the schema ordo writes to (the search_path's first)."""

    def __init__(self, dsn: str, *, max_size: int = POOL_MAX_SIZE) -> None:
        """Connect once (`connect` says why a server cannot be used), then open the pool.

        The pool's first connection is awaited as long as one connect may take (the URL's
        connect_timeout, else CONNECT_TIMEOUT_S: `connect_timeout_s`); it waited a fixed
        CONNECT_TIMEOUT_S, so a server that stopped answering after the first connect failed
        the open after 10 s whatever the URL said. When the wait runs out, one more connect
        says why (`explain_unconnectable`, at most 2 s more): a server that began to refuse the
        URL meanwhile is StorageAccessError.
        """
        self.dsn = dsn
        self._opener = OpeningProcess(f"the stores of PostgreSQL at {redacted_dsn(dsn)}")
        connect(dsn).close()
        self._pool = ConnectionPool(
            session_conninfo(dsn),
            min_size=1,
            max_size=max_size,
            timeout=POOL_TIMEOUT_S,
            kwargs={"autocommit": True},
            configure=read_committed,
            open=False,
        )
        with _quiet_abandoned_threads():  # a timed-out wait closes the pool
            try:
                self._pool.open(wait=True, timeout=connect_timeout_s(dsn))
            except PoolTimeout as exc:
                explain_unconnectable(dsn)
                raise translate_postgres_error(exc) from exc

    def write_transaction(self) -> LentConnection:
        """Run one atomic write; driver errors leave as StorageError subclasses.

        A write refused by a primary whose session default is read-only is StorageAccessError
        (`read_only_refusal`); a standby's refusal stays an outage. A class, not a generator:
        see `ordo.storage.postgres.lent_connection` for the interrupt it survives.
        """
        return LentConnection(self, transaction=True)

    def connection(self) -> LentConnection:
        """Lend an autocommit connection: each statement is its own transaction.

        For single statements (reads, or a write that is atomic on its own); no BEGIN/COMMIT
        round trips. A write refused as read-only is told apart as in `write_transaction`.
        """
        return LentConnection(self, transaction=False)

    def lend(self) -> Connection:
        """A pooled connection whose session the server has not ended (`_is_alive`).

        A dead one means the server ended sessions, most likely every idle one of the pool:
        they are all checked and dropped at once before a new connection is taken. The pool's
        own `check=` does not fit: it backs off 1, 2, 4... s between dead connections, so a
        full pool of them failed the call after the pool's 30 s timeout. Whatever interrupts
        the check gives the connection back.
        """
        conn = self._getconn()
        try:
            alive = _is_alive(conn)
        except BaseException:
            self.give_back(conn)
            raise
        if alive:
            return conn
        self.give_back(conn)
        self._pool.check()
        return self._getconn()

    def give_back(self, conn: Connection) -> None:
        """End a lend of `conn` (`lend`): the pool resets it, or replaces one it cannot reset."""
        self._pool.putconn(conn)

    def translated(self, conn: Connection | None, exc: BaseException) -> BaseException:
        """The StorageError for a driver's `exc`, other exceptions as they are (`LentConnection`).

        A write refused as read-only is asked about on `conn`, the session that refused
        (`read_only_refusal`).
        """
        if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction) and conn is not None:
            refusal = read_only_refusal(conn, self.dsn, exc)
            if refusal is not None:
                return refusal
        if isinstance(exc, psycopg.Error | PoolTimeout):
            return translate_postgres_error(exc)
        return exc

    def _getconn(self) -> Connection:
        """What `ConnectionPool.getconn()` lends, with a wait the stop signal ends early.

        A thread with a stop signal (`ordo.stopping`) waits in short slices and, once it is
        set, at most STOPPING_WAIT more: during an outage a stopping processor's threads would
        otherwise wait out the pool's timeout twice (the call, then the release). Other threads
        wait once, as the pool does, and keep their place in the pool's queue.

        When the wait runs out, one connect of its own says why (`explain_unconnectable`):
        StorageAccessError when the server refuses this URL, which no retry mends (a tracking
        processor stops on it, rather than retrying a refusal as an outage for ever). Only a
        thread whose stop signal is set does not ask, as the connect could outlast
        STOPPING_WAIT.

        A closed pool refuses at once, and fails the calls waiting when it closes: that is
        StoresClosedError, a programming error; as psycopg's PoolClosed (an OperationalError)
        it would be StorageUnavailableError, which a processor or a live query retries for ever.
        In a forked child every call is ForkedProcessError before the pool is touched.
        """
        self._opener.refuse_other()
        stop = stop_signal()
        try:
            return self._pool.getconn() if stop is None else self._getconn_until_stopped(stop)
        except PoolClosed as exc:
            msg = f"the stores of PostgreSQL at {redacted_dsn(self.dsn)} were used after close()"
            raise StoresClosedError(msg) from exc
        except PoolTimeout:
            if stop is None or not stop.is_set():
                explain_unconnectable(self.dsn)
            raise

    def _getconn_until_stopped(self, stop: Stop) -> psycopg.Connection[tuple[object, ...]]:
        """A connection within the pool's timeout, or STOPPING_WAIT after `stop` is set."""
        deadline = time.monotonic() + self._pool.timeout
        while True:
            if stop.is_set():  # the first time sets the deadline; later ones cannot move it
                deadline = min(deadline, time.monotonic() + STOPPING_WAIT.total_seconds())
            left = deadline - time.monotonic()
            if left <= 0:
                msg = (
                    f"couldn't get a connection within {STOPPING_WAIT.total_seconds():g} s "
                    "of stopping"
                    if stop.is_set()
                    else f"couldn't get a connection after {self._pool.timeout:.2f} sec"
                )
                raise PoolTimeout(msg)
            try:
                return self._pool.getconn(timeout=min(_STOP_CHECK_S, left))
            except PoolTimeout:
                continue

    def migrate(self) -> MigrationReceipt:
        """Create or upgrade the schema; an advisory lock serializes concurrent callers.

        A current schema is found by a read: the lock is taken only to migrate. The migration's
        transaction begins after the lock is granted, because a backend refreshes its catalog
        cache at a transaction's start: begun before, it would still see the tables missing
        that the caller ahead of it created.
        """
        with self.connection() as conn:
            done = finished(_PACKAGE, self._schema_version(conn))
            if done is not None:
                return done
            schema = current_schema(conn, self.dsn)  # one to create the tables in, or an error
            conn.execute("SELECT pg_advisory_lock(hashtext('ordo.migrate'))")
            try:
                with conn.transaction():
                    return migrate(
                        conn,
                        package=_PACKAGE,
                        current=self._schema_version(conn),
                        param="%s",
                        existing=listed_tables(conn, self.TABLE_NAMES),
                        where=f"PostgreSQL at {redacted_dsn(self.dsn)} in schema {schema!r}",
                    )
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext('ordo.migrate'))")

    def close(self) -> None:
        """Close the pool, waiting at most CLOSE_WAIT_S for each of its threads.

        A thread that is not done by then is left to finish alone: in practice one in a
        connect attempt to a server that accepts connections but does not answer (a dropped
        route, a frozen host). psycopg_pool's own wait of 5 s per such thread, until the
        attempt's connect timeout ran out, made closing the stores (Ctrl-C on
        `ordo query --live`, the end of any command) take 5 to 10 s. Giving the attempt up is
        safe: the thread is a daemon, so it does not hold the process up, and it only ends the
        attempt (at the latest after the connect timeout), closes the connection if one came of
        it (the pool is closed) and stops. No call is waiting for that connection: closing
        fails the waiting ones. The pool's WARNING that it could not stop the thread is logged
        at DEBUG instead (`_quiet_abandoned_threads`): it told a library user of a problem there
        is not. Idempotent. In a forked child it does nothing: closing the parent's connections
        there would end the parent's sessions.
        """
        if not self._opener.is_current:
            return
        with _quiet_abandoned_threads():
            self._pool.close(timeout=CLOSE_WAIT_S)

    def _schema_version(self, conn: psycopg.Connection[tuple[object, ...]]) -> int:
        if not has_metadata(conn):
            return 0
        found = conn.execute(
            f"SELECT value FROM {METADATA_TABLE} WHERE key = %s", (SCHEMA_VERSION_KEY,)
        ).fetchone()
        return 0 if found is None else stored_version(found[0])


def _is_alive(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the session still answers; a round trip only when the server sent something.

    A pooled connection sits idle in autocommit mode, so nothing arrives on it unless the
    server ends its session (it sends the reason, then closes): when nothing is waiting to be
    read it is alive without asking, and an empty query (`ConnectionPool.check_connection`,
    which also consumes a harmless notice) tells otherwise. Asking every time cost a round
    trip per call (on loopback about a fifth of an append).
    """
    try:
        if not _has_input(conn):
            return True
        ConnectionPool.check_connection(conn)
    except psycopg.OperationalError:
        return False
    return True


def _has_input(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the server sent something the connection has not read (polls, never waits).

    poll(2) rather than a `selectors` selector: every checkout asks, and an epoll selector
    opens and closes a descriptor each time (about 4.6 against 0.6 µs, one-off timing).
    A hang-up or an error counts as input too: the check that follows finds the session dead.
    """
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


@contextmanager
def _quiet_abandoned_threads() -> Iterator[None]:
    """Within the block, psycopg_pool's "couldn't stop thread" WARNINGs of this thread are DEBUG.

    Only those the calling thread logs, where closing a pool waits for its threads; other
    threads' records, and the pool's other warnings, pass as before.
    """
    pool_logger = logging.getLogger("psycopg.pool")
    quiet = _AbandonedThreadFilter(threading.get_ident())
    pool_logger.addFilter(quiet)
    try:
        yield
    finally:
        pool_logger.removeFilter(quiet)


class _AbandonedThreadFilter(logging.Filter):
    """Logs one thread's "couldn't stop thread" records of psycopg_pool at DEBUG, and drops them."""

    def __init__(self, thread: int) -> None:
        super().__init__()
        self._thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self._thread or not str(record.msg).startswith("couldn't stop thread"):
            return True
        logger.debug("left a pool thread to end its call alone: %s", record.getMessage())
        return False
