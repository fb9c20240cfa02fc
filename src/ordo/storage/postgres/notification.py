"""Cross-process pubsub on PostgreSQL: LISTEN for tag writes, wake this process's queries."""

from __future__ import annotations

import logging
import threading

import psycopg

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
    """

    def __init__(self, dsn: str, notifier: TagNotifier) -> None:
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute(f"LISTEN {TAG_WRITTEN_CHANNEL}")
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
        while not self._stopped.is_set():
            try:
                for notify in self._conn.notifies(timeout=_POLL_S):
                    self._notifier.publish([Tag(notify.payload)])
            except psycopg.Error as exc:
                if not self._stopped.is_set():
                    logger.warning("tag listener stopped: error=%s", exc)
                return
