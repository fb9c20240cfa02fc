"""What the journal contract tests share: settings that flush at once or batch, a clock that
does not move, and reads of what a journal holds (all that a rejected call must keep).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ordo import EventsByTagSettings, Journal, PersistedEvent
from ordo.clock import ManualClock
from ordo.storage.open import Stores
from ordo.types import Tag

JournalFactory = Callable[..., Journal]

IMMEDIATE = EventsByTagSettings(flush_interval=timedelta(0))
BATCHED = EventsByTagSettings(flush_interval=timedelta(hours=1), max_message_batch_size=3)
STILL_NS = int(datetime(2026, 3, 1, 12, 30, tzinfo=UTC).timestamp()) * 10**9


def still_clock() -> ManualClock:
    """A clock that does not move: no new time bucket ever cuts a batch short."""
    return ManualClock(STILL_NS)


def events_of(journal: Journal, pid: str, **kwargs: int) -> list[PersistedEvent]:
    return list(journal.replay(pid, **kwargs))


def payloads(journal: Journal, pid: str, **kwargs: int) -> list[object]:
    return [event.payload for event in journal.replay(pid, **kwargs)]


def tag_names(stores: Stores) -> list[Tag]:
    return [summary.tag for summary in stores.tag_views.tags()]


def tag_view_keys(stores: Stores) -> list[tuple[object, ...]]:
    """Every tag_views row key, to compare before and after."""
    return [
        (e.tag, e.time_bucket, e.timeuuid, e.persistence_id, e.sequence_nr, e.tag_pid_sequence_nr)
        for tag in tag_names(stores)
        for e in stores.tag_views.tag_view_entries(tag)
    ]


def snapshot(journal: Journal, stores: Stores) -> object:
    """Everything a rejected call must leave unchanged."""
    journal.flush()
    pids = list(journal.persistence_ids())
    return (
        pids,
        {pid: (journal.highest_sequence_nr(pid), events_of(journal, pid)) for pid in pids},
        tag_view_keys(stores),
        {pid: dict(stores.tag_views.read_progress(pid)) for pid in pids},
    )
