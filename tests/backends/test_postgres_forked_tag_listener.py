"""A PostgreSQL tag listener closed in a child made by os.fork: nothing is done there, and the
parent's listener goes on forwarding. Closing the parent's event loop in the child failed with
RuntimeError ("Cannot close a running event loop"), so leaving a query's block there raised it.
"""

from __future__ import annotations

import pytest

from connection_loss_support import Sessions
from fork_support import ChildOutcome, in_forked_child
from ordo.storage.postgres.notification import PostgresTagListener
from tag_listener_support import notified, notifier_of_t

pytestmark = pytest.mark.postgres


def test_a_tag_listener_closed_in_a_forked_child_still_forwards_in_the_parent(
    sessions: Sessions,
) -> None:
    notifier, heard = notifier_of_t()
    listener = PostgresTagListener(sessions.url, notifier)
    try:
        closed = in_forked_child(listener.close)

        assert closed == ChildOutcome(value=None)  # nothing done: the parent's to close
        assert notified(sessions, heard)
    finally:
        listener.close()
