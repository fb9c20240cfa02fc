"""`read_partition`, the executor side of `ordo_events_by_tag`, on real journals (no Spark).

Each backend's journal is written by the library with minute buckets, then segments are read
and compared with what the journal says it appended.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pyarrow as pa
import pytest

from operations_support import duplicate_tag_view
from ordo import (
    BucketSize,
    EventsByTagSettings,
    Journal,
    NewEvent,
    PersistedEvent,
    open_journal,
)
from ordo.clock import ManualClock
from ordo.hashing import stable_hash
from ordo.journal.event import encode_tags
from ordo.spark import reading
from ordo.spark.events_by_tag_source import SegmentPartition
from ordo.spark.reading import PAGE, SCHEMA, read_partition
from ordo.storage.open import OpenMode, stores_at
from ordo.storage.sqlite.tag_view_store import SQLiteTagViewStore
from ordo.storage.stores import Stores
from ordo.types import Tag

pytestmark = pytest.mark.spark

JournalFactory = Callable[..., Journal]

START_NS = int(datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC).timestamp()) * 10**9
SETTINGS = EventsByTagSettings(bucket_size=BucketSize.MINUTE, flush_interval=timedelta(0))
ORDER = Tag("order")
NULL_ROUNDS = 60  # rounds of 7 events for each of 3 pids per segment: 1260 rows per segment


def _pids() -> list[str]:
    """Three persistence ids in each of the two segments of mask 1."""
    by_segment: dict[int, list[str]] = {0: [], 1: []}
    for n in range(100):
        pid = f"order-{n}"
        if len(by_segment[stable_hash(pid) & 1]) < 3:
            by_segment[stable_hash(pid) & 1].append(pid)
    return by_segment[0] + by_segment[1]


PIDS = _pids()


def _write(journal: Journal, clock: ManualClock) -> list[PersistedEvent]:
    """Write two minute buckets; return every event tagged "order", in offset order.

    The first minute begins with more than 1024 rows per segment without metadata, then has
    rows with and without it: a reader that guesses column types from its first rows must not
    guess wrong. Untagged and otherwise-tagged events are written in between.
    """
    for n in range(NULL_ROUNDS):
        for pid in PIDS:
            journal.append(pid, [NewEvent.of({"n": n, "k": k}, tags=["order"]) for k in range(7)])
            clock.advance(1_000_000)
    for minute in range(2):
        for pid in PIDS:
            journal.append(
                pid,
                [
                    NewEvent.of(
                        k,
                        tags=["order", "other"] if k % 3 else ["order"],
                        manifest=f"m{k}",
                        metadata={"k": k, "text": "é"} if k % 2 else None,
                    )
                    for k in range(9)
                ],
            )
            journal.append(pid, [NewEvent.of(b"\x00raw", tags=["other"]), NewEvent.of("x")])
            clock.advance(1_000_000)
        if minute == 0:
            clock.advance(60 * 10**9)
    events = [e for pid in PIDS for e in journal.replay(pid) if "order" in e.tags]
    return sorted(events, key=lambda e: e.timeuuid.to_bytes())


def _expected(
    events: list[PersistedEvent],
    segment: tuple[int, int],
    lo: bytes,
    hi: bytes,
    spans: dict[str, list[int]],
) -> pa.Table:
    """What read_partition must return, built from the journal's own account of its events."""
    rows = [
        e
        for e in events
        if lo <= e.timeuuid.to_bytes() <= hi
        and stable_hash(e.persistence_id) & segment[1] == segment[0]
        and e.persistence_id in spans
        and spans[e.persistence_id][0] <= e.tags[ORDER] <= spans[e.persistence_id][1]
    ]
    rows.sort(key=lambda e: (e.persistence_id, e.tags[ORDER]))
    return pa.table(
        {
            "offset": [str(e.timeuuid) for e in rows],
            "timestamp": [e.timeuuid.epoch_ns // 1000 for e in rows],
            "persistence_id": [e.persistence_id for e in rows],
            "sequence_nr": [e.sequence_nr for e in rows],
            "tag_pid_sequence_nr": [e.tags[ORDER] for e in rows],
            "segment": [f"{segment[0]}/{segment[1]}"] * len(rows),
            "tags": [encode_tags(e.tags) for e in rows],
            "manifest": [e.manifest for e in rows],
            "serializer": [e.serializer for e in rows],
            "payload": [e.payload_bytes for e in rows],
            "metadata": [e.metadata_json for e in rows],
        },
        schema=SCHEMA,
    )


def _read(partition: SegmentPartition) -> pa.Table:
    batches = list(read_partition(partition))
    assert all(0 < b.num_rows <= PAGE and b.schema == SCHEMA for b in batches)
    return pa.Table.from_batches(batches, schema=SCHEMA)


def _partition(
    url: str, segment: tuple[int, int], lo: bytes, hi: bytes, spans: dict[str, list[int]]
) -> SegmentPartition:
    return SegmentPartition(
        url, "order", segment, lo.hex(), hi.hex(), spans, BucketSize.MINUTE.value
    )


@pytest.mark.parametrize("read_page", [reading.READ_PAGE, 97])
def test_a_segment_reads_the_named_spans_within_lo_hi_ordered_per_persistence_id(
    journal_url: str,
    journal_factory: JournalFactory,
    read_page: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With small packed pages too: the reads go on from each page's greatest offset."""
    monkeypatch.setattr(reading, "READ_PAGE", read_page)
    clock = ManualClock(START_NS)
    events = _write(journal_factory(settings=SETTINGS, clock=clock), clock)
    keys = [e.timeuuid.to_bytes() for e in events]
    lo, hi = keys[2], keys[-4]  # inclusive bounds, in the first and the second minute
    assert BucketSize.MINUTE.key(events[2].timeuuid.epoch_ms) < BucketSize.MINUTE.key(
        events[-4].timeuuid.epoch_ms
    )
    spans = {pid: [1, 10_000] for pid in PIDS}
    spans[PIDS[0]] = [5, 200]  # cuts both ends of the segment 0 persistence id's rows
    spans[PIDS[4]] = [300, 301]
    del spans[PIDS[5]]

    for segment in [(0, 1), (1, 1)]:
        scanned = [e for e in events[2:-3] if stable_hash(e.persistence_id) & 1 == segment[0]]
        first_metadata = next(i for i, e in enumerate(scanned) if e.metadata_json is not None)
        assert first_metadata > 1024  # the segment's query meets over 1024 NULLs first
        read = _read(_partition(journal_url, segment, lo, hi, spans))
        expected = _expected(events, segment, lo, hi, spans)
        assert 0 < read.column("metadata").null_count < read.num_rows
        assert read.equals(expected)


def test_rows_are_cut_into_pages_and_nothing_named_reads_nothing(
    journal_url: str, journal_factory: JournalFactory
) -> None:
    clock = ManualClock(START_NS)
    journal = journal_factory(settings=SETTINGS, clock=clock)
    for _ in range(PAGE // 100 + 1):
        journal.append("one", [NewEvent.of(k, tags=["order"]) for k in range(100)])
    events = list(journal.replay("one"))
    lo, hi = events[0].timeuuid.to_bytes(), events[-1].timeuuid.to_bytes()
    segment = (stable_hash("one") & 1, 1)
    spans = {"one": [1, len(events)]}

    read = list(read_partition(_partition(journal_url, segment, lo, hi, spans)))
    assert [b.num_rows for b in read] == [PAGE, len(events) - PAGE]
    ordered = pa.Table.from_batches(read).column("tag_pid_sequence_nr").to_pylist()
    assert ordered == list(range(1, len(events) + 1))

    other = (1 - segment[0], 1)
    assert list(read_partition(_partition(journal_url, other, lo, hi, spans))) == []
    assert list(read_partition(_partition(journal_url, segment, lo, hi, {"two": [1, 9]}))) == []
    later = bytes.fromhex(f"{int.from_bytes(hi, 'big') + (60 * 10**7 << 64):032x}")
    assert list(read_partition(_partition(journal_url, segment, later, later, spans))) == []


def test_an_event_whose_tag_views_row_is_there_twice_is_read_once(
    journal_url: str, journal_factory: JournalFactory
) -> None:
    """The planner delivers nr 2 once and names it in the span, which both copies match."""
    clock = ManualClock(START_NS)
    journal = journal_factory(settings=SETTINGS, clock=clock)
    journal.append("one", [NewEvent.of(k, tags=["order"]) for k in range(4)])
    duplicate_tag_view(journal_url, "order", "one", 2)  # a copy at nr 3's offset
    events = list(journal.replay("one"))
    lo, hi = events[0].timeuuid.to_bytes(), events[-1].timeuuid.to_bytes()
    segment = (stable_hash("one") & 1, 1)

    read = _read(_partition(journal_url, segment, lo, hi, {"one": [1, 4]}))

    assert read.column("tag_pid_sequence_nr").to_pylist() == [1, 2, 3, 4]
    assert read.column("offset").to_pylist() == [str(e.timeuuid) for e in events]


def test_a_batch_spanning_a_quiet_month_reads_only_the_buckets_that_hold_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two events 30 days apart in minute buckets: a handful of queries, not one per minute.

    The planner jumps over empty buckets (TagQuery asks the store for the next one holding
    rows); the executor reading the batch they end up in must too, or it queries 43,200
    empty minutes. Its statements are counted on the real SQLite connection it reads with.
    """
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    clock = ManualClock(START_NS)
    with open_journal(url, settings=SETTINGS, clock=clock) as journal:
        journal.append("one", [NewEvent.of(1, tags=["order"])])
        clock.advance(30 * 24 * 3600 * 10**9)
        journal.append("one", [NewEvent.of(2, tags=["order"])])
        events = list(journal.replay("one"))
    lo, hi = events[0].timeuuid.to_bytes(), events[-1].timeuuid.to_bytes()
    statements: list[str] = []

    @contextmanager
    def traced(location: str, *, mode: OpenMode = "migrate") -> Iterator[Stores]:
        """The executor's own stores, with its connection's statements recorded."""
        with stores_at(location, mode=mode) as stores:
            with cast(SQLiteTagViewStore, stores.tag_views)._db.connection() as conn:
                cast(sqlite3.Connection, conn).set_trace_callback(statements.append)
            yield stores

    monkeypatch.setattr(reading, "stores_at", traced)
    segment = (stable_hash("one") & 1, 1)
    read = _read(_partition(url, segment, lo, hi, {"one": [1, 2]}))

    assert read.column("offset").to_pylist() == [str(e.timeuuid) for e in events]
    tag_view_reads = [s for s in statements if "tag_views" in s]
    assert len(tag_view_reads) == 3, len(tag_view_reads)  # a bucket, the next one, a bucket
