"""Tracking processors and events that become visible late, across restarts and merges.

An event is "late" when its tag_views row shows up after rows with later offsets: these tests
hide a row (move it to a table `late`) and show it again, on both backends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from ordo import Journal, NewEvent, QuerySettings
from ordo.clock import ManualClock
from ordo.errors import MissingTaggedEventError
from ordo.hashing import stable_hash
from ordo.processing.control import merge_segment
from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.processing.sequencing import SequencingPolicy, policy_from_name
from ordo.processing.source import EventSource
from ordo.processing.token import TrackingToken
from ordo.query import EventEnvelope
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.tools.cleanup import Cleanup
from ordo.types import Tag
from processing_support import FAST, READ, WRITE, in_half, source, wait_for

Sql = Callable[..., list[tuple[object, ...]]]

LOOKING_BACK = replace(READ, back_track_period=timedelta(seconds=10))
"""READ with a margin: a restarted stream starts back_track_period before its token, and the
late event must lie within that however long a loaded machine takes between two appends."""

HELD = timedelta(minutes=1)
"""How long an operator's claim of segment 0 holds, for the processors that must leave it be:
they judge it by their own claim_timeout, and FAST's 2 s let it lapse while a loaded machine
appended and handled 100 events; the processor then took segment 0 and handled its half too."""


def _recorder(sql: Sql) -> Callable[[EventEnvelope, HandlerContext], None]:
    """A handler counting how often each event was handled, in the batch's transaction."""
    sql("CREATE TABLE handled (event TEXT PRIMARY KEY, times BIGINT NOT NULL)")

    def record(event: EventEnvelope, context: HandlerContext) -> None:
        context.connection.execute(
            f"INSERT INTO handled VALUES ({context.placeholder}, 1) "
            "ON CONFLICT (event) DO UPDATE SET times = handled.times + 1",
            (f"{event.persistence_id}#{event.sequence_nr}",),
        )

    return record


def _handled(sql: Sql) -> list[tuple[object, ...]]:
    return sorted(sql("SELECT event, times FROM handled"))


def _once(*events: str) -> list[tuple[object, ...]]:
    return sorted((event, 1) for event in events)


class _LateRows:
    """Keeps one event's tag_views row out of sight until show(): written, not visible yet.

    A trigger moves the row to a table `late` in the writing transaction, so no reader ever
    sees it before show(). Deleting the row after the append raced a running processor: on a
    loaded machine it read and handled the row first (CI failed so once).
    """

    def __init__(self, sql: Sql, backend: str) -> None:
        self._sql = sql
        self._is_sqlite = backend == "sqlite"

    def hide(self, pid: str, nr: int) -> None:
        """Hide the row of `pid`'s tag pid sequence nr `nr`; call it before the append."""
        where = f"FROM tag_views WHERE persistence_id = '{pid}' AND tag_pid_sequence_nr = {nr}"
        move = f"INSERT INTO late SELECT * {where}; DELETE {where};"
        self._sql("CREATE TABLE late AS SELECT * FROM tag_views WHERE 1 = 0")
        if self._is_sqlite:
            self._sql(f"CREATE TRIGGER hide AFTER INSERT ON tag_views BEGIN {move} END")
            return
        self._sql(
            "CREATE FUNCTION hide() RETURNS trigger LANGUAGE plpgsql "
            f"AS $$ BEGIN {move} RETURN NULL; END $$"
        )
        self._sql(
            "CREATE TRIGGER hide AFTER INSERT ON tag_views FOR EACH STATEMENT "
            "EXECUTE FUNCTION hide()"
        )

    def show(self) -> None:
        """Make the hidden row visible."""
        self._sql("DROP TRIGGER hide" if self._is_sqlite else "DROP TRIGGER hide ON tag_views")
        self._sql("INSERT INTO tag_views SELECT * FROM late")


@pytest.fixture
def late(stores: Stores, sql: Sql) -> _LateRows:
    """Hides an event's tag_views row until shown (one per test)."""
    return _LateRows(sql, stores.backend)


