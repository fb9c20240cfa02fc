"""Packed pages (one string per column, ordo.storage.packed_reads) hold what the rows hold.

Run once per backend through `journal_url`; the rows read by `read_tag_view` are the reference.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.query import TagViewPage
from ordo.storage.packed_reads import TAG_VIEW_PACKING, TEXT_SEPARATOR, PackedRows, Packing
from ordo.storage.stores import Stores
from ordo.time import BucketSize, format_first_time_bucket
from ordo.types import PersistenceId, Tag, TimeBucket

FIRST_MS = time.time_ns() // 1_000_000 - 3_600_000
WRITE = EventsByTagSettings(
    first_time_bucket=format_first_time_bucket(FIRST_MS), flush_interval=timedelta(0)
)
WRITTEN_AT_MS = FIRST_MS + 1_800_000
"""When the tests' events are written (a clock that stands still): the bucket to read is
theirs. The bucket of the moment a test reads was another once an hour began in between."""
TAG = Tag("t")
LAST_KEY = b"\xff" * 16
COLUMNS = TAG_VIEW_PACKING


def _as_envelopes(packed: PackedRows) -> list[tuple[object, ...]]:
    """The packed page back as rows, with plain Python, to compare with read_tag_view's."""
    columns: dict[str, list[object]] = {}
    for name, packing in COLUMNS:
        if packing is Packing.KEY:
            keys = packed.keys[name]
            columns[name] = [keys[i : i + 16] for i in range(0, 16 * packed.count, 16)]
        elif packing is Packing.INT:
            columns[name] = [int(n) for n in packed.ints[name].split(",") if n]
        elif packing is Packing.BLOB:
            data, lengths = packed.blobs[name]
            blobs: list[object] = []
            start = 0
            for length in (int(n) for n in lengths.split(",") if n):
                blobs.append(data[start : start + length])
                start += length
            columns[name] = blobs
        else:
            joined = packed.texts[name].split(bytes([TEXT_SEPARATOR])) if packed.count else []
            texts: list[object] = [text.decode() for text in joined]
            for i, flag in enumerate(packed.nulls.get(name, "")):
                texts[i] = None if flag == "1" else texts[i]
            columns[name] = texts
    return list(zip(*columns.values(), strict=True))


def _pages_match(stores: Stores, page: TagViewPage) -> int:
    """Walk the pages from `page` on, packed and as rows; returns how many held rows."""
    pages = 0
    while True:
        rows = list(stores.tag_view_reader.read_tag_view(page))
        packed = stores.packed_pages.read_packed(page, COLUMNS)
        assert _as_envelopes(packed) == [tuple(row) for row in rows]
        if not rows:
            return pages
        pages += 1
        page = replace(page, after=rows[-1].offset_key)


@pytest.mark.parametrize(
    ("limit", "persistence_id", "hash_mask"),
    [(4, None, None), (1000, None, None), (1000, None, (1, 1)), (3, PersistenceId("pid-1"), None)],
)
def test_packed_pages_hold_the_rows(
    journal_url: str,
    stores: Stores,
    limit: int,
    persistence_id: PersistenceId | None,
    hash_mask: tuple[int, int] | None,
) -> None:
    clock = ManualClock(WRITTEN_AT_MS * 1_000_000)
    with open_journal(journal_url, settings=WRITE, clock=clock) as journal:
        for i in range(30):
            event = NewEvent.of({"i": i, "text": "ü, 🙂"}, tags=[TAG])
            if i % 3 == 0:
                event = NewEvent.of(b"" if i % 2 else b"\x00\x1f\xff", tags=[TAG])
            if i > 20:
                event = NewEvent.of(i, tags=[TAG], metadata={"trace": f"m{i}"})
            journal.append(f"pid-{i % 4}", [event])
        journal.append("with\x1fseparator, ünicode", [NewEvent.of(1, tags=[TAG])])
        # code points 0xFF and 0xFE: two UTF-8 bytes each, neither of them the separator byte
        manifests = ("\xfe\xff", "")
        for nr, manifest in enumerate(manifests, start=2):
            event = NewEvent.of(nr, tags=[TAG], manifest=manifest, metadata={"\xff": ""})
            journal.append("\xff\xfe", [event])
    first = TagViewPage(
        tag=TAG,
        time_bucket=TimeBucket(BucketSize.HOUR.key(WRITTEN_AT_MS)),
        after=b"",
        up_to=LAST_KEY,
        limit=limit,
        persistence_id=persistence_id,
        hash_mask=hash_mask,
    )
    assert _pages_match(stores, first) > 0


def test_an_empty_page_packs_to_nothing(stores: Stores) -> None:
    packed = stores.packed_pages.read_packed(
        TagViewPage(tag=TAG, time_bucket=TimeBucket(0), after=b"", up_to=LAST_KEY, limit=10),
        COLUMNS,
    )
    assert packed.count == 0
    assert _as_envelopes(packed) == []
