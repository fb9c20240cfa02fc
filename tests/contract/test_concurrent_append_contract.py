"""Concurrent appenders, once per backend: threads of one journal, and two journals (two writers).

Whatever the interleaving, no successful append is lost, no failed one leaves a trace, and per
(persistence id, tag) the journal and the tag views hold tag pid sequence nrs exactly 1..n.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

import pytest

from journal_support import IMMEDIATE, JournalFactory, numbered_payloads
from ordo import ConcurrencyConflictError, EventsByTagSettings, Journal, NewEvent
from ordo.clock import SkewedClock, SystemClock
from ordo.storage.stores import Stores

TAGS = ["red", "blue", "green"]
SHARED_PIDS = ["shared-0", "shared-1", "shared-ü🙂"]
THREADS = 8
APPENDS_PER_THREAD = 20

SETTINGS = {
    "immediate": IMMEDIATE,
    "batched": EventsByTagSettings(
        flush_interval=timedelta(milliseconds=5), max_message_batch_size=4
    ),
}


@dataclass(frozen=True, slots=True)
class Appended:
    """One event of a successful append, identified by its payload's id."""

    persistence_id: str
    tags: frozenset[str]


def append_randomly(
    journal: Journal, thread_nr: int, start: threading.Barrier
) -> dict[str, Appended]:
    """Append to shared and own ids; retry on conflict; return what was appended."""
    rng = random.Random(thread_nr)
    own_pid = f"own-{thread_nr}"
    appended: dict[str, Appended] = {}
    start.wait()
    for k in range(APPENDS_PER_THREAD):
        pid = rng.choice([*SHARED_PIDS, own_pid])
        batch = {
            f"{thread_nr}-{k}-{j}": frozenset(rng.sample(TAGS, rng.randint(0, 2)))
            for j in range(rng.randint(1, 3))
        }
        attempt = 0
        while True:
            events = [
                NewEvent.of({"id": event_id, "attempt": attempt}, tags=tags)
                for event_id, tags in batch.items()
            ]
            try:
                journal.append(pid, events)
                break
            except ConcurrencyConflictError:
                attempt += 1
        appended.update({event_id: Appended(pid, tags) for event_id, tags in batch.items()})
    return appended


def run_appenders(journals: list[Journal]) -> dict[str, Appended]:
    start = threading.Barrier(THREADS)
    with ThreadPoolExecutor(THREADS) as pool:
        futures = [
            pool.submit(append_randomly, journals[n % len(journals)], n, start)
            for n in range(THREADS)
        ]
        results = [future.result(timeout=120) for future in futures]
    appended: dict[str, Appended] = {}
    for result in results:
        appended.update(result)
    return appended


def assert_consistent(journal: Journal, stores: Stores, appended: dict[str, Appended]) -> None:
    """Journal and tag views hold exactly the successful appends, numbered 1..n per pid/tag."""
    found = numbered_payloads(journal, stores, TAGS)
    for payload, pid, tags in found:
        assert appended[payload["id"]] == Appended(pid, tags)
    seen_ids = [payload["id"] for payload, _, _ in found]
    assert sorted(seen_ids) == sorted(appended), "lost or duplicated events"


@pytest.mark.parametrize("mode", sorted(SETTINGS))
def test_threads_of_one_journal(journal_factory: JournalFactory, stores: Stores, mode: str) -> None:
    journal = journal_factory(settings=SETTINGS[mode])

    appended = run_appenders([journal])
    journal.flush()

    assert_consistent(journal, stores, appended)


@pytest.mark.parametrize("mode", sorted(SETTINGS))
def test_two_journals_as_two_writers(
    journal_factory: JournalFactory, stores: Stores, mode: str
) -> None:
    first = journal_factory(settings=SETTINGS[mode])
    # The second writer's clock is 3 s behind: its offsets interleave with the first's.
    second = journal_factory(
        settings=SETTINGS[mode], clock=SkewedClock(SystemClock(), skew_ns=-3 * 10**9)
    )

    appended = run_appenders([first, second])
    first.flush()
    second.flush()

    assert_consistent(first, stores, appended)
