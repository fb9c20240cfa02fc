"""Packed pages become the rows they pack, as Arrow, whatever characters their texts hold.

Texts are packed with a separator byte between them (ordo.storage.packed_reads.TEXT_SEPARATOR)
instead of their lengths; persistence ids, manifests and metadata may hold any storable
character, including those whose code point is that byte's value. Each example writes a fresh
SQLite journal (Hypothesis does not reset function-scoped fixtures) and compares the page, as
Arrow, with the rows `read_tag_view` reads.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo import BucketSize, EventsByTagSettings, NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.query import TagViewPage
from ordo.spark.packed_arrow import int_values, packed_table
from ordo.storage.open import stores_at
from ordo.storage.packed_reads import TAG_VIEW_PACKING
from ordo.types import Tag, TimeBucket

pytestmark = pytest.mark.spark

START_NS = int(datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC).timestamp()) * 10**9
SETTINGS = EventsByTagSettings(bucket_size=BucketSize.MINUTE, flush_interval=timedelta(0))
BUCKET = TimeBucket(BucketSize.MINUTE.key(START_NS // 1_000_000))
TAG = Tag("t")
LAST_KEY = b"\xff" * 16

characters = st.one_of(
    st.sampled_from("\xff\xfe\xc0\x1f,ÿ🙂"),  # the separator's value as a code point, and kin
    st.characters(codec="utf-8", exclude_characters="\x00"),  # what ordo stores
)
texts = st.text(characters, max_size=8)
events = st.lists(
    st.tuples(
        st.text(characters, min_size=1, max_size=8),  # persistence id
        texts,  # manifest
        st.none() | st.dictionaries(texts, texts, max_size=2),  # metadata
    ),
    min_size=1,
    max_size=12,
)


@given(events=events, limit=st.integers(min_value=1, max_value=13))
def test_a_packed_page_as_arrow_is_the_page_of_rows(
    events: list[tuple[str, str, dict[str, str] | None]], limit: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'journal.db'}"
        clock = ManualClock(START_NS)
        with open_journal(url, settings=SETTINGS, clock=clock) as journal:
            for n, (pid, manifest, metadata) in enumerate(events):
                event = NewEvent.of(n, tags=[TAG], manifest=manifest, metadata=metadata)
                journal.append(pid, [event])
                clock.advance(1_000)
        with stores_at(url, mode="read") as stores:
            request = TagViewPage(
                tag=TAG, time_bucket=BUCKET, after=b"", up_to=LAST_KEY, limit=limit
            )
            rows = stores.tag_view_reader.read_tag_view(request)
            page = stores.packed_pages.read_packed(request, TAG_VIEW_PACKING)
    table = packed_table(page, TAG_VIEW_PACKING)
    assert len(rows) == min(limit, len(events))
    assert [tuple(row.values()) for row in table.to_pylist()] == [tuple(row) for row in rows]


@given(
    values=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=20),
    cut=st.tuples(st.integers(0, 20), st.integers(0, 20)),
    kind=st.sampled_from([pa.int64(), pa.int32()]),
)
def test_int_values_are_the_column_s_values_sliced_or_chunked(
    values: list[int], cut: tuple[int, int], kind: pa.DataType
) -> None:
    if kind == pa.int32():
        values = [v % 2**31 for v in values]
    column = pa.array(values, kind)[min(cut) : max(cut)]
    expected = values[min(cut) : max(cut)]
    assert int_values(column).tolist() == expected
    assert int_values(pa.chunked_array([column, column], kind)).tolist() == expected * 2


def test_int_values_refuse_nulls() -> None:
    with pytest.raises(ValueError, match="1 nulls"):
        int_values(pa.array([1, None, 3], pa.int64()))
