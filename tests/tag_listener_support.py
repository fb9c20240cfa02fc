"""What the PostgreSQL tag listener tests share: a notifier with one subscriber to the tag "t",
and a NOTIFY sent until the listener forwards it."""

from __future__ import annotations

import threading
import time

from connection_loss_support import Sessions
from ordo.storage.postgres.tag_view_store import TAG_WRITTEN_CHANNEL
from ordo.tagging.notification import TagNotifier
from ordo.types import Tag


def notifier_of_t() -> tuple[TagNotifier, threading.Event]:
    """A notifier, and the event its one subscriber, to the tag "t", sets when it is woken."""
    notifier, heard = TagNotifier(), threading.Event()
    notifier.subscribe(Tag("t"), lambda _: heard.set())
    return notifier, heard


def notified(sessions: Sessions, heard: threading.Event) -> bool:
    """NOTIFY the tag "t" until the listener forwards it (30 s); whether it did."""
    heard.clear()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        sessions.execute("SELECT pg_notify(%s, 't')", (TAG_WRITTEN_CHANNEL,))
        if heard.wait(0.1):
            return True
    return False
