"""The planner's summarised pages (packed by the database, numpy) against the rows."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest

from operations_support import execute
from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.query import TagViewPage
from ordo.spark.key_runs import KeyRunReader
from ordo.storage.stores import Stores
from ordo.time import BucketSize, format_first_time_bucket
from ordo.types import Tag, TimeBucket
from tag_view_doubles import reference_runs

FIRST_MS = time.time_ns() // 1_000_000 - 3_600_000
WRITTEN_AT_MS = FIRST_MS + 1_800_000
"""When the tests' events are written (a clock that stands still): the bucket to read is
theirs. The bucket of the moment a test reads was another once an hour began in between."""
WRITE = EventsByTagSettings(
    first_time_bucket=format_first_time_bucket(FIRST_MS), flush_interval=timedelta(0)
)
TAG = Tag("order")
LAST_KEY = b"\xff" * 16


def _pages_agree(stores: Stores, url: str, bucket: TimeBucket, limit: int) -> int:
    """Walk the bucket in pages; every summary must match the rows (the key reader's runs of
    one). Returns whole pages."""
    whole = 0
    request = TagViewPage(tag=TAG, time_bucket=bucket, after=b"", up_to=LAST_KEY, limit=limit)
    reader = KeyRunReader(stores.packed_pages)
    while True:
        rows = list(stores.tag_view_key_reader.read_tag_view(request))
        page = reader.read_runs(request)
        assert page.row_count == len(rows)
        if not rows:
            return whole
        expected = reference_runs(rows)
        if expected is None:
            assert page.runs is None
        else:
            assert page.runs is not None
            assert sorted(page.runs) == sorted(expected)
            whole += 1
        request = replace(request, after=rows[-1].offset_key)


@pytest.mark.parametrize("limit", [7, 50, 1000])
def test_summaries_match_the_rows_of_clean_and_damaged_pages(
    journal_url: str, stores: Stores, limit: int
) -> None:
    clock = ManualClock(WRITTEN_AT_MS * 1_000_000)
    with open_journal(journal_url, settings=WRITE, clock=clock) as journal:
        for i in range(120):
            journal.append(f"order-{i % 5}", [NewEvent.of({"i": i}, tags=["order"])])
    bucket = TimeBucket(BucketSize.HOUR.key(WRITTEN_AT_MS))
    assert _pages_agree(stores, journal_url, bucket, limit) > 0
    execute(
        journal_url,
        "DELETE FROM tag_views WHERE persistence_id = 'order-1' AND tag_pid_sequence_nr = 9",
    )
    execute(  # a duplicate of order-3's nr 20 as order-2's, with another offset
        journal_url,
        "INSERT INTO tag_views SELECT tag, timebucket, timeuuid, 'order-2', tag_pid_sequence_nr, "
        "sequence_nr, persistence_id_hash, writer_uuid, serializer, manifest, payload, metadata, "
        "tags FROM tag_views WHERE persistence_id = 'order-3' AND tag_pid_sequence_nr = 20",
    )
    _pages_agree(stores, journal_url, bucket, limit)
