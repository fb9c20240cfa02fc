"""The tag views' contract, run once per backend through `journal_url`: writers of the same
tag_views and tag_write_progress rows, in any order, all succeed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ordo import BucketSize, PersistedEvent
from ordo.clock import SystemClock
from ordo.journal.recovery import tag_writes
from ordo.storage.stores import Stores
from ordo.tagging import TagProgress
from ordo.time import TimeUUID, TimeUUIDGenerator
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr
from tag_views_support import entries, progress_of


def race_in_opposite_orders(
    ids: list[str], rounds: int, write: Callable[[list[str], int], None]
) -> list[BaseException]:
    """Run `write(ids, round)` from two threads in step, one with the ids reversed.

    Two journals write the same ids (or one recovers what another writes); their upserts must
    lock rows in one order, or PostgreSQL stops one of two that lock the same rows in opposite
    orders as a deadlock. Returns what the threads raised.
    """
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def run(order: list[str]) -> None:
        try:
            for n in range(1, rounds + 1):
                barrier.wait(10)
                write(order, n)
        except BaseException as exc:  # reported by the caller, with the other thread's
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(order,)) for order in (ids, ids[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_concurrent_progress_writes_over_the_same_rows_in_any_order_all_succeed(
    stores: Stores,
) -> None:
    pids = [f"p{n:02d}" for n in range(30)]
    rounds = 40

    def write(order: list[str], n: int) -> None:
        stores.tag_views.write_progress(
            [
                TagProgress(
                    persistence_id=PersistenceId(pid),
                    tag=Tag("t"),
                    sequence_nr=SequenceNr(n),
                    tag_pid_sequence_nr=TagPidSequenceNr(n),
                    timeuuid=TimeUUID.min_for_epoch_ns(n * 10**9),
                )
                for pid in order
            ]
        )

    failures = race_in_opposite_orders(pids, rounds, write)

    assert not failures, failures[0]
    assert {progress_of(stores, pid, "t").sequence_nr for pid in pids} == {rounds}


def test_concurrent_writes_of_the_same_new_tag_view_rows_in_any_order_all_succeed(
    stores: Stores,
) -> None:
    pids = [f"p{n:02d}" for n in range(30)]
    rounds = 40
    uuids = TimeUUIDGenerator(SystemClock())
    events = {
        pid: [
            PersistedEvent(
                persistence_id=PersistenceId(pid),
                sequence_nr=SequenceNr(n),
                timeuuid=uuids.next(),
                writer_uuid="w",
                serializer="json",
                manifest="",
                payload_bytes=b"{}",
                metadata_json=None,
                tags={Tag("t"): TagPidSequenceNr(n)},
            )
            for n in range(1, rounds + 1)
        ]
        for pid in pids
    }
    for written in events.values():
        stores.journal.write_events(written, expected_sequence_nr=SequenceNr(0))

    def write(order: list[str], n: int) -> None:  # both threads insert the round's new rows
        stores.tag_views.write_tag_views(
            [
                write
                for pid in order
                for write in tag_writes(
                    [(events[pid][n - 1], Tag("t"), TagPidSequenceNr(n))], BucketSize.HOUR
                )
            ]
        )

    failures = race_in_opposite_orders(pids, rounds, write)

    assert not failures, failures[0]
    assert len(entries(stores, "t")) == len(pids) * rounds
