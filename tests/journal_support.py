"""What the journal contract tests share: settings that flush at once or batch, a clock that
does not move, and reads of what a journal holds (all that a rejected call must keep, and the
numbers concurrent appends must leave).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from ordo import EventsByTagSettings, Journal, PersistedEvent
from ordo.clock import ManualClock
from ordo.storage.stores import Stores
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


def numbered_payloads(
    journal: Journal, stores: Stores, tags: Iterable[str]
) -> list[tuple[dict[str, Any], str, frozenset[str]]]:
    """Each event's payload (a dict), persistence id and tags, once asserted numbered right.

    Each persistence id's events are numbered 1..n, and its events of each tag 1..n in sequence
    nr order, without gaps; the tag write progress and the tag views of `tags` hold exactly
    those numbers.
    """
    found: list[tuple[dict[str, Any], str, frozenset[str]]] = []
    expected_rows: Counter[tuple[object, ...]] = Counter()
    for pid in journal.persistence_ids():
        events = list(journal.replay(pid))
        assert [e.sequence_nr for e in events] == list(range(1, len(events) + 1))
        counters: Counter[Tag] = Counter()
        for event in events:
            payload = event.payload
            assert isinstance(payload, dict)
            found.append((payload, pid, frozenset(event.tags)))
            for tag in sorted(event.tags):
                counters[tag] += 1
                assert event.tags[tag] == counters[tag]
                expected_rows[(tag, pid, event.sequence_nr, counters[tag], event.timeuuid)] += 1
        progress = stores.tag_views.read_progress(pid)
        assert {tag: p.tag_pid_sequence_nr for tag, p in progress.items()} == dict(counters)
    rows: Counter[tuple[object, ...]] = Counter(
        (e.tag, e.persistence_id, e.sequence_nr, e.tag_pid_sequence_nr, e.timeuuid)
        for tag in tags
        for e in stores.tag_views.tag_view_entries(Tag(tag))
    )
    assert rows == expected_rows
    return found
