"""A reset tracking processor replays what it handled before, each event flagged as a replay."""

from __future__ import annotations

from dataclasses import replace

from ordo import Journal, NewEvent
from ordo.processing.control import merge_segment
from ordo.processing.segment import Segment
from ordo.processing.token import PartAhead, TrackingToken
from ordo.storage.stores import Stores
from processing_support import (
    FAST,
    SqlRunner,
    append_events,
    counted,
    counts_processor,
    in_half,
    now_ms,
    wait_for,
)


def test_a_reset_processor_replays_with_the_replay_flag(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    append_events(journal, 60)
    with counts_processor(stores):
        wait_for(lambda: counted(sql) == 60)
    stores.tokens.reset("counts", TrackingToken(), now_ms=0, claim_timeout_ms=0)
    sql("DELETE FROM counts")
    append_events(journal, 20)
    with counts_processor(stores):
        wait_for(lambda: counted(sql) == 80)
    assert int(str(sql("SELECT sum(replays) FROM counts")[0][0])) == 60


def test_a_reset_after_a_merge_replays_what_the_half_ahead_handled(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """A merged token resumes at the lower half's offset; the half ahead handled further.

    The reset used to take the merged token's own offset as the replay boundary, so the
    events of the half ahead past it came back as new (is_replay False).
    """
    behind, ahead = in_half(0, "o"), in_half(1, "o")
    for pid in (behind, ahead):
        for i in range(5):
            journal.append(pid, [NewEvent.of({"i": i}, tags=["t"])])
    settings = replace(FAST, initial_segment_count=2)
    with counts_processor(stores, settings=settings):
        wait_for(lambda: counted(sql) == 10)
    now = now_ms()
    assert merge_segment(stores.tokens, "counts", 0, now_ms=now, claim_timeout_ms=0).is_done
    assert stores.tokens.entries("counts")[0].token.ahead
    stores.tokens.reset("counts", TrackingToken(), now_ms=now, claim_timeout_ms=0)
    sql("DELETE FROM counts")
    for pid in (behind, ahead):
        journal.append(pid, [NewEvent.of({"i": 5}, tags=["t"])])
    with counts_processor(stores, settings=settings):
        wait_for(lambda: counted(sql) == 12)
    assert sorted(sql("SELECT pid, n, replays FROM counts")) == [(behind, 6, 5), (ahead, 6, 5)]


def test_a_replay_boundary_stored_with_parts_ahead_replays_up_to_their_offset(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """Earlier versions stored a reset's boundary with the merged token's parts ahead.

    The worker read only the boundary's own offset (here none), so nothing was a replay.
    """
    append_events(journal, 20)
    with counts_processor(stores):
        wait_for(lambda: counted(sql) == 20)
    stores.tokens.reset("counts", TrackingToken(), now_ms=0, claim_timeout_ms=0)
    (boundary,) = {e.replay_until for e in stores.tokens.entries("counts")}
    assert boundary is not None
    assert boundary.offset is not None
    legacy = TrackingToken(None, (PartAhead(Segment(1, 1), boundary.offset),))
    sql("UPDATE tokens SET replay_until = ?", legacy.to_json())
    sql("DELETE FROM counts")
    with counts_processor(stores):
        wait_for(lambda: counted(sql) == 20)
    assert int(str(sql("SELECT sum(replays) FROM counts")[0][0])) == 20