def _append(journal: Journal, pid: str, i: int, **payload: object) -> TimeUUID:
    """Append one event tagged `t`; returns its offset."""
    return journal.append(pid, [NewEvent.of({"i": i, **payload}, tags=["t"])]).offsets[0]


def _has_passed(stores: Stores, offset: TimeUUID) -> bool:
    """Whether every segment's token is at `offset` or beyond: all before it was handled.

    A token moves in the transaction of the batch that handled the events, so an event
    handled twice up to there is in `handled` by then.
    """
    entries = stores.tokens.entries("p")
    return all(e.token.offset is not None and e.token.offset.key >= offset.key for e in entries)


def _paused(journal_factory: Callable[..., Journal], pause: float) -> tuple[Journal, ManualClock]:
    """A journal and its clock, which stands `pause` s back until `_catch_up`: what the journal
    writes before a catch-up lies `pause` s before what it writes after, by the offsets a
    stream compares, without a wait. Written before a processor starts: a live stream would
    have passed it."""
    clock = ManualClock(time.time_ns() - int(pause * 1e9))
    return journal_factory(settings=WRITE, clock=clock), clock


def _catch_up(clock: ManualClock) -> None:
    """Move `clock` to now, where it stands still again."""
    clock.advance(max(0, time.time_ns() - clock.now_ns()))


def _processor(
    stores: Stores,
    handler: Callable[..., None],
    *,
    segments: int,
    query: QuerySettings = LOOKING_BACK,
    policy: SequencingPolicy | None = None,
    claim_timeout: timedelta = FAST.claim_timeout,
) -> TrackingProcessor:
    settings = replace(FAST, initial_segment_count=segments, claim_timeout=claim_timeout)
    return TrackingProcessor(
        "p", source(stores, query=query), stores.tokens, handler, settings=settings, policy=policy
    )


