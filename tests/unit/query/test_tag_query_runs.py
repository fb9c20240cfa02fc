"""A query given a RunReader (pages summarised per persistence id) decides like one reading rows.

The summary here is a plain-Python reference; tests/spark/test_key_runs.py checks that the
planner's Arrow summary agrees with it on a real database.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordo.errors import MissingTaggedEventError
from ordo.query import NO_OFFSET, KeyRun, Offset, RunPage, TagQuery, TagViewPage, tag_query
from ordo.types import Tag, TimeBucket
from tag_view_doubles import (
    BUCKET_SIZE,
    EPOCH_MS,
    TAG,
    InMemoryTagView,
    Row,
    at,
    offset_at,
    reference_runs,
    row,
)
from tag_view_doubles import (
    settings as query_settings,
)


class InMemoryRuns:
    """The in-memory tag view as KeyRuns: single rows, and pages summarised in Python."""

    def __init__(self, view: InMemoryTagView) -> None:
        self.view = view
        self.whole_pages = 0

    def read_tag_view(self, page: TagViewPage) -> Sequence[KeyRun]:
        rows = self.view.read_tag_view(page)
        return [KeyRun(r.offset_key, r.tag_pid_sequence_nr, *r) for r in rows]

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        return self.view.next_bucket(tag, after=after, up_to=up_to)

    def read_runs(self, page: TagViewPage) -> RunPage:
        rows = self.view.read_tag_view(page)
        runs = reference_runs(rows)
        self.whole_pages += runs is not None and bool(rows)
        return RunPage(runs=runs, row_count=len(rows))


def _outcome(
    rows: list[Row], *, offset: Offset, use_runs: bool, now_ms: float
) -> tuple[dict[str, list[int]], str | None, int]:
    """Poll a current query from `now_ms` on for 10 s; what it delivered, raised, and how."""
    view = InMemoryTagView()
    view.add(*rows)
    reader = InMemoryRuns(view)
    query: TagQuery[KeyRun] = TagQuery(
        reader,
        tag=TAG,
        offset=offset,
        settings=query_settings(
            gap_timeout=timedelta(seconds=2),
            new_persistence_id_scan_timeout=timedelta(seconds=1),
        ),
        bucket_size=BUCKET_SIZE,
        first_time_bucket_ms=EPOCH_MS,
        now_ns=at(now_ms),
        is_live=False,
        runs=reader if use_runs else None,
    )
    delivered: dict[str, list[int]] = {}
    failure = None
    now = now_ms
    try:
        while now < now_ms + 10_000:
            step = query.poll(at(now))
            for run in step.rows:
                nrs = range(run.first_nr, run.tag_pid_sequence_nr + 1)
                delivered.setdefault(run.persistence_id, []).extend(nrs)
            if step.is_complete:
                break
            now += 250 if step.wait_ns else 0
    except MissingTaggedEventError as error:
        failure = f"missing {error.persistence_id}"
    return delivered, failure, reader.whole_pages


@st.composite
def tag_views(draw: st.DrawFn) -> list[Row]:
    """Rows of a few ids over two minute buckets, some with gaps, duplicates or swaps."""
    rows: list[Row] = []
    for pid in range(draw(st.integers(1, 5))):
        first = draw(st.sampled_from([1, 1, 1, 2, 4]))
        count = draw(st.integers(1, 8))
        nrs = list(range(first, first + count))
        if count > 2 and draw(st.booleans()):
            del nrs[draw(st.integers(1, count - 2))]  # a gap
        clock = draw(st.integers(0, 100_000))
        times = []
        for _ in nrs:
            clock += draw(st.integers(1, 15_000))  # often into the next bucket
            times.append(clock)
        if len(nrs) > 1 and draw(st.integers(0, 4)) == 0:
            i = draw(st.integers(0, len(nrs) - 2))
            times[i], times[i + 1] = times[i + 1], times[i]  # written out of offset order
        rows += [row(f"p{pid}", nr, ms) for nr, ms in zip(nrs, times, strict=True)]
        if draw(st.integers(0, 5)) == 0:
            rows.append(row(f"p{pid}", nrs[0], times[-1] + 1))  # a duplicate, later
    return rows


@settings(max_examples=300, deadline=None)
@given(tag_views(), st.sampled_from([None, 0, 30_000, 90_000, 200_000]))
def test_summarised_pages_deliver_what_rows_deliver(rows: list[Row], start_ms: int | None) -> None:
    offset: Offset = NO_OFFSET if start_ms is None else offset_at(start_ms)
    now_ms = 230_000.0
    by_rows = _outcome(rows, offset=offset, use_runs=False, now_ms=now_ms)
    by_runs = _outcome(rows, offset=offset, use_runs=True, now_ms=now_ms)
    assert by_runs[:2] == by_rows[:2]


@pytest.mark.parametrize(("run_page", "pages"), [(tag_query.RUN_PAGE, 1), (50, 14)])
def test_a_clean_tag_view_is_taken_a_page_at_a_time(
    run_page: int, pages: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each whole page moves the scan past it: none is read twice, none row by row."""
    monkeypatch.setattr(tag_query, "RUN_PAGE", run_page)
    rows = [row(f"p{i % 7}", i // 7 + 1, 100 + i) for i in range(700)]
    delivered, failure, whole_pages = _outcome(rows, offset=NO_OFFSET, use_runs=True, now_ms=5_000)
    assert failure is None
    assert delivered == {f"p{p}": list(range(1, 101)) for p in range(7)}
    assert whole_pages == pages


def test_a_page_with_a_gap_falls_back_to_rows_and_still_fails() -> None:
    rows = [row("a", 1, 100), row("a", 3, 200), row("b", 1, 150)]
    delivered, failure, whole_pages = _outcome(rows, offset=NO_OFFSET, use_runs=True, now_ms=5_000)
    assert (delivered, failure, whole_pages) == ({"a": [1], "b": [1]}, "missing a", 0)


def test_a_run_that_does_not_follow_on_from_the_previous_page_falls_back_and_fails() -> None:
    """a#2 is missing between two buckets' pages: each page is clean, but a#3 does not follow
    the a#1 already delivered, so its run is not taken whole."""
    rows = [row("a", 1, 100), row("b", 1, 200), row("a", 3, 60_100)]
    delivered, failure, _ = _outcome(rows, offset=NO_OFFSET, use_runs=True, now_ms=65_000)
    assert (delivered, failure) == ({"a": [1], "b": [1]}, "missing a")
