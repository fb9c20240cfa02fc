"""Tracking processors that stall past their claim timeout while the operator changes
segments under them: nothing is lost or applied twice, and the changes they wait for stand."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from journal_support import JournalFactory
from ordo import Journal, NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.errors import PendingHandOverError
from ordo.processing.control import merge_segment, release_segment, split_segment
from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.processing.segment_batch import SegmentState
from ordo.processing.segment_request import SegmentAction
from ordo.processing.sequencing import policy_from_name
from ordo.processing.token import TrackingToken
from ordo.processing.worker import SegmentWorker
from ordo.query import EventEnvelope
from ordo.storage.open import stores_at
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.types import PersistenceId
from processing_support import (
    FAST,
    WRITE,
    SqlRunner,
    TokenStoreDouble,
    append_events,
    counted,
    counts_processor,
    in_half,
    now_ms,
    source,
    wait_for,
)
from token_support import T1, T2, TIMEOUT, claimed_with_token

CLAIM_TIMEOUT_MS = 500
"""The claim timeout of the processors that stall: 2.5 times FAST's claim interval (200 ms),
which renews the claims while they run; they lapse only while the paused clock holds them."""
LAPSE_S = 1.5 * CLAIM_TIMEOUT_MS / 1000
"""How long a stalled processor stays paused: past its claim timeout for sure."""


def _then_200_more_are_applied_once(
    journal: Journal, sql: SqlRunner, processor: TrackingProcessor
) -> None:
    """After 100 events: 200 more, and each of the 300 is applied once, in order per id."""
    append_events(journal, 200)
    wait_for(lambda: counted(sql) == 300)
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
    stores: Stores, journal: Journal, sql: SqlRunner, change: str
) -> None:
    """A stalled worker must not go on reading its old segment on the new segment's token.

    Found by a stress run: a worker paused past its claim timeout, the operator merged (or
    split) its segment at once, and on waking the worker renewed the claim of the segment id,
    kept reading the old half of the hash space and moved the merged segment's token past the
    other half's events (lost for good; on PostgreSQL a split applied events twice).
    """
    clock = _PausableClock()
    settings = replace(
        FAST,
        thread_count=2,
        initial_segment_count=2 if change == "merge" else 1,
        claim_timeout=timedelta(milliseconds=CLAIM_TIMEOUT_MS),
    )
    processor = counts_processor(stores, settings=settings, clock=clock)
    act, segment_id = (merge_segment, 1) if change == "merge" else (split_segment, 0)
    with processor:
        append_events(journal, 100)
        wait_for(lambda: counted(sql) == 100)
        clock.pause(processor)  # the processor stalls between batches
        try:
            time.sleep(LAPSE_S)  # past the claim timeout
            receipt = act(
                stores.tokens,
                "counts",
                segment_id,
                now_ms=now_ms(),
                claim_timeout_ms=CLAIM_TIMEOUT_MS,
            )
        finally:
            clock.running.set()
        assert receipt.is_done  # at once: the claims had lapsed
        _then_200_more_are_applied_once(journal, sql, processor)


def test_a_merge_made_impossible_meanwhile_is_dropped_and_processing_goes_on(
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """A pending merge whose sibling was split before the owner acted on it is dropped.

    The owner of segment 0 is asked to merge; it stalls past its claim timeout, and the
    operator splits the sibling at once. Merging is then impossible (InvalidSegmentOperationError
    from the token store): the worker logs it and keeps processing its segment. It used to die
    with the error, leaving its segment unprocessed until the next start.
    """
    clock = _PausableClock()
    settings = replace(
        FAST,
        thread_count=3,
        initial_segment_count=2,
        claim_timeout=timedelta(milliseconds=CLAIM_TIMEOUT_MS),
    )
    processor = counts_processor(stores, settings=settings, clock=clock)
    with processor:
        append_events(journal, 100)
        wait_for(lambda: counted(sql) == 100)
        clock.pause(processor)  # the processor stalls with both claims held
        try:
            # held for sure, however long since the last check
            asked = merge_segment(
                stores.tokens, "counts", 0, now_ms=now_ms(), claim_timeout_ms=30_000
            )
            time.sleep(LAPSE_S)  # past the claim timeout
            split = split_segment(
                stores.tokens, "counts", 1, now_ms=now_ms(), claim_timeout_ms=CLAIM_TIMEOUT_MS
            )
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
    stores: Stores, journal: Journal, sql: SqlRunner
) -> None:
    """Two processes, one segment each; the first is asked to merge, so it asks the second to
    hand its segment over. A release of that segment (the CLI's, or the processor's own) then
    replaced the hand-over, with only "replacing the pending hand over" in a receipt to tell
    that the merge was held up. It is refused now, and the merge completes."""
    settings = replace(
        FAST, thread_count=1, initial_segment_count=2, claim_timeout=timedelta(seconds=30)
    )
    paused = _PausableClock()
    merging, holding = (
        counts_processor(stores, settings=settings, clock=clock) for clock in (None, paused)
    )

    def owners() -> list[str | None]:
        return [e.owner for e in stores.tokens.entries("counts")]

    with merging:
        wait_for(lambda: any(owners()))
        mine = next(e.segment for e in stores.tokens.entries("counts") if e.owner)
        sibling = mine.mergeable_segment_id()
        with holding:
            wait_for(lambda: all(owners()))
            append_events(journal, 100)
            wait_for(lambda: counted(sql) == 100)
            paused.pause(holding)  # its owner takes no request while the operator acts
            try:
                merging.merge(mine.segment_id)
                wait_for(
                    lambda: any(
                        p.segment_id == sibling and p.request.action is SegmentAction.HAND_OVER
                        for p in stores.tokens.pending_requests("counts")
                    )
                )
                with pytest.raises(PendingHandOverError, match="for a merge: a release request"):
                    release_segment(
                        stores.tokens, "counts", sibling, now_ms=now_ms(), claim_timeout_ms=30_000
                    )
                with pytest.raises(PendingHandOverError, match="for a merge: a split request"):
                    merging.split(sibling)
            finally:
                paused.running.set()
            wait_for(lambda: len(owners()) == 1)
            _then_200_more_are_applied_once(journal, sql, merging)
            assert holding.failure is None


def test_a_batch_that_outlasts_the_claim_timeout_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch's claim is extended only between batches: one whose handling takes longer than
    the claim timeout lost its claim in the middle (another owner may take the segment, and on
    PostgreSQL the server ends the idle transaction), and nothing said so. One WARNING names the
    processor, the segment, how long the batch took and the claim timeout."""
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    settings = replace(
        FAST, thread_count=1, initial_segment_count=1, claim_timeout=timedelta(milliseconds=100)
    )

    def slow(event: EventEnvelope, context: HandlerContext) -> None:
        time.sleep(0.3)  # three times the claim timeout

    caplog.set_level(logging.WARNING, logger="ordo.processing")
    with open_journal(url, settings=WRITE) as journal, stores_at(url) as stores:
        journal.append("p", [NewEvent.of(1, tags=["t"])])
        processor = TrackingProcessor(
            "slow", source(stores), stores.tokens, slow, settings=settings
        )
        with processor:
            wait_for(lambda: "longer than the claim timeout" in caplog.text)
    warning = next(r for r in caplog.records if "longer than the claim timeout" in r.message)
    assert warning.levelno == logging.WARNING
    assert "processor=slow segment=0" in warning.message
    assert "claim_timeout=0.1 s" in warning.message


