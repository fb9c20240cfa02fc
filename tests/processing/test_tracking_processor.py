"""Tracking processors on both backends: exactly-once, order, split and merge, errors, replay."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from ordo import Journal, NewEvent
from ordo.errors import (
    ConfigurationError,
    EventHandlingError,
    PendingHandOverError,
    PendingMergeError,
    UnableToClaimTokenError,
    UnknownProcessorError,
)
from ordo.processing.control import (
    ControlReceipt,
    merge_segment,
    release_segment,
    split_segment,
)
from ordo.processing.ports import SegmentAction, SegmentRequest, TokenStore
from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.processing.segment import Segment
from ordo.processing.sequencing import FullySequentialPolicy
from ordo.processing.source import ALL_EVENTS, EventSource
from ordo.processing.token import PartAhead, TrackingToken
from ordo.query import EventEnvelope
from ordo.settings import ErrorMode
from ordo.storage.open import Stores
from processing_support import (
    FAST,
    READ,
    WRITE,
    counting_handler,
    in_half,
    source,
    wait_for,
)


def _append(journal: Journal, count: int, *, pids: int = 20, tag: str = "t") -> None:
    for i in range(count):
        journal.append(f"p{i % pids}", [NewEvent.of({"i": i}, tags=[tag])])


def _total(sql: Callable[..., list[tuple[object, ...]]]) -> int:
    return int(str(sql("SELECT coalesce(sum(n), 0) FROM counts")[0][0]))


def _counts(stores: Stores) -> TrackingProcessor:
    """The "counts" processor: `counting_handler` over the source's events, FAST settings."""
    return TrackingProcessor(
        "counts", source(stores), stores.tokens, counting_handler, settings=FAST
    )


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"policy": "per_aggregate"}, r"^policy must be a SequencingPolicy"),
        ({"policy": 0}, r"^policy must be a SequencingPolicy"),
        ({"handler": None}, r"^handler must be callable, got None"),
    ],
)
def test_a_processor_refuses_a_policy_or_handler_of_the_wrong_kind(
    stores: Stores, arguments: dict[str, object], problem: str
) -> None:
    """Both failed per event in the worker threads: under ErrorMode.SKIP, silently."""
    values: dict[str, object] = {"handler": counting_handler} | arguments
    with pytest.raises(ConfigurationError, match=problem):
        TrackingProcessor("counts", source(stores), stores.tokens, **values)  # type: ignore[arg-type]
    with pytest.raises(UnknownProcessorError):
        stores.tokens.entries("counts")  # nothing was initialized