@pytest.mark.parametrize("policy", ["property:g", "concurrent"])
def test_merging_a_segment_that_was_ahead_applies_nothing_twice(
    stores: Stores, journal: Journal, sql: Sql, policy: str
) -> None:
    """Under a policy without per-id positions, a merge must not replay the half ahead.

    Segment 0 is held by an operator while segment 1 processes 100 more events; then the two
    merge. The merged segment starts from segment 0's (lower) token: the events segment 1
    handled already lie after it and used to be handled a second time.
    """
    record = _recorder(sql)

    def processor() -> TrackingProcessor:
        return _processor(
            stores, record, segments=2, policy=policy_from_name(policy), claim_timeout=HELD
        )

    with processor():
        for i in range(100):
            _append(journal, f"p{i % 10}", i, g=i % 7)
        wait_for(lambda: len(_handled(sql)) == 100)
    now = time.time_ns() // 1_000_000
    stores.tokens.claim("p", 0, "operator", now_ms=now, claim_timeout_ms=60_000)
    in_half_one = [i for i in range(100, 200) if _half(policy, f"p{i % 10}", i // 10 + 1, g=i % 7)]
    with processor():
        for i in range(100, 200):
            last = _append(journal, f"p{i % 10}", i, g=i % 7)
        wait_for(lambda: len(_handled(sql)) == 100 + len(in_half_one))  # segment 1's half
    stores.tokens.release("p", 0, "operator")
    (one,) = (e for e in stores.tokens.entries("p") if e.segment.segment_id == 1)
    (zero,) = (e for e in stores.tokens.entries("p") if e.segment.segment_id == 0)
    assert zero.token.is_before(one.token)
    now = time.time_ns() // 1_000_000
    assert merge_segment(stores.tokens, "p", 0, now_ms=now, claim_timeout_ms=60_000).is_done
    with processor():
        wait_for(lambda: _has_passed(stores, last))
    assert sql("SELECT times, count(*) FROM handled GROUP BY times") == [(1, 200)]


def test_a_merge_hands_on_a_late_event_of_the_half_that_was_ahead(
    stores: Stores, journal: Journal, sql: Sql, late: _LateRows
) -> None:
    """Per aggregate, positions decide what was handled, not the merged half's offset.

    x and y are in segment 1, z in segment 0. x#2 is written but not visible when y#2 (a later
    offset) is handled while segment 0 is held, so segment 1's token passes x#2. The two
    merge and x#2 shows up: the merged stream delivers it, and the part ahead used to make the
    worker skip it although nobody had handled it.
    """
    record = _recorder(sql)
    x, y, z = in_half(1, "x"), in_half(1, "y"), in_half(0, "z")
    with _processor(stores, record, segments=2, claim_timeout=HELD):
        for pid in (x, y, z):
            _append(journal, pid, 1)
        wait_for(lambda: len(_handled(sql)) == 3)
    now = time.time_ns() // 1_000_000
    stores.tokens.claim("p", 0, "operator", now_ms=now, claim_timeout_ms=60_000)
    late.hide(x, 2)
    _append(journal, x, 2)
    _append(journal, y, 2)
    with _processor(stores, record, segments=2, claim_timeout=HELD):
        wait_for(lambda: len(_handled(sql)) == 4)
    stores.tokens.release("p", 0, "operator")
    now = time.time_ns() // 1_000_000
    assert merge_segment(stores.tokens, "p", 1, now_ms=now, claim_timeout_ms=60_000).is_done
    late.show()
    with _processor(stores, record, segments=2, claim_timeout=HELD) as running:
        last = _append(journal, x, 3)
        wait_for(lambda: _has_passed(stores, last) or running.failure is not None)
    assert running.failure is None
    assert _handled(sql) == _once(f"{x}#1", f"{x}#2", f"{x}#3", f"{y}#1", f"{y}#2", f"{z}#1")


@pytest.mark.parametrize("pause", [0.0, 0.5, 1.0])
def test_a_restart_hands_on_an_event_that_became_visible_behind_the_token(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Sql,
    late: _LateRows,
    pause: float,
) -> None:
    """One segment: x#2 is written but not visible; y#1, `pause` s later, is handled, so the
    token passes x#2's offset. The processor stops, x#2 shows up, it starts again.

    The stream used to start after the token: its start scan counted x#2 as delivered when it
    lay within offset_scanning_period (0.2 s) of it, otherwise x#3 was a gap whose search
    looked only after the token and failed. It now starts back_track_period before the token
    and knows x's position, so it hands x#2 on.
    """
    record = _recorder(sql)
    journal, clock = _paused(journal_factory, pause)
    _append(journal, "x", 1)
    late.hide("x", 2)
    _append(journal, "x", 2)
    _catch_up(clock)
    _append(journal, "y", 1)
    with _processor(stores, record, segments=1):
        wait_for(lambda: len(_handled(sql)) == 2)
    late.show()
    with _processor(stores, record, segments=1) as running:
        _catch_up(clock)
        last = _append(journal, "x", 3)
        wait_for(lambda: _has_passed(stores, last) or running.failure is not None)
    assert running.failure is None
    assert _handled(sql) == _once("x#1", "x#2", "x#3", "y#1")


def test_a_restarted_processor_waits_for_an_event_that_became_visible_late(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Sql,
    late: _LateRows,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A claim's stream knows the positions its processor processed, so it detects gaps.

    One segment: p's events 1-4 are handled, then q's 1, then the processor stops. p's 5 and
    6 are written, but 5 is not visible yet when the processor starts again. Its stream starts
    from q's offset, over 0.2 s after p's last event: p used to be new to it, so 6 was taken
    as p's first event and handled, and 5 was dropped when it showed up.
    """
    record = _recorder(sql)
    journal, clock = _paused(journal_factory, 0.5)
    for i in range(4):
        _append(journal, "p", i)
    _catch_up(clock)  # p's events are older than the offset scanning period of a restart
    _append(journal, "q", 0)
    with _processor(stores, record, segments=1):
        wait_for(lambda: len(_handled(sql)) == 5)
    _catch_up(clock)
    _append(journal, "p", 4)
    late.hide("p", 5)
    _append(journal, "p", 5)
    _append(journal, "q", 1)
    with _processor(stores, record, segments=1) as running:
        wait_for(lambda: "persistence_id=p expected=5 found=6" in caplog.text)  # 6 is held
        assert len(_handled(sql)) == 5
        late.show()
        wait_for(lambda: len(_handled(sql)) == 8 or running.failure is not None)
    assert running.failure is None
    assert _handled(sql) == _once(*(f"p#{n}" for n in range(1, 7)), "q#1", "q#2")


def test_a_gap_that_stays_open_stops_the_processor_with_the_error(
    stores: Stores, journal: Journal, sql: Sql, late: _LateRows
) -> None:
    """A missing event is not skipped: past gap_timeout the processor fails and says why.

    Its worker threads used to die of MissingTaggedEventError one after another while the
    processor still said it was running, with no failure.
    """
    record = _recorder(sql)
    short = EventSource(
        reader=stores.tag_view_reader,
        tag=Tag("t"),
        query=replace(READ, gap_timeout=timedelta(milliseconds=250)),
        events_by_tag=WRITE,
    )
    settings = replace(FAST, initial_segment_count=1)
    processor = TrackingProcessor("p", short, stores.tokens, record, settings=settings)
    with processor:
        _append(journal, "x", 1)
        wait_for(lambda: len(_handled(sql)) == 1)
        late.hide("x", 2)
        _append(journal, "x", 2)
        _append(journal, "x", 3)
        wait_for(lambda: processor.failure is not None)
        assert not processor.is_running
    assert isinstance(processor.failure, MissingTaggedEventError)
    assert _handled(sql) == _once("x#1")


def test_a_reset_to_an_offset_before_a_gap_goes_on_past_it(
    stores: Stores, journal: Journal, sql: Sql, late: _LateRows
) -> None:
    """The recovery from a gap that stays open: reset to an offset before it, then restart.

    x#2 never shows up, so the processor stops at x#3. Reset to x#1's offset (the current
    bucket), the restarted stream scanned around it first and counted x#1 as delivered,
    although the reset had cleared x's position: x#3 was the same gap again. A stream from a
    past bucket's offset took x#3 as x's first event, as a reset Spark projection does.
    """
    record = _recorder(sql)
    query = replace(READ, gap_timeout=timedelta(milliseconds=250))
    with _processor(stores, record, segments=1, query=query) as stopped:
        first = _append(journal, "x", 1)
        late.hide("x", 2)
        _append(journal, "x", 2)
        _append(journal, "x", 3)
        wait_for(lambda: stopped.failure is not None)
    assert isinstance(stopped.failure, MissingTaggedEventError)
    stores.tokens.reset("p", TrackingToken(first), now_ms=0, claim_timeout_ms=0)
    with _processor(stores, record, segments=1, query=query) as running:
        last = _append(journal, "x", 4)
        wait_for(lambda: _has_passed(stores, last) or running.failure is not None)
    assert running.failure is None
    assert _handled(sql) == _once("x#1", "x#3", "x#4")


def test_a_reset_long_over_does_not_cost_a_restart_its_late_events(
    stores: Stores,
    journal: Journal,
    sql: Sql,
    late: _LateRows,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once a reset's replays are over, a restart waits for a late event again.

    After a reset the start scan takes each unknown id's next event after the offset for its
    first (`after_reset`), which is right only while the stream starts within the replays:
    the reset's boundary stays recorded, and every later restart took x#3 for x's first,
    handed it on, and dropped x#2 when it showed up behind it (under a policy without per-id
    positions every id is unknown to a restart).
    """
    record = _recorder(sql)
    concurrent = policy_from_name("concurrent")
    with _processor(stores, record, segments=1, policy=concurrent):
        first = _append(journal, "x", 1)
        wait_for(lambda: _has_passed(stores, first))
    stores.tokens.reset("p", TrackingToken(first), now_ms=0, claim_timeout_ms=0)
    with _processor(stores, record, segments=1, policy=concurrent):
        past = _append(journal, "z", 1)
        wait_for(lambda: _has_passed(stores, past))  # the replays are over
    late.hide("x", 2)
    _append(journal, "x", 2)
    last = _append(journal, "x", 3)
    with _processor(stores, record, segments=1, policy=concurrent) as running:
        wait_for(  # its stream met x#3 with x#2 out of sight: held back, or (the bug) handled
            lambda: (
                "persistence_id=x expected=2 found=3" in caplog.text
                or "x#3" in {str(e) for e, _ in _handled(sql)}
            )
        )
        late.show()
        wait_for(lambda: _has_passed(stores, last) or running.failure is not None)
        wait_for(lambda: {"x#2", "x#3"} <= {str(e) for e, _ in _handled(sql)})
    assert running.failure is None
    assert [event for event in _handled(sql) if event[0] in ("x#2", "x#3")] == _once("x#2", "x#3")


def test_a_processor_from_the_start_reads_on_from_the_expiry_horizon(
    stores: Stores, journal_factory: Callable[..., Journal], sql: Sql
) -> None:
    """x's first two events expired (`cleanup expire`): a new processor used to take x#3 for a
    gap and stop with MissingTaggedEventError; it starts at the horizon instead."""
    clock = ManualClock(time.time_ns() - 3_600 * 10**9)
    journal = journal_factory(settings=WRITE, clock=clock)
    for i in range(2):
        _append(journal, "x", i)
    clock.advance(3_600 * 10**9)
    _append(journal, "x", 2)
    last = _append(journal, "y", 0)
    Cleanup.of(stores).expire(timedelta(minutes=30))
    record = _recorder(sql)
    with _processor(stores, record, segments=1) as running:
        wait_for(lambda: _has_passed(stores, last) or running.failure is not None)
    assert running.failure is None
    assert _handled(sql) == _once("x#3", "y#1")


def _half(policy: str, pid: str, nr: int, *, g: int) -> int:
    """The segment of two that owns event `pid#nr` with payload key g under `policy`."""
    return stable_hash(f"{pid}#{nr}" if policy == "concurrent" else str(g)) & 1


def _in_half_of(half: int, policy: str, pid: str, nr: int) -> dict[str, object]:
    """A payload that puts event `pid#nr` into segment `half` of two under `policy`."""
    if policy == "concurrent":
        assert _half(policy, pid, nr, g=0) == half, "pick another id for this test"
        return {}
    return {"g": next(g for g in range(1000) if _half(policy, pid, nr, g=g) == half)}


@pytest.mark.parametrize("pause", [0.0, 1.0])
@pytest.mark.parametrize("policy", ["property:g", "concurrent"])
def test_a_restart_hands_on_a_late_event_under_a_policy_without_per_id_order(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Sql,
    late: _LateRows,
    policy: str,
    pause: float,
) -> None:
    """Without per-id positions, the events a processor handled decide, not its offset alone.

    One segment: x#2 is written but not visible when y#1, `pause` s later, is handled, so the
    token passes x#2. The processor stops, x#2 shows up, it starts again. The stream used to
    start after the token and never delivered x#2; it now starts back_track_period before
    the token and skips only the events recorded as handled.
    """
    record = _recorder(sql)
    journal, clock = _paused(journal_factory, pause)
    _append(journal, "x", 1, g=1)
    late.hide("x", 2)
    _append(journal, "x", 2, g=2)
    _catch_up(clock)
    _append(journal, "y", 1, g=3)
    with _processor(stores, record, segments=1, policy=policy_from_name(policy)):
        wait_for(lambda: len(_handled(sql)) == 2)
    late.show()
    with _processor(stores, record, segments=1, policy=policy_from_name(policy)) as running:
        _catch_up(clock)
        last = _append(journal, "x", 3, g=4)
        wait_for(lambda: _has_passed(stores, last) or running.failure is not None)
    assert running.failure is None
    assert _handled(sql) == _once("x#1", "x#2", "x#3", "y#1")


@pytest.mark.parametrize("policy", ["property:g", "concurrent"])
def test_a_merge_hands_on_a_late_event_of_the_half_that_was_ahead_without_positions(
    stores: Stores, journal: Journal, sql: Sql, late: _LateRows, policy: str
) -> None:
    """The merged segment skips what the half ahead handled, not everything up to its offset.

    Segment 0 is held by an operator. x#2 (segment 1's) is written but not visible when y#2
    (also segment 1's, a later offset) is handled, so segment 1's token passes x#2. The two
    merge and x#2 shows up: the part ahead used to make the worker skip it unhandled.
    """
    record = _recorder(sql)
    x, y = ("x1", "y2") if policy == "concurrent" else ("x", "y")

    def processor() -> TrackingProcessor:
        return _processor(
            stores, record, segments=2, policy=policy_from_name(policy), claim_timeout=HELD
        )

    with processor():
        _append(journal, x, 1, **_in_half_of(0, policy, x, 1))
        _append(journal, y, 1, **_in_half_of(1, policy, y, 1))
        wait_for(lambda: len(_handled(sql)) == 2)
    now = time.time_ns() // 1_000_000
    stores.tokens.claim("p", 0, "operator", now_ms=now, claim_timeout_ms=60_000)
    late.hide(x, 2)
    _append(journal, x, 2, **_in_half_of(1, policy, x, 2))
    _append(journal, y, 2, **_in_half_of(1, policy, y, 2))
    with processor():
        wait_for(lambda: len(_handled(sql)) == 3)
    stores.tokens.release("p", 0, "operator")
    now = time.time_ns() // 1_000_000
    assert merge_segment(stores.tokens, "p", 1, now_ms=now, claim_timeout_ms=60_000).is_done
    late.show()
    with processor() as running:
        last = _append(journal, x, 3, **_in_half_of(0, policy, x, 3))
        wait_for(lambda: _has_passed(stores, last) or running.failure is not None)
    assert running.failure is None
    assert _handled(sql) == _once(f"{x}#1", f"{x}#2", f"{x}#3", f"{y}#1", f"{y}#2")


def test_handled_events_are_forgotten_once_no_segment_can_read_them_again(
    stores: Stores, journal_factory: Callable[..., Journal], sql: Sql
) -> None:
    """A segment's stream starts back_track_period (2 s here) before its token: what lies
    before that for every segment is never read again, so its record goes.

    The journal's clock stands still during each group of 20 appends: on the system clock a
    loaded machine took over 2 s for them, and the first events of a group were forgotten too.
    The old events are written 3 s back (`_paused`), so the new ones lie more than
    back_track_period after them without a wait.
    """
    journal, clock = _paused(journal_factory, 3.0)
    record = _recorder(sql)
    concurrent = policy_from_name("concurrent")

    def append_20(prefix: str) -> None:
        for i in range(20):
            _append(journal, f"{prefix}{i}", i)

    append_20("old")
    with _processor(stores, record, segments=2, query=READ, policy=concurrent):
        wait_for(lambda: len(_handled(sql)) == 20)
        assert _remembered(sql) == {f"old{i}" for i in range(20)}
        _catch_up(clock)
        append_20("new")
        wait_for(lambda: len(_handled(sql)) == 40)
        wait_for(lambda: _remembered(sql) == {f"new{i}" for i in range(20)})


def test_a_reset_replays_what_was_handled_under_a_policy_without_positions(
    stores: Stores, journal: Journal, sql: Sql
) -> None:
    record = _recorder(sql)
    for i in range(10):
        _append(journal, f"p{i}", i)
    with _processor(stores, record, segments=2, policy=policy_from_name("concurrent")):
        wait_for(lambda: len(_handled(sql)) == 10)
    stores.tokens.reset("p", TrackingToken(), now_ms=0, claim_timeout_ms=0)
    assert _remembered(sql) == set()
    with _processor(stores, record, segments=2, policy=policy_from_name("concurrent")):
        wait_for(lambda: sql("SELECT DISTINCT times FROM handled") == [(2,)])


def _remembered(sql: Sql) -> set[str]:
    """The persistence ids of the events the processor's batches recorded as handled."""
    rows = sql("SELECT events FROM handled_batches")
    return {str(pid) for (events,) in rows for pid, _ in json.loads(str(events))}
