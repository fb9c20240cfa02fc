"""The PostgreSQL tag listener listening again after the server ended its session (see
connection_loss_support)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from connection_loss_support import Sessions
from ordo.storage.postgres.notification import PostgresTagListener
from tag_listener_support import notified, notifier_of_t

pytestmark = pytest.mark.postgres


def test_the_tag_listener_listens_again_after_its_session_ended(
    sessions: Sessions, caplog: pytest.LogCaptureFixture
) -> None:
    """The listener stopped for good with `tag listener stopped: error=...`."""
    notifier, heard = notifier_of_t()
    caplog.set_level(logging.INFO, logger="ordo.storage.postgres.notification")
    listener = PostgresTagListener(sessions.url, notifier)
    try:
        assert notified(sessions, heard)
        for _ in range(2):
            assert sessions.terminate() == 1
            assert notified(sessions, heard)
    finally:
        listener.close()
    assert caplog.text.count("tag listener lost its connection, reconnecting") == 2
    assert caplog.text.count("tag listener reconnected after") == 2


def test_the_tag_listener_wakes_its_tags_once_it_listens_again(sessions: Sessions) -> None:
    """Announcements sent while it had no session were lost until each query's next refresh."""
    notifier, heard = notifier_of_t()
    listener = PostgresTagListener(sessions.url, notifier)
    try:
        assert notified(sessions, heard)
        heard.clear()
        assert sessions.terminate() == 1
        assert heard.wait(30)  # no NOTIFY sent: the listener's reconnection woke the tag
    finally:
        listener.close()


def test_the_tag_listener_starts_inside_a_running_event_loop(sessions: Sessions) -> None:
    """A notebook's cell runs inside the kernel's asyncio loop: a listener that ran its own
    loop in the creating thread failed there ("another loop is running")."""
    notifier, heard = notifier_of_t()

    async def in_a_cell() -> PostgresTagListener:
        return PostgresTagListener(sessions.url, notifier)

    listener = asyncio.run(in_a_cell())
    try:
        assert notified(sessions, heard)
    finally:
        listener.close()
