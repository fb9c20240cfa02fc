"""The planner's pages read by two processes (ordo.spark.read_ahead) against one process's."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.query import TagViewPage
from ordo.spark.offsets import EventsByTagOffset
from ordo.spark.options import EventsByTagOptions
from ordo.spark.planner import EventsByTagPlanner
from ordo.spark.read_ahead import ReadAheadPages
from ordo.storage.open import open_stores
from ordo.storage.packed_reads import TAG_VIEW_KEY_PACKING, TAG_VIEW_PACKING, PackedRows, joined
from ordo.storage.sqlite.tag_view_store import SQLiteTagViewStore
from ordo.storage.stores import Stores
from ordo.time import format_first_time_bucket
from ordo.types import PersistenceId, Tag, TimeBucket

TAG = Tag("order")
LAST_KEY = b"\xff" * 16
LIMIT = 1_000
FIRST_MS = time.time_ns() // 1_000_000 - 3_600_000
SETTINGS = EventsByTagSettings(
    first_time_bucket=format_first_time_bucket(FIRST_MS),
    flush_interval=timedelta(0),
    max_message_batch_size=1_000,
)

Row = tuple[bytes, bytes, str]


def _journal(path: Path, *, events: int, ids: int, per_append: int = 100) -> str:
    """`events` events of TAG over `ids` persistence ids, on the real clock (the split point
    is guessed from the time a page spans)."""
    url = f"sqlite:///{path}"
    with open_journal(url, settings=SETTINGS) as journal:
        for k, start in enumerate(range(0, events, per_append)):
            batch = [NewEvent.of({"i": i}, tags=[TAG]) for i in range(start, start + per_append)]
            journal.append(f"order-{k % ids}", batch)
    return url


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _journal(tmp_path_factory.mktemp("read-ahead") / "journal.db", events=30_000, ids=30)


@pytest.fixture
def stores(journal: str) -> Iterator[Stores]:
    opened = open_stores(journal)
    yield opened
    opened.close()


def _rows(page: PackedRows) -> list[Row]:
    keys = page.keys["timeuuid"]
    if not page.count:
        return []
    ids = page.texts["persistence_id"].split(b"\xff")
    numbers = page.ints["tag_pid_sequence_nr"].split(",")
    return [(keys[16 * i : 16 * i + 16], ids[i], numbers[i]) for i in range(page.count)]


def _buckets(stores: Stores) -> list[TimeBucket]:
    first = stores.tag_view_key_reader.next_bucket(
        TAG, after=TimeBucket(0), up_to=TimeBucket(2**62)
    )
    assert first is not None
    buckets = [first]
    while (
        found := stores.tag_view_key_reader.next_bucket(
            TAG, after=buckets[-1], up_to=TimeBucket(2**62)
        )
    ) is not None:
        buckets.append(found)
    return buckets


def _request(
    bucket: TimeBucket, after: bytes, *, up_to: bytes = LAST_KEY, limit: int = LIMIT
) -> TagViewPage:
    """A page of the bucket as the planner asks for it (all persistence ids, no segment)."""
    return TagViewPage(tag=TAG, time_bucket=bucket, after=after, up_to=up_to, limit=limit)


def _walk(reader: ReadAheadPages | SQLiteTagViewStore, bucket: TimeBucket) -> list[list[Row]]:
    """A bucket's pages as the state machine reads them: on after a page of at least LIMIT."""
    pages, after = [], b""
    while True:
        page = reader.read_packed(_request(bucket, after), TAG_VIEW_KEY_PACKING)
        pages.append(_rows(page))
        if page.count < LIMIT:
            return pages
        after = max(row[0] for row in pages[-1])


