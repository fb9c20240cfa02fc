"""Property: for any interleaving of appends, tag pid sequence nrs are 1..n per (pid, tag).

An interleaving is drawn as a list of appends (thread, persistence id, tags). The appends start
in list order, each thread running its own appends in order, but they overlap freely once
started. One or two journals (writers) share an SQLite file opened inside the test body
(Hypothesis does not reset fixtures between examples).
"""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from journal_support import numbered_payloads
from ordo import ConcurrencyConflictError, EventsByTagSettings, Journal, NewEvent, open_journal
from ordo.storage.open import open_stores

PIDS = ["a", "b", "ü🙂"]
TAGS = ["x", "y", "z z"]

appends = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=3),  # thread index
        st.integers(min_value=0, max_value=len(PIDS) - 1),  # persistence id index
        st.lists(st.frozensets(st.sampled_from(TAGS)), min_size=1, max_size=3),  # tags per event
    ),
    min_size=1,
    max_size=16,
)


class StartOrder:
    """Lets append number i start only after append number i-1 started."""

    def __init__(self) -> None:
        self._next = 0
        self._changed = threading.Condition()

    def start(self, index: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._next == index, timeout=60)
            assert self._next == index, "start order stuck"
            self._next += 1
            self._changed.notify_all()


def run_thread(
    journal: Journal,
    order: StartOrder,
    mine: list[tuple[int, str, list[frozenset[str]]]],
) -> None:
    for index, pid, tag_sets in mine:
        order.start(index)
        events = [
            NewEvent.of({"append": index, "event": n}, tags=tags) for n, tags in enumerate(tag_sets)
        ]
        while True:
            try:
                journal.append(pid, events)
                break
            except ConcurrencyConflictError:
                continue


@settings(deadline=None, max_examples=25)
@given(
    plan=appends,
    threads=st.integers(min_value=1, max_value=4),
    writers=st.integers(min_value=1, max_value=2),
    batch_size=st.integers(min_value=1, max_value=4),
    immediate=st.booleans(),
)
def test_tag_pid_sequence_nrs_are_contiguous_for_any_interleaving(
    plan: list[tuple[int, int, list[frozenset[str]]]],
    threads: int,
    writers: int,
    batch_size: int,
    immediate: bool,
) -> None:
    config = EventsByTagSettings(
        flush_interval=timedelta(0) if immediate else timedelta(hours=1),
        max_message_batch_size=batch_size,
    )
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'journal.db'}"
        journals = [open_journal(url, settings=config) for _ in range(writers)]
        try:
            order = StartOrder()
            per_thread: list[list[tuple[int, str, list[frozenset[str]]]]] = [
                [] for _ in range(threads)
            ]
            for index, (thread, pid_index, tag_sets) in enumerate(plan):
                per_thread[thread % threads].append((index, PIDS[pid_index], tag_sets))
            with ThreadPoolExecutor(threads) as pool:
                futures = [
                    pool.submit(run_thread, journals[n % writers], order, mine)
                    for n, mine in enumerate(per_thread)
                ]
                for future in futures:
                    future.result(timeout=120)
            for journal in journals:
                journal.flush()
            check(journals[0], url, plan)
        finally:
            for journal in journals:
                journal.close()


def check(journal: Journal, url: str, plan: list[tuple[int, int, list[frozenset[str]]]]) -> None:
    drawn = {
        (index, n): (PIDS[pid_index], tags)
        for index, (_, pid_index, tag_sets) in enumerate(plan)
        for n, tags in enumerate(tag_sets)
    }
    stores = open_stores(url)
    try:
        numbered = numbered_payloads(journal, stores, TAGS)
    finally:
        stores.close()
    found = {(payload["append"], payload["event"]): (pid, tags) for payload, pid, tags in numbered}
    assert found == drawn
