"""Cross-process pubsub on PostgreSQL: LISTEN for tag writes, wake this process's queries."""

from __future__ import annotations

import logging
import threading

import psycopg

from ordo.reconnection import Reconnection
from ordo.storage.postgres.datastore import CONNECT_TIMEOUT_S
from ordo.storage.postgres.tag_view_store import TAG_WRITTEN_CHANNEL
from ordo.tagging.notification import TagNotifier
from ordo.types import Tag

logger = logging.getLogger(__name__)

_POLL_S = 0.5


class PostgresTagListener:
    """A thread that LISTENs on the tag-write channel and republishes in this process.

    Journals in other processes NOTIFY after each tag_views write (when pubsub_notification is
    on); this forwards those notifications to the in-process notifier that live queries
    subscribe to. close() stops the thread and its connection.

    When the server ends the session (a restart, a failover, pg_terminate_backend), the thread
    logs a WARNING, LISTENs again on a new connection after a bounded backoff (`Reconnection`),
    attempting until it is closed, and logs at INFO once it is back: it used to stop for good.
    Notifications sent meanwhile are lost, so once back it wakes every tag listened to in this
    process (`TagNotifier.publish_all`): live queries read at once what was written meanwhile.
    """

    def __init__(self, dsn: str, notifier: TagNotifier) -> None:
        self._dsn = dsn
        self._conn = _listening(dsn)
        self._notifier = notifier
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ordo-tag-listener", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop listening. Idempotent."""
        self._stopped.set()
        self._thread.join()
        self._conn.close()

    def _run(self) -> None:
        reconnection = Reconnection()
        while not self._stopped.is_set():
            try:
                self._forward(reconnection)
            except psycopg.Error as exc:
                self._conn.close()
                if self._stopped.is_set():
                    return
                delay = reconnection.failed()
                if reconnection.attempts == 1:
                    logger.warning("tag listener lost its connection, reconnecting: error=%s", exc)
                self._stopped.wait(delay)

    def _forward(self, reconnection: Reconnection) -> None:
        """Publish the notifications of one poll; LISTEN on a new connection if it was lost."""
        if self._conn.closed:
            self._conn = _listening(self._dsn)
            logger.info("tag listener reconnected after %.1f s", reconnection.succeeded())
            self._notifier.publish_all()  # what was announced while it listened to nothing
        for notify in self._conn.notifies(timeout=_POLL_S):
            self._notifier.publish([Tag(notify.payload)])


def _listening(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    """A new connection that LISTENs on the tag-write channel (closed again if LISTEN fails)."""
    conn = psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    try:
        conn.execute(f"LISTEN {TAG_WRITTEN_CHANNEL}")
    except BaseException:
        conn.close()
        raise
    return conn