class _ChangedOnceRead(TokenStoreDouble):
    """The token store, but for its next read of a processor's segments: `meanwhile` runs
    right after it, as another process would between that read and what the reader does next."""

    def __init__(self, tokens: TokenStore, meanwhile: Callable[[], None]) -> None:
        super().__init__(tokens)
        self._meanwhile: Callable[[], None] | None = meanwhile

    def entries(self, processor: str) -> Sequence[TokenEntry]:
        found = self._tokens.entries(processor)
        meanwhile, self._meanwhile = self._meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return found


def test_a_worker_stalled_before_it_forgets_handled_events_keeps_those_of_a_reset(
    stores: Stores,
) -> None:
    """A worker's forget of handled records must not act on segments read before a reset.

    Without per-id positions, a worker drops the handled records below every segment's stream
    start, read from the segments first. Its process stalled between that read and the
    delete, past the claim timeout; the operator reset the processor to an earlier offset,
    another process handled the replay in both halves and merged them. The stale delete then
    dropped the records of the half that was ahead, which the merged stream resumes behind
    and skips by: its events were handled twice.
    """
    base_ns = time.time_ns() - 3_600_000_000_000

    def at(seconds: int) -> TimeUUID:
        return TimeUUID.min_for_epoch_ns(base_ns + seconds * 1_000_000_000)

    def handled_by(owner: str, segment_id: int, pid: str, offset: TimeUUID) -> None:
        stores.tokens.claim("p", segment_id, owner, now_ms=2 * TIMEOUT, claim_timeout_ms=TIMEOUT)
        with stores.tokens.batch("p", segment_id, owner) as batch:
            batch.record_handled(PersistenceId(pid), 1, offset.key)
            batch.store_token(TrackingToken(offset))

    def reset_and_replayed_meanwhile() -> None:
        # the worker's claim (at 0) lapsed: the reset is allowed
        stores.tokens.reset(
            "p", TrackingToken(at(10)), now_ms=2 * TIMEOUT, claim_timeout_ms=TIMEOUT
        )
        handled_by("other", 0, "x", at(20))
        handled_by("other", 1, "y", at(50))  # half 1 is ahead of half 0

    tokens = _ChangedOnceRead(stores.tokens, reset_and_replayed_meanwhile)
    processor = TrackingProcessor(
        "p",
        source(stores),
        tokens,  # type: ignore[arg-type]
        lambda event, context: None,
        policy=policy_from_name("concurrent"),
    )
    worker = SegmentWorker(processor, 0)
    stores.tokens.initialize("p", segment_count=2)
    claimed_with_token(stores, 0, worker.owner, at(100))
    claimed_with_token(stores, 1, "b", at(100))

    worker._forget_handled(0)  # it reads both tokens at 100 s: below 98 s is forgotten

    assert stores.tokens.merge("p", 0, "other", now_ms=2 * TIMEOUT, claim_timeout_ms=TIMEOUT)
    merged = stores.tokens.entries("p")[0]
    assert (merged.token.offset, merged.token.reached) == (at(20), at(50))
    assert (PersistenceId("y"), 1) in worker._handled(merged)  # what the merged stream skips


