"""Cross-process pubsub on PostgreSQL: LISTEN for tag writes, wake this process's queries."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from concurrent.futures import Future

import psycopg

from ordo.errors import StorageAccessError, StorageUnavailableError
from ordo.forking import OpeningProcess
from ordo.reconnection import Reconnection
from ordo.storage.postgres.connection import (
    explain_unconnectable,
    redacted_dsn,
    session_conninfo,
)
from ordo.storage.postgres.datastore import translate_postgres_error
from ordo.storage.postgres.tag_view_store import TAG_WRITTEN_CHANNEL
from ordo.tagging.notification import TagNotifier
from ordo.types import Tag

logger = logging.getLogger(__name__)

_Connection = psycopg.AsyncConnection[tuple[object, ...]]


class PostgresTagListener:
    """A thread that LISTENs on the tag-write channel and republishes in this process.

    Journals in other processes NOTIFY after each tag_views write (when pubsub_notification is
    on); this forwards those notifications to the in-process notifier that live queries
    subscribe to. Created by `events_by_tag_at`, which calls close() when its block ends; an
    unreachable server at creation is StorageUnavailableError. close() is for the creating
    thread.

    When the server ends the session (a restart, a failover, pg_terminate_backend), the thread
    logs a WARNING, LISTENs again on a new connection after a bounded backoff (`Reconnection`),
    attempting until it is closed, and logs at INFO once it is back.
    Notifications sent meanwhile are lost, so once back it wakes every tag listened to in this
    process (`TagNotifier.publish_all`): live queries read at once what was written meanwhile.
    An attempt that fails asks why (`explain_unconnectable`, in a daemon thread: `_explained`):
    a server that refuses the URL (StorageAccessError: a password changed, a role that may no
    longer log in, a dropped database) ends the thread with one ERROR line, as no retry mends
    it. Nothing else changes: it only wakes queries, which poll meanwhile and meet the refusal
    themselves on their next new connection (`ordo query --live` then ends, and closes it; a
    processor stops).

    The thread runs an asyncio loop of its own with one task, which close() cancels: psycopg's
    async connect, its wait for notifications and the backoff all end at a cancellation, and
    the connection is closed on the way out. With the blocking API close() waited for the call
    under way, and a connect to a server that does not answer (a dropped route, a stopped
    host) lasts up to CONNECT_TIMEOUT_S: stopping a live query took 10 s. A shorter timeout
    for the retries would still take seconds, and fail a slow but reachable server; not
    joining a thread stuck in connect would leave it and its socket behind until the timeout.

    In a child made by os.fork close() does nothing: the loop, its thread and the connection
    are the parent's, and the thread does not run in the child. Closing the loop there failed
    with RuntimeError ("Cannot close a running event loop"), so a query's block left in the
    child raised it. The child's queries are refused (ForkedProcessError) by their stores.
    """

    def __init__(self, dsn: str, notifier: TagNotifier) -> None:
        self._dsn = dsn
        self._notifier = notifier
        self._opener = OpeningProcess(f"the tag listener of PostgreSQL at {redacted_dsn(dsn)}")
        # A selector loop on every platform: psycopg cannot use Windows' default proactor loop.
        self._loop = asyncio.SelectorEventLoop()
        self._listening: Future[None] = Future()
        self._task = self._loop.create_task(self._run())
        self._thread = threading.Thread(target=self._serve, name="ordo-tag-listener", daemon=True)
        self._thread.start()
        try:
            self._listening.result()
        except psycopg.Error as exc:
            self.close()
            raise translate_postgres_error(exc) from exc
        except BaseException:  # the first connect failed otherwise, or Ctrl-C interrupted it
            self.close()
            raise

    def close(self) -> None:
        """Stop listening and close the connection, without waiting for a connect. Idempotent.

        Does nothing in a forked child (the listener is the parent's).
        """
        if not self._opener.is_current or self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join()
        self._loop.close()

    def _serve(self) -> None:
        """The thread: run the task until close() cancels it.

        The first connect runs here too, not in the creating thread, where running this loop
        fails if that thread runs a loop of its own (a notebook's cell runs in the kernel's).
        """
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._task)

    async def _run(self) -> None:
        """Connect and LISTEN, tell the creating thread how that went, then forward."""
        try:
            conn = await _listening(self._dsn)
        except Exception as exc:
            self._listening.set_exception(exc)
            return
        self._listening.set_result(None)
        await self._listen(conn)

    async def _listen(self, conn: _Connection | None) -> None:
        """Forward notifications until cancelled; LISTEN on a new connection after a loss.

        Ends when the server refuses the URL (`_reconnected` gives no connection).
        """
        reconnection = Reconnection()
        while conn is not None:
            try:
                async with contextlib.aclosing(conn.notifies()) as notifies:
                    async for notify in notifies:
                        self._notifier.publish([Tag(notify.payload)])
            except psycopg.Error as exc:
                logger.warning("tag listener lost its connection, reconnecting: error=%s", exc)
            finally:
                await conn.close()
            conn = await self._reconnected(reconnection)

    async def _reconnected(self, reconnection: Reconnection) -> _Connection | None:
        """A new LISTENing connection, attempted with backoff until one works.

        None when the server refuses the URL, which no retry mends (logged at ERROR).
        """
        while True:
            await asyncio.sleep(reconnection.failed())
            try:
                conn = await _listening(self._dsn)
            except psycopg.Error as exc:
                try:
                    await _explained(self._dsn)
                except StorageAccessError as refused:
                    logger.error("tag listener gave up, queries only poll: error=%s", refused)
                    return None
                except StorageUnavailableError:
                    pass  # an outage: attempt on
                logger.debug("tag listener cannot reconnect yet: error=%s", exc)
                continue
            logger.info("tag listener reconnected after %.1f s", reconnection.succeeded())
            self._notifier.publish_all()  # what was announced while it listened to nothing
            return conn


async def _explained(dsn: str) -> None:
    """Await `explain_unconnectable(dsn)`, run in a daemon thread of its own.

    Not in the loop's default executor (asyncio.to_thread): the interpreter joins that
    executor's threads at exit, daemon or not, so a listener closed while it asked a server
    that does not answer held up its process's exit until the connect gave up
    (DIAGNOSIS_CONNECT_TIMEOUT_S, 2 s). close() cancels the wait; the thread is left to its
    connect's timeout, and an exit does not wait for it.
    """
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if outcome.done():  # cancelled by close()
            return
        if error is None:
            outcome.set_result(None)
        else:
            outcome.set_exception(error)

    def explain() -> None:
        error: BaseException | None = None
        try:
            explain_unconnectable(dsn)
        except BaseException as exc:  # handed to the awaiting task, which raises it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=explain, name="ordo-tag-listener-diagnosis", daemon=True).start()
    await outcome


async def _listening(dsn: str) -> _Connection:
    """A new connection that LISTENs on the tag-write channel (closed again if LISTEN fails)."""
    conn = await psycopg.AsyncConnection.connect(session_conninfo(dsn), autocommit=True)
    try:
        await conn.execute(f"LISTEN {TAG_WRITTEN_CHANNEL}")
    except BaseException:
        await conn.close()
        raise
    return conn