def test_every_event_is_applied_once_in_order_while_segments_split_and_merge(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    journal = journal_factory(settings=WRITE)
    processor = _counts(stores)
    with processor:
        _append(journal, 300)
        processor.split(0)
        wait_for(lambda: len(processor.status()) == 5)
        _append(journal, 300)
        processor.merge(0)
        wait_for(lambda: len(processor.status()) == 4)
        _append(journal, 300)
        wait_for(lambda: _total(sql) == 900)
    assert processor.failure is None
    assert sorted(sql("SELECT pid, n, last FROM counts")) == sorted(
        (f"p{p}", 45, 45) for p in range(20)
    )


def test_a_restarted_processor_continues_from_its_tokens(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    journal = journal_factory(settings=WRITE)
    _append(journal, 200)
    with _counts(stores):
        wait_for(lambda: _total(sql) == 200)
    _append(journal, 100)
    with _counts(stores):
        wait_for(lambda: _total(sql) == 300)
    assert {row[1] for row in sql("SELECT pid, n FROM counts")} == {15}
    assert all(e.owner is None for e in stores.tokens.entries("counts"))


def _flaky(fails: dict[str, int]) -> Callable[[EventEnvelope, HandlerContext], None]:
    """A counting handler that raises on the events named, `fails[...]` times each."""
    lock = threading.Lock()

    def handle(event: EventEnvelope, context: HandlerContext) -> None:
        key = f"{event.persistence_id}#{event.tag_pid_sequence_nr}"
        with lock:
            remaining = fails.get(key, 0)
            if remaining:
                fails[key] = remaining - 1
        if remaining:
            counting_handler(event, context)  # a write that the failure must undo
            msg = f"boom at {key}"
            raise RuntimeError(msg)
        counting_handler(event, context)

    return handle


def test_a_transient_failure_is_retried_and_applied_once(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    journal = journal_factory(settings=WRITE)
    _append(journal, 100)
    handler = _flaky({"p3#2": 2})
    with TrackingProcessor("counts", source(stores), stores.tokens, handler, settings=FAST) as p:
        wait_for(lambda: _total(sql) == 100)
    assert p.failure is None
    assert sql("SELECT n, last FROM counts WHERE pid = ?", "p3") == [(5, 5)]


@pytest.mark.parametrize("mode", [ErrorMode.SKIP, ErrorMode.DEAD_LETTER])
def test_a_poison_event_is_skipped_or_dead_lettered(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
    mode: ErrorMode,
) -> None:
    journal = journal_factory(settings=WRITE)
    _append(journal, 100)
    settings = replace(FAST, error_mode=mode, max_retries=1)
    handler = _flaky({"p3#5": 99})  # p3's last event
    with TrackingProcessor("counts", source(stores), stores.tokens, handler, settings=settings):
        wait_for(lambda: _total(sql) == 99)
        wait_for(
            lambda: len(stores.tokens.dead_letters("counts")) == (mode is ErrorMode.DEAD_LETTER)
        )
    letters = stores.tokens.dead_letters("counts")
    if mode is ErrorMode.DEAD_LETTER:
        assert [(d.persistence_id, d.position) for d in letters] == [("p3", 5)]
        assert "boom at p3#5" in letters[0].error
    assert sql("SELECT n FROM counts WHERE pid = ?", "p3") == [(4,)]


def test_a_failure_in_fail_mode_stops_the_processor_and_applies_nothing_of_its_batch(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    journal = journal_factory(settings=WRITE)
    _append(journal, 100)
    journal.flush()
    time.sleep(0.3)  # settled: the first poll reads all 100 events, one batch
    settings = replace(
        FAST, thread_count=1, initial_segment_count=1, batch_size=1000, max_retries=0
    )
    processor = TrackingProcessor(
        "counts", source(stores), stores.tokens, _flaky({"p3#5": 99}), settings=settings
    )
    processor.start()
    wait_for(lambda: processor.failure is not None)
    processor.stop()
    failure = processor.failure
    assert isinstance(failure, EventHandlingError)
    assert (failure.persistence_id, failure.sequence_nr) == ("p3", 5)
    assert _total(sql) == 0  # the whole batch was rolled back
    (entry,) = stores.tokens.entries("counts")
    assert (entry.token, entry.owner) == (TrackingToken(), None)


def test_a_reset_processor_replays_with_the_replay_flag(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    journal = journal_factory(settings=WRITE)
    _append(journal, 60)
    with _counts(stores):
        wait_for(lambda: _total(sql) == 60)
    stores.tokens.reset("counts", TrackingToken(), now_ms=0, claim_timeout_ms=0)
    sql("DELETE FROM counts")
    _append(journal, 20)
    with _counts(stores):
        wait_for(lambda: _total(sql) == 80)
    assert int(str(sql("SELECT sum(replays) FROM counts")[0][0])) == 60


def test_a_reset_after_a_merge_replays_what_the_half_ahead_handled(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    """A merged token resumes at the lower half's offset; the half ahead handled further.

    The reset used to take the merged token's own offset as the replay boundary, so the
    events of the half ahead past it came back as new (is_replay False).
    """
    journal = journal_factory(settings=WRITE)
    behind, ahead = in_half(0, "o"), in_half(1, "o")
    for pid in (behind, ahead):
        for i in range(5):
            journal.append(pid, [NewEvent.of({"i": i}, tags=["t"])])

    def processor() -> TrackingProcessor:
        settings = replace(FAST, initial_segment_count=2)
        return TrackingProcessor(
            "counts", source(stores), stores.tokens, counting_handler, settings=settings
        )

    with processor():
        wait_for(lambda: _total(sql) == 10)
    now = time.time_ns() // 1_000_000
    assert merge_segment(stores.tokens, "counts", 0, now_ms=now, claim_timeout_ms=0).is_done
    assert stores.tokens.entries("counts")[0].token.ahead
    stores.tokens.reset("counts", TrackingToken(), now_ms=now, claim_timeout_ms=0)
    sql("DELETE FROM counts")
    for pid in (behind, ahead):
        journal.append(pid, [NewEvent.of({"i": 5}, tags=["t"])])
    with processor():
        wait_for(lambda: _total(sql) == 12)
    assert sorted(sql("SELECT pid, n, replays FROM counts")) == [(behind, 6, 5), (ahead, 6, 5)]


def test_a_replay_boundary_stored_with_parts_ahead_replays_up_to_their_offset(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    """Earlier versions stored a reset's boundary with the merged token's parts ahead.

    The worker read only the boundary's own offset (here none), so nothing was a replay.
    """
    journal = journal_factory(settings=WRITE)
    _append(journal, 20)
    with _counts(stores):
        wait_for(lambda: _total(sql) == 20)
    stores.tokens.reset("counts", TrackingToken(), now_ms=0, claim_timeout_ms=0)
    (boundary,) = {e.replay_until for e in stores.tokens.entries("counts")}
    assert boundary is not None
    assert boundary.offset is not None
    legacy = TrackingToken(None, (PartAhead(Segment(1, 1), boundary.offset),))
    sql("UPDATE tokens SET replay_until = ?", legacy.to_json())
    sql("DELETE FROM counts")
    with _counts(stores):
        wait_for(lambda: _total(sql) == 20)
    assert int(str(sql("SELECT sum(replays) FROM counts")[0][0])) == 20


def test_a_processor_can_read_every_event_of_the_journal(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    journal = journal_factory(settings=WRITE)
    for i in range(90):
        journal.append(f"p{i % 9}", [NewEvent.of(i, tags=["a"] if i % 2 else [])])
    everything = EventSource(
        reader=stores.all_events(WRITE.bucket_size),
        tag=ALL_EVENTS,
        query=READ,
        events_by_tag=WRITE,
        can_select_segments=False,
    )
    settings = replace(FAST, initial_segment_count=2, thread_count=2)
    with TrackingProcessor("all", everything, stores.tokens, counting_handler, settings=settings):
        wait_for(lambda: _total(sql) == 90)
    assert {row[1] for row in sql("SELECT pid, last FROM counts")} == {10}


@pytest.mark.parametrize("segments", [1, 4])
def test_a_fully_sequential_processor_uses_one_segment(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
    segments: int,
) -> None:
    """With more segments than one, all but one are idle: every event has the same hash.

    With 4 segments the storage used to select rows by the persistence id's hash, so four
    segments handled events at once and out of order.
    """
    journal = journal_factory(settings=WRITE)
    _append(journal, 50)
    handled: list[tuple[Segment, bytes]] = []

    def handler(event: EventEnvelope, context: HandlerContext) -> None:
        counting_handler(event, context)
        handled.append((context.segment, event.offset_key))

    settings = replace(FAST, initial_segment_count=segments, thread_count=segments)
    with TrackingProcessor(
        "seq",
        source(stores),
        stores.tokens,
        handler,
        settings=settings,
        policy=FullySequentialPolicy(),
    ) as p:
        wait_for(lambda: _total(sql) == 50)
    assert len({segment for segment, _ in handled}) == 1
    offsets = [offset for _, offset in handled]
    assert offsets == sorted(offsets)
    assert len(p.status()) == segments
    assert READ.eventual_consistency_delay == timedelta(milliseconds=100)


def _then_200_more_are_applied_once(
    journal: Journal, sql: Callable[..., list[tuple[object, ...]]], processor: TrackingProcessor
) -> None:
    """After 100 events: 200 more, and each of the 300 is applied once, in order per id."""
    _append(journal, 200)
    wait_for(lambda: _total(sql) == 300)
    time.sleep(0.5)  # anything applied twice would show now
    assert processor.failure is None
    assert sorted(sql("SELECT pid, n, last FROM counts")) == sorted(
        (f"p{p}", 15, 15) for p in range(20)
    )


class _PausableClock:
    """The system clock, except that while paused every thread reading it waits.

    A paused processor stalls like a stopped process: its workers stop renewing their claims,
    which lapse, while the operator changes segments under them.
    """

    def __init__(self) -> None:
        self.running = threading.Event()
        self.running.set()
        self._waiting: set[str] = set()
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        if not self.running.is_set():
            name = threading.current_thread().name
            with self._lock:
                self._waiting.add(name)
            self.running.wait()
            with self._lock:
                self._waiting.discard(name)
        return time.time_ns()

    def pause(self, processor: TrackingProcessor) -> None:
        """Stop the clock, and return once every worker thread of `processor` waits for it.

        A worker that read the clock just before went on with its check (a claim, a request
        taken) meanwhile: the operator's request made at once could be taken by it after all.
        """
        self.running.clear()
        workers = {f"ordo-{processor.name}-{i}" for i in range(processor.settings.thread_count)}

        def are_all_waiting() -> bool:
            with self._lock:
                return workers <= self._waiting

        wait_for(are_all_waiting)


@pytest.mark.parametrize("change", ["merge", "split"])
def test_a_segment_changed_under_a_lapsed_claim_loses_and_repeats_nothing(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
    change: str,
) -> None:
    """A stalled worker must not go on reading its old segment on the new segment's token.

    Found by a stress run: a worker paused past its claim timeout, the operator merged (or
    split) its segment at once, and on waking the worker renewed the claim of the segment id,
    kept reading the old half of the hash space and moved the merged segment's token past the
    other half's events (lost for good; on PostgreSQL a split applied events twice).
    """
    journal = journal_factory(settings=WRITE)
    clock = _PausableClock()
    settings = replace(
        FAST,
        thread_count=2,
        initial_segment_count=2 if change == "merge" else 1,
        claim_timeout=timedelta(seconds=1),
    )
    processor = TrackingProcessor(
        "counts", source(stores), stores.tokens, counting_handler, settings=settings, clock=clock
    )
    act, segment_id = (merge_segment, 1) if change == "merge" else (split_segment, 0)
    with processor:
        _append(journal, 100)
        wait_for(lambda: _total(sql) == 100)
        clock.pause(processor)  # the processor stalls between batches
        try:
            time.sleep(1.5)  # past the claim timeout
            now = time.time_ns() // 1_000_000
            receipt = act(stores.tokens, "counts", segment_id, now_ms=now, claim_timeout_ms=1_000)
        finally:
            clock.running.set()
        assert receipt.is_done  # at once: the claims had lapsed
        _then_200_more_are_applied_once(journal, sql, processor)


def test_a_merge_made_impossible_meanwhile_is_dropped_and_processing_goes_on(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    """A pending merge whose sibling was split before the owner acted on it is dropped.

    The owner of segment 0 is asked to merge; it stalls past its claim timeout, and the
    operator splits the sibling at once. Merging is then impossible (InvalidSegmentOperationError
    from the token store): the worker logs it and keeps processing its segment. It used to die
    with the error, leaving its segment unprocessed until the next start.
    """
    journal = journal_factory(settings=WRITE)
    clock = _PausableClock()
    settings = replace(
        FAST, thread_count=3, initial_segment_count=2, claim_timeout=timedelta(seconds=1)
    )
    processor = TrackingProcessor(
        "counts", source(stores), stores.tokens, counting_handler, settings=settings, clock=clock
    )
    with processor:
        _append(journal, 100)
        wait_for(lambda: _total(sql) == 100)
        clock.pause(processor)  # the processor stalls with both claims held
        try:
            now = time.time_ns() // 1_000_000  # held for sure, however long since the last check
            asked = merge_segment(stores.tokens, "counts", 0, now_ms=now, claim_timeout_ms=30_000)
            time.sleep(1.5)  # past the claim timeout
            now = time.time_ns() // 1_000_000
            split = split_segment(stores.tokens, "counts", 1, now_ms=now, claim_timeout_ms=1_000)
        finally:
            clock.running.set()
        assert not asked.is_done
        assert split.is_done
        _then_200_more_are_applied_once(journal, sql, processor)
    segments = sorted(
        (e.segment.segment_id, e.segment.mask) for e in stores.tokens.entries("counts")
    )
    assert segments == [(0, 1), (1, 3), (3, 3)]
    assert stores.tokens.take_request("counts", 0) is None


def test_an_operator_request_does_not_replace_the_hand_over_a_merge_waits_for(
    stores: Stores,
    journal_factory: Callable[..., Journal],
    sql: Callable[..., list[tuple[object, ...]]],
) -> None:
    """Two processes, one segment each; the first is asked to merge, so it asks the second to
    hand its segment over. A release of that segment (the CLI's, or the processor's own) then
    replaced the hand-over, with only "replacing the pending hand over" in a receipt to tell
    that the merge was held up. It is refused now, and the merge completes."""
    journal = journal_factory(settings=WRITE)
    settings = replace(
        FAST, thread_count=1, initial_segment_count=2, claim_timeout=timedelta(seconds=30)
    )
    paused = _PausableClock()
    merging, holding = (
        TrackingProcessor(
            "counts", source(stores), stores.tokens, counting_handler, settings=settings, clock=c
        )
        for c in (None, paused)
    )

    def owners() -> list[str | None]:
        return [e.owner for e in stores.tokens.entries("counts")]

    with merging:
        wait_for(lambda: any(owners()))
        mine = next(e.segment for e in stores.tokens.entries("counts") if e.owner)
        sibling = mine.mergeable_segment_id()
        with holding:
            wait_for(lambda: all(owners()))
            _append(journal, 100)
            wait_for(lambda: _total(sql) == 100)
            paused.pause(holding)  # its owner takes no request while the operator acts
            try:
                merging.merge(mine.segment_id)
                wait_for(
                    lambda: any(
                        p.segment_id == sibling and p.request.action is SegmentAction.HAND_OVER
                        for p in stores.tokens.pending_requests("counts")
                    )
                )
                now = time.time_ns() // 1_000_000
                with pytest.raises(PendingHandOverError, match="for a merge: a release request"):
                    release_segment(
                        stores.tokens, "counts", sibling, now_ms=now, claim_timeout_ms=30_000
                    )
                with pytest.raises(PendingHandOverError, match="for a merge: a split request"):
                    merging.split(sibling)
            finally:
                paused.running.set()
            wait_for(lambda: len(owners()) == 1)
            _then_200_more_are_applied_once(journal, sql, merging)
            assert holding.failure is None


def _beside_other_s_segment_1(stores: Stores, tokens: object) -> TrackingProcessor:
    """A one-thread "counts" processor over two segments through `tokens` (the store behind a
    race double), with "other" holding segment 1 for 30 s: the processor can take segment 0 only."""
    settings = replace(
        FAST, thread_count=1, initial_segment_count=2, claim_timeout=timedelta(seconds=30)
    )
    stores.tokens.initialize("counts", segment_count=2)
    now = time.time_ns() // 1_000_000
    stores.tokens.claim("counts", 1, "other", now_ms=now, claim_timeout_ms=30_000)
    return TrackingProcessor(
        "counts",
        source(stores),
        tokens,  # type: ignore[arg-type]
        counting_handler,
        settings=settings,
    )


class _HandOverAskedMeanwhile:
    """The token store, except that as soon as an owner takes a merge request, the owner of
    the sibling asks it to hand its segment over: the sibling's owner merging the same two
    segments at that moment (a race a test cannot time otherwise)."""

    def __init__(self, tokens: TokenStore, *, sibling_owner: str) -> None:
        self._tokens, self._sibling_owner = tokens, sibling_owner

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokens, name)

    def take_request(self, processor: str, segment_id: int) -> SegmentRequest | None:
        taken = self._tokens.take_request(processor, segment_id)
        if taken is not None and taken.action is SegmentAction.MERGE:
            hand_over = SegmentRequest(
                action=SegmentAction.HAND_OVER, target_owner=self._sibling_owner
            )
            self._tokens.request(processor, segment_id, hand_over, now_ms=0)
        return taken


def test_an_owner_asked_for_its_segment_while_merging_hands_it_over(stores: Stores) -> None:
    """Both owners of two siblings merging them at once: each asked the other for its segment,
    and the merge request an owner asks of itself again (to retry) replaced the hand-over it
    was asked for. The hand-over stays now, and the owner hands its segment over."""
    tokens = _HandOverAskedMeanwhile(stores.tokens, sibling_owner="other")
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is not None)
        processor.merge(0)
        wait_for(lambda: stores.tokens.entries("counts")[0].owner == "other")
        assert stores.tokens.pending_requests("counts") == []  # nor asked for segment 1
        assert processor.is_running
    assert processor.failure is None


class _Releases:
    """The token store, recording the segments released, and how many requests were taken
    after one that asked for a hand-over."""

    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens
        self.released: list[int] = []
        self.taken_after_hand_over = 0
        self._is_hand_over_taken = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokens, name)

    def release(self, processor: str, segment_id: int, owner: str) -> None:
        self.released.append(segment_id)
        self._tokens.release(processor, segment_id, owner)

    def take_request(self, processor: str, segment_id: int) -> SegmentRequest | None:
        taken = self._tokens.take_request(processor, segment_id)
        self.taken_after_hand_over += self._is_hand_over_taken
        if taken is not None and taken.action is SegmentAction.HAND_OVER:
            self._is_hand_over_taken = True
        return taken


def test_an_owner_asked_to_hand_its_segment_to_itself_keeps_it(stores: Stores) -> None:
    """The worker handed the segment over to itself and then released it, for nothing. It
    keeps the segment now: the next request it takes is taken with the same claim."""
    tokens = _Releases(stores.tokens)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is not None)
        owner = stores.tokens.entries("counts")[0].owner
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=owner)
        stores.tokens.request("counts", 0, hand_over, now_ms=0)
        wait_for(lambda: tokens.taken_after_hand_over > 0)
        assert tokens.released == []
        assert stores.tokens.entries("counts")[0].owner == owner
    assert processor.failure is None


class _ReleaseAskedMeanwhile:
    """The token store, except that when an owner takes a merge request the second time (it
    asked for the sibling at the first), the operator asks it to release the segment: between
    the take and the merge the owner asks again (a race a test cannot time otherwise)."""

    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens
        self.merges_taken = 0
        self.receipts: list[ControlReceipt] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokens, name)

    def take_request(self, processor: str, segment_id: int) -> SegmentRequest | None:
        taken = self._tokens.take_request(processor, segment_id)
        if taken is not None and taken.action is SegmentAction.MERGE:
            self.merges_taken += 1
            if self.merges_taken == 2:
                now = time.time_ns() // 1_000_000
                self.receipts.append(
                    release_segment(
                        self._tokens, processor, segment_id, now_ms=now, claim_timeout_ms=30_000
                    )
                )
        return taken


def test_an_operator_s_release_made_while_the_owner_merges_is_not_replaced(
    stores: Stores,
) -> None:
    """The owner of segment 0 merges while another owner holds segment 1: at each check it
    takes its merge request, fails to merge, and asks the merge again and for segment 1. The
    merge asked again replaced a release the operator made in between, though the operator
    was told that the owner was asked. The release stands now: the owner releases segment 0,
    and the hand-over of segment 1 that its merge asked for is withdrawn."""
    tokens = _ReleaseAskedMeanwhile(stores.tokens)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is not None)
        owner = stores.tokens.entries("counts")[0].owner
        processor.merge(0)
        wait_for(lambda: tokens.merges_taken == 2)
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is None)
        assert [r.message for r in tokens.receipts] == [f"asked {owner} to release Segment[0/1]"]
        assert stores.tokens.pending_requests("counts") == []
        assert processor.is_running
    assert processor.failure is None


class _ReleaseAskedOnceTheMergeFailed:
    """The token store, except that the operator asks the owner to release segment 0 right
    after the owner's first call once its merge failed (another owner holds the sibling):
    whatever it asks then, the release comes after it and before anything else it asks."""

    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens
        self.has_merge_failed = False
        self.receipts: list[ControlReceipt] = []

    def merge(
        self, processor: str, segment_id: int, owner: str, *, now_ms: int, claim_timeout_ms: int
    ) -> Segment:
        try:
            return self._tokens.merge(
                processor, segment_id, owner, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
            )
        except UnableToClaimTokenError:
            self.has_merge_failed = True
            raise

    def __getattr__(self, name: str) -> object:
        method = getattr(self._tokens, name)
        if not self.has_merge_failed or self.receipts:
            return method

        def then_release(*args: object, **kwargs: object) -> object:
            result = method(*args, **kwargs)
            now = time.time_ns() // 1_000_000
            self.receipts.append(
                release_segment(self._tokens, "counts", 0, now_ms=now, claim_timeout_ms=30_000)
            )
            return result

        return then_release


def test_an_operator_s_release_right_after_the_owner_asks_its_merge_again_ends_the_merge(
    stores: Stores,
) -> None:
    """The owner of segment 0 merges while another owner holds segment 1: it asked its merge
    again, and then, in a second transaction, for segment 1. A release made between the two
    replaced the merge (and withdrew no hand-over: none was stored yet), and the hand-over
    asked next sent segment 1 to an owner that had released its segment and was not merging.
    Both are asked in one transaction now: the release ends the merge and withdraws the
    hand-over, and segment 1's owner keeps it."""
    tokens = _ReleaseAskedOnceTheMergeFailed(stores.tokens)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is not None)
        owner = stores.tokens.entries("counts")[0].owner
        processor.merge(0)
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is None)
        assert [r.message for r in tokens.receipts] == [
            f"asked {owner} to release Segment[0/1] (replacing the pending merge request)"
        ]
        assert stores.tokens.pending_requests("counts") == []
        assert stores.tokens.entries("counts")[1].owner == "other"
    assert processor.failure is None