def _children() -> set[int]:
    """The read-ahead processes this process started that are still there."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
            found.update(
                int(pid)
                for pid in pids
                if b"read_ahead_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
            )
        except FileNotFoundError:  # a thread or a process that ended meanwhile
            continue
    return found


def _read_ahead(stores: Stores) -> ReadAheadPages:
    assert isinstance(stores.packed_pages, SQLiteTagViewStore)
    return ReadAheadPages(stores.packed_pages)


def test_pages_read_ahead_hold_the_rows_one_process_reads_in_order(stores: Stores) -> None:
    assert isinstance(stores.packed_pages, SQLiteTagViewStore)
    pages = _read_ahead(stores)
    try:
        for bucket in _buckets(stores):
            alone, ahead = _walk(stores.packed_pages, bucket), _walk(pages, bucket)
            assert [row for page in ahead for row in page] == [row for p in alone for row in p]
            assert all(len(page) == LIMIT for page in alone[:-1])
        assert max(len(page) for page in ahead) > LIMIT  # a page joined with the other's
    finally:
        pages.close()
    assert _children() == set()


def test_a_read_that_does_not_continue_the_pages_read_ahead_is_read_directly(
    stores: Stores,
) -> None:
    assert isinstance(stores.packed_pages, SQLiteTagViewStore)
    bucket = _buckets(stores)[0]
    pages = _read_ahead(stores)
    try:
        first = _rows(pages.read_packed(_request(bucket, b""), TAG_VIEW_KEY_PACKING))
        assert _children()  # the other process started on the full page
        next_page = _request(bucket, first[-1][0])
        for request in (
            replace(next_page, persistence_id=PersistenceId(first[0][1].decode())),
            _request(bucket, first[10][0]),
            replace(next_page, up_to=first[-1][0][:15] + b"\xff"),
        ):
            expected = stores.packed_pages.read_packed(request, TAG_VIEW_KEY_PACKING)
            got = pages.read_packed(request, TAG_VIEW_KEY_PACKING)
            assert _rows(got) == _rows(expected)
    finally:
        pages.close()


def test_pages_are_all_there_when_the_other_process_dies(stores: Stores) -> None:
    assert isinstance(stores.packed_pages, SQLiteTagViewStore)
    bucket = _buckets(stores)[0]
    expected = [row for page in _walk(stores.packed_pages, bucket) for row in page]
    pages = _read_ahead(stores)
    try:
        got, after = [], b""
        while True:
            page = pages.read_packed(_request(bucket, after), TAG_VIEW_KEY_PACKING)
            for child in _children():
                os.kill(child, signal.SIGKILL)
            got.extend(_rows(page))
            if page.count < LIMIT:
                break
            after = max(row[0] for row in _rows(page))
        assert got == expected
    finally:
        pages.close()


def test_a_plan_over_pages_read_ahead_delivers_every_event(tmp_path: Path) -> None:
    """Five pages of the planner (50,000 keys): the page that joins its last short page with
    the other process's first holds more than 50,000, and more follow."""
    ids = 50
    url = _journal(tmp_path / "journal.db", events=250_000, ids=ids, per_append=1_000)
    options = EventsByTagOptions.from_spark(
        {
            "journal": url,
            "tag": TAG,
            "firstTimeBucket": format_first_time_bucket(FIRST_MS),
            "eventualConsistencyDelayMs": "0",
        }
    )
    planner = EventsByTagPlanner(options, resume_after="", now_ns=time.time_ns())
    try:
        planner.cap_at(time.time_ns())
        start = EventsByTagOffset(position="", lo="", hi="", pids={}, segments=[], tag=TAG)
        end = planner.plan(start, now_ns=time.time_ns(), max_rows=None)
    finally:
        planner.close()
    assert end.pids == {f"order-{k}": [1, 5_000] for k in range(ids)}
    assert _children() == set()


def test_pages_are_read_alone_when_the_other_process_cannot_start(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interpreter that is not there (an embedded Python without one, a removed venv)."""
    assert isinstance(stores.packed_pages, SQLiteTagViewStore)
    bucket = _buckets(stores)[0]
    expected = _walk(stores.packed_pages, bucket)
    monkeypatch.setattr(sys, "executable", str(Path(__file__).with_name("no-such-python")))
    pages = _read_ahead(stores)
    try:
        assert _walk(pages, bucket) == expected
    finally:
        pages.close()
    assert _children() == set()


def test_two_joined_pages_are_the_page_of_both(stores: Stores) -> None:
    """Every packing (whole rows too): what one read of both pages' rows packs."""
    bucket = _buckets(stores)[0]

    def page(after: bytes, limit: int) -> PackedRows:
        return stores.packed_pages.read_packed(
            _request(bucket, after, limit=limit), TAG_VIEW_PACKING
        )

    first = page(b"", 300)
    second = page(max(row[0] for row in _rows(first)), 200)
    assert joined(first, second, TAG_VIEW_PACKING) == page(b"", 500)
    assert joined(first, page(LAST_KEY, 10), TAG_VIEW_PACKING) == first
