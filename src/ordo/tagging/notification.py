"""Tag write notifications (pubsub): a tag writer announces a write, live queries wake up."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from ordo.errors import StorageError
from ordo.tagging.ports import TagViewStore
from ordo.types import Tag

logger = logging.getLogger(__name__)

Listener = Callable[[Tag], None]


class TagNotifier:
    """Delivers "tag written" notifications to listeners in this process. Thread-safe.

    Seed 000: with `pubsub_notification` on, a query reads as soon as a write is announced
    instead of at its next refresh. Journals and queries of one process share `IN_PROCESS`;
    across processes the PostgreSQL backend forwards LISTEN/NOTIFY into it.
    """

    def __init__(self) -> None:
        self._listeners: dict[Tag, list[Listener]] = {}
        self._lock = threading.Lock()

    def subscribe(self, tag: Tag, listener: Listener) -> Callable[[], None]:
        """Call `listener(tag)` on every write to `tag`; returns the unsubscribe function."""
        with self._lock:
            self._listeners.setdefault(tag, []).append(listener)

        def unsubscribe() -> None:
            with self._lock:
                listeners = self._listeners.get(tag, [])
                if listener in listeners:
                    listeners.remove(listener)

        return unsubscribe

    def publish(self, tags: Iterable[Tag]) -> None:
        """Announce writes to `tags` (called by tag writers after the rows are stored)."""
        for tag in set(tags):
            with self._lock:
                listeners = list(self._listeners.get(tag, ()))
            for listener in listeners:
                listener(tag)

    def publish_all(self) -> None:
        """Announce a write to every tag listened to: when announcements may have been missed.

        A listener that lost its source of announcements (a PostgreSQL session ended) calls it
        once it is back, so live queries read what was written meanwhile now rather than at
        their next refresh.
        """
        with self._lock:
            tags = [tag for tag, listeners in self._listeners.items() if listeners]
        self.publish(tags)

    def has_listeners(self, tag: Tag) -> bool:
        """Whether anyone in this process listens to `tag`."""
        with self._lock:
            return bool(self._listeners.get(tag))


IN_PROCESS = TagNotifier()
"""The notifier shared by every journal and query of this process."""


class Announcer:
    """A journal's pubsub: wakes the live queries of a tag once its batch is written.

    Here through IN_PROCESS, and elsewhere through the store (PostgreSQL's NOTIFY). A
    notification is a hint, as queries poll every `refresh_interval` anyway, so a store that
    fails to send one (an outage, a role that may not run pg_notify()) is logged, once per run
    of failures, and never raised: it runs in the tag writer's write loop, after the rows and
    progress are stored, where it passed for a failed write of rows already written (flush()
    and close() raised, or, for an error no retry mends, every tag writer stopped for good).
    Thread-safe enough: two tags' writers failing at once may both log their WARNING.
    """

    def __init__(self, store: TagViewStore) -> None:
        self._store = store
        self._is_failing = False

    def __call__(self, tag: Tag) -> None:
        """Announce a write to `tag`."""
        IN_PROCESS.publish([tag])
        try:
            self._store.announce(tag)
        except StorageError as exc:
            if not self._is_failing:
                self._is_failing = True
                logger.warning(
                    "tag notification failed; live queries elsewhere read the tag's events at "
                    "their next refresh: tag=%s error=%s",
                    tag,
                    exc,
                )
            return
        if self._is_failing:
            self._is_failing = False
            logger.info("tag notifications sent again: tag=%s", tag)