class _ResetAtRenewal(TokenStoreDouble):
    """The token store, but the first renewal of segment 0's claim once a batch stored a token
    there comes after a reset of the processor to that very token, as an operator's after the
    worker stalled past its claim timeout; and then the processor's clock moves on to `later`."""

    def __init__(self, tokens: TokenStore, clock: ManualClock, later: int) -> None:
        super().__init__(tokens)
        self._clock, self._later = clock, later
        self.has_reset = False

    def claim(self, processor: str, segment_id: int, owner: str, **options: int) -> TokenEntry:
        token = self._tokens.entries(processor)[0].token
        if not self.has_reset and segment_id == 0 and token.offset is not None:
            self.has_reset = True
            lapsed = options["now_ms"] + 10 * options["claim_timeout_ms"]
            self._tokens.reset(processor, token, now_ms=lapsed, claim_timeout_ms=0)
            self._clock.advance(self._later - self._clock.now_ns())
        return self._tokens.claim(processor, segment_id, owner, **options)


def test_a_worker_whose_claim_lapsed_across_a_reset_to_its_token_replays_what_the_reset_says(
    stores: Stores, journal_factory: JournalFactory, sql: SqlRunner
) -> None:
    """A reset marks every event up to the furthest offset processed as a replay, in every
    segment. A worker stalled past its claim timeout while the operator reset the processor to
    the very token its segment had. Renewing its claim afterwards, it saw the same token and
    segment and went on with what it had read at its claim, no replay boundary: the next event
    of its segment, behind where the other segment had got, reached the handler as new
    (is_replay False).
    """
    base = time.time_ns() - 1_800 * 10**9
    written = ManualClock(base)
    journal = journal_factory(settings=WRITE, clock=written)
    behind, ahead = in_half(0, "a"), in_half(1, "b")
    for pid, seconds in ((behind, 0), (behind, 10), (ahead, 20)):
        written.advance(base + seconds * 10**9 - written.now_ns())
        journal.append(pid, [NewEvent.of({"s": seconds}, tags=["t"])])
    stores.tokens.initialize("counts", segment_count=2)
    stores.tokens.claim("counts", 1, "other", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("counts", 1, "other") as batch:  # the other half got further
        batch.store_token(TrackingToken(TimeUUID.min_for_epoch_ns(base + 20 * 10**9)))
    running = ManualClock(base + 5 * 10**9)  # the processor sees the first event only
    tokens = _ResetAtRenewal(stores.tokens, running, base + 30 * 10**9)
    settings = replace(FAST, thread_count=1, initial_segment_count=2)
    with counts_processor(stores, settings=settings, clock=running, tokens=tokens):
        wait_for(lambda: counted(sql) == 1)
        running.advance(10**9)  # the claim's renewal is due: the reset comes before it
        wait_for(lambda: counted(sql) == 2)
    assert tokens.has_reset
    assert sql("SELECT n, last, replays FROM counts WHERE pid = ?", behind) == [(2, 2, 1)]


def _moved_on_by_another_owner(stores: Stores) -> None:
    stores.tokens.claim("p", 0, "other", now_ms=2 * TIMEOUT, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "other") as batch:
        batch.store_token(TrackingToken(T2))
    stores.tokens.release("p", 0, "other")


def _reset_to(token: TrackingToken) -> Callable[[Stores], None]:
    def reset(stores: Stores) -> None:
        stores.tokens.reset("p", token, now_ms=2 * TIMEOUT, claim_timeout_ms=TIMEOUT)

    return reset


def _changed_by(act: Callable[..., object]) -> Callable[[Stores], None]:
    def change(stores: Stores) -> None:
        act(stores.tokens, "p", 0, now_ms=2 * TIMEOUT, claim_timeout_ms=TIMEOUT)

    return change


@pytest.mark.parametrize(
    ("segment_count", "meanwhile", "changed"),
    [
        (1, _moved_on_by_another_owner, f"token {T1} -> {T2}"),
        (1, _reset_to(TrackingToken()), f"token {T1} -> start, replay boundary none -> {T1}"),
        (1, _reset_to(TrackingToken(T1)), f"replay boundary none -> {T1}"),
        (1, _changed_by(split_segment), "segment Segment[0/0] -> Segment[0/1]"),
        (2, _changed_by(merge_segment), "segment Segment[0/1] -> Segment[0/0]"),
    ],
    ids=["moved on", "reset", "reset to its token", "split", "merge"],
)
def test_the_warning_of_a_segment_moved_on_under_a_lapsed_claim_says_what_changed(
    stores: Stores,
    caplog: pytest.LogCaptureFixture,
    segment_count: int,
    meanwhile: Callable[[Stores], None],
    changed: str,
) -> None:
    """A worker whose claim lapsed ends it when the token, the segment or the replay boundary
    changed meanwhile. The WARNING named the segment before and after only: after a reset (or
    another owner's batches) the same segment twice, which told the operator nothing."""
    settings = replace(FAST, thread_count=1, claim_timeout=timedelta(milliseconds=TIMEOUT))
    processor = TrackingProcessor(
        "p",
        source(stores),
        stores.tokens,
        lambda event, context: None,
        settings=settings,
        clock=ManualClock(3 * TIMEOUT * 1_000_000),  # past the claims made at 0
    )
    worker = SegmentWorker(processor, 0)
    stores.tokens.initialize("p", segment_count=segment_count)
    claimed_with_token(stores, 0, worker.owner, T1)
    if segment_count == 2:
        claimed_with_token(stores, 1, "b", T1)
    state = SegmentState(stores.tokens.entries("p")[0], handled=frozenset())
    meanwhile(stores)
    caplog.set_level(logging.WARNING, logger="ordo.processing")

    assert worker._control(state)  # the claim ends

    (warning,) = (r for r in caplog.records if "under a lapsed claim" in r.message)
    assert warning.message == (
        f"the segment moved on under a lapsed claim: processor=p segment=0 {changed}"
    )
