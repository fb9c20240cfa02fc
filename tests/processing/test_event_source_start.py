"""Where a segment's stream starts, against real storage: back_track_period before its token."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ordo import Journal, NewEvent
from ordo.clock import ManualClock
from ordo.processing.ports import TokenEntry
from ordo.processing.segment import Segment
from ordo.processing.token import TrackingToken
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.types import PersistenceId
from processing_support import WRITE, source


def test_a_token_before_1970_resumes_after_it(
    journal_factory: Callable[..., Journal], stores: Stores
) -> None:
    """The stream started back_track_period before the token, but no earlier than 1970: a token
    before then (offsets are TimeUUIDs from 1582 on) started it after the token, so the events
    between the two were never handled."""
    clock = ManualClock(int(datetime(1965, 6, 1, tzinfo=UTC).timestamp()) * 1_000_000_000)
    journal = journal_factory(settings=replace(WRITE, flush_interval=timedelta(0)), clock=clock)
    offsets: list[TimeUUID] = []
    for i in range(3):
        offsets += journal.append("a", [NewEvent.of(i, tags=["t"])]).offsets
        clock.advance(365 * 86_400 * 1_000_000_000)
    entry = TokenEntry(
        processor="p",
        segment=Segment.ROOT,
        token=TrackingToken(offsets[0]),
        owner=None,
        claimed_at_ms=None,
        replay_until=None,
    )
    known = {PersistenceId("a"): 1}  # the processed positions a processor passes
    query = source(stores).open(entry, segment=None, now_ns=time.time_ns(), known=known)
    assert [row.payload for row in query.poll(time.time_ns()).rows] == [1, 2]