class _SiblingMergingAtOnce:
    """The token store, except that the owner of segment 1 merges the pair at the same moment
    as the processor's worker, segment 0's owner: right after the worker asks its merge again
    and for segment 1, it asks its own merge again and for segment 0 (once; a refusal leaves
    the merge to the worker, as it does in a worker)."""

    def __init__(self, tokens: TokenStore, *, sibling_owner: str) -> None:
        self._tokens, self._sibling_owner = tokens, sibling_owner
        self.refused: list[PendingHandOverError | PendingMergeError] = []
        self.asked = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokens, name)

    def request_merge(self, processor: str, segment_id: int, owner: str, *, now_ms: int) -> bool:
        is_pending = self._tokens.request_merge(processor, segment_id, owner, now_ms=now_ms)
        if self.asked == 0:
            try:
                self._tokens.request_merge(processor, 1, self._sibling_owner, now_ms=now_ms)
            except (PendingHandOverError, PendingMergeError) as exc:
                self.refused.append(exc)
        # Counted once the sibling's owner has asked: the test takes segment 1's hand-over
        # when it sees the count, and taken before that ask it let the ask through.
        self.asked += 1
        return is_pending


def test_when_both_owners_of_a_pair_merge_it_at_once_the_lower_segment_s_owner_merges(
    stores: Stores,
) -> None:
    """Both asked their own merge again, then each other for the sibling: each hand-over
    replaced the other's merge request, so each owner handed its segment to the other and the
    pair swapped owners without merging. Each owner asks both at once now: segment 0's owner
    asked first and keeps the merge, the other owner's ask is refused (segment 1 is to be
    handed over), and it hands segment 1 over when asked."""
    tokens = _SiblingMergingAtOnce(stores.tokens, sibling_owner="other")
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is not None)
        owner = stores.tokens.entries("counts")[0].owner
        assert owner is not None
        now = time.time_ns() // 1_000_000
        merge_segment(stores.tokens, "counts", 0, now_ms=now, claim_timeout_ms=30_000)
        wait_for(lambda: tokens.asked == 1)
        # The owner of segment 1 takes the hand-over asked of it, as its worker does.
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=owner)
        assert stores.tokens.take_request("counts", 1) == hand_over
        now = time.time_ns() // 1_000_000
        assert stores.tokens.hand_over(
            "counts", 1, "other", to=owner, now_ms=now, claim_timeout_ms=30_000
        )
        wait_for(
            lambda: (
                len(stores.tokens.entries("counts")) == 1
                or stores.tokens.entries("counts")[0].owner == "other"
            )
        )
        assert [e.segment for e in stores.tokens.entries("counts")] == [Segment(0, 0)]
        # A merge ends the claim: the worker releases the merged segment and claims it again.
        wait_for(lambda: stores.tokens.entries("counts")[0].owner == owner)
        assert [(type(e), e.segment_id) for e in tokens.refused] == [(PendingHandOverError, 1)]
    assert processor.failure is None
