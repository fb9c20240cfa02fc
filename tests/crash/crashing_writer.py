"""A writer that kills itself with SIGKILL: the child process of test_tag_writer_crash.py.

usage: python crashing_writer.py URL SCENARIO

Some persistence ids get events that are written in full (tag_views and progress) first; then
every id gets more tagged events, and the process dies at the scenario's point (seed 000,
"Recovery/Restart scenarios"):

  buffered         right after append returned: the last events are only in the tag writer
  before_progress  inside the first write_progress of flush(): that batch's tag_views rows are
                   written, its progress is not, and the other tags' batches are still buffered
  after_flush      after flush() returned: tag_views and progress are both written
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta

from ordo import EventsByTagSettings, Journal, NewEvent, open_stores
from ordo.storage.sql_tag_view_store import SqlTagViewStore
from ordo.tagging import TagProgress

SCENARIOS = ("buffered", "before_progress", "after_flush")
SETTINGS = EventsByTagSettings(flush_interval=timedelta(hours=1), max_message_batch_size=10_000)

# Appends per persistence id; each append is a list of events, each event a list of tags.
FULLY_WRITTEN: dict[str, list[list[list[str]]]] = {
    "crash-a": [[["red"], ["red", "blue"]], [[]]],
    "crash-b": [[["blue"]]],
    "crash-untagged": [[[]]],
}
THEN_CRASH: dict[str, list[list[list[str]]]] = {
    "crash-a": [[["blue"], ["red"]], [["red", "green"]]],
    "crash-b": [[[], ["blue", "green"]]],
    "crash-ü 🙂": [[["red"], ["green"]], [["red"]]],
    "crash-untagged": [[[]]],
}


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def append_all(journal: Journal, plan: dict[str, list[list[list[str]]]], phase: str) -> None:
    for pid, appends in plan.items():
        for number, events in enumerate(appends):
            journal.append(
                pid,
                [NewEvent.of({"phase": phase, "append": number}, tags=tags) for tags in events],
            )


def main(url: str, scenario: str) -> None:
    if scenario not in SCENARIOS:
        msg = f"unknown scenario {scenario!r}; use one of {', '.join(SCENARIOS)}"
        raise SystemExit(msg)
    stores = open_stores(url)
    backend = stores.tag_views
    assert isinstance(backend, SqlTagViewStore)  # SQLite's or PostgreSQL's

    class KillBeforeProgress(type(backend)):  # type: ignore[misc]
        """The backend's tag view store, dying before it writes progress once armed."""

        armed = False

        def write_progress(self, progress: Sequence[TagProgress]) -> None:
            if self.armed:
                die()
            super().write_progress(progress)

    tag_views = KillBeforeProgress(backend._db)  # the same database connections
    journal = Journal(stores.journal, tag_views, settings=SETTINGS)

    append_all(journal, FULLY_WRITTEN, "written")
    journal.flush()
    append_all(journal, THEN_CRASH, "crash")
    print("appended", flush=True)
    if scenario == "buffered":
        die()
    elif scenario == "before_progress":
        tag_views.armed = True
        journal.flush()
    else:
        journal.flush()
        die()
    print("still alive", flush=True)
    sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
