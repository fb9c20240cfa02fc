"""A tracking processor's thread: claims a segment, handles its events in batches, obeys requests.

The worker is the processor's internal collaborator: it reads the processor's settings, token
store, source and handler, and reports a failure back to it. Each batch is handled in
`segment_batch`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Set as AbstractSet
from datetime import timedelta
from typing import TYPE_CHECKING

from ordo.errors import (
    EventHandlingError,
    MissingTaggedEventError,
    StorageError,
    StoresClosedError,
    UnableToClaimTokenError,
    UnknownProcessorError,
    UnknownSegmentError,
)
from ordo.processing.ports import TokenEntry
from ordo.processing.request_obeyer import RequestObeyer
from ordo.processing.segment import Segment
from ordo.processing.segment_batch import SegmentState, handle_batch
from ordo.processing.sequencing import sequence_hash
from ordo.query import EventEnvelope
from ordo.query.offset import Offset
from ordo.reconnection import is_outage
from ordo.stopping import stops_waits_on
from ordo.time import TimeUUID
from ordo.types import PersistenceId

if TYPE_CHECKING:
    from ordo.processing.processor import TrackingProcessor

logger = logging.getLogger(__name__)


class SegmentWorker(threading.Thread):
    """One thread: claims a segment, processes it until told otherwise, and so on."""

    def __init__(self, processor: TrackingProcessor, index: int) -> None:
        super().__init__(name=f"ordo-{processor.name}-{index}", daemon=True)
        self.p = processor
        self.index = index
        self.owner = f"{processor._instance}#{index}"
        self.wake = threading.Event()
        self._resting: dict[int, int] = {}  # segment id -> until when (ms) not to claim it
        self._obeyer = RequestObeyer(processor, self.owner, self._resting)
        self._interval_ms = processor.settings.token_claim_interval // timedelta(milliseconds=1)
        self._next_check = 0
        """When the claimed segment's next check is due (ms): `_check_if_due`."""

    def run(self) -> None:
        """Claim, process, release, until the processor stops.

        The processor's stop signal ends this thread's waits for storage (`stops_waits_on`):
        during an outage the call in flight and the release after it each waited out the
        pool's timeout, and stop() took about a minute. An error no branch expects stops the
        processor, which keeps it in `failure` (a token ahead of this process's clock, whose
        stream refuses to start, FutureOffsetError): a thread it ended silently left the
        processor stopped with no failure, and each other thread that met the same ended too.
        """
        with stops_waits_on(self.p._stopped):
            try:
                self._run()
            except Exception as exc:  # what no branch of _run expects: never end silently
                self.p._fail(exc)

    def _run(self) -> None:
        interval = self.p.settings.token_claim_interval.total_seconds()
        while not self.p._stopped.is_set():
            try:
                entry = self._claim_any()
            except (StorageError, StoresClosedError) as exc:
                self._ride_out(exc, "claim failed")
                continue  # after a failure this ends the loop: _fail() sets the stop signal
            if entry is None:
                self._sleep(interval)
                continue
            try:
                self._process_segment(entry)
            except (UnableToClaimTokenError, UnknownProcessorError) as exc:
                # Lost the claim, or the segment is gone (merged away while the claim lapsed):
                # claim again, as a fresh start.
                logger.info("claim lost: processor=%s error=%s", self.p.name, exc)
            except (EventHandlingError, MissingTaggedEventError) as exc:
                # A handler that failed for good, or a gap that stayed open past gap_timeout:
                # going on would skip events. The processor stops and keeps the failure.
                self.p._fail(exc)
            except (StorageError, StoresClosedError) as exc:
                # The batch was rolled back: after an outage the claim is given up and claimed
                # again after a pause, as a fresh start.
                self._ride_out(exc, "storage error")
            finally:
                try:
                    self._release(entry.segment.segment_id)
                except (StorageError, StoresClosedError) as exc:
                    # Unreachable storage (a stopping thread waits for it only briefly), or
                    # closed stores: the claim lapses by itself, as a crashed process's does.
                    logger.warning(
                        "release failed, the claim expires after the claim timeout (%g s): "
                        "processor=%s segment=%d error=%s",
                        self.p.settings.claim_timeout.total_seconds(),
                        self.p.name,
                        entry.segment.segment_id,
                        exc,
                    )
                    self._forget(entry.segment.segment_id)

    def _ride_out(self, exc: StorageError | StoresClosedError, what: str) -> None:
        """Pause after an outage (`is_outage`), so that the next claim retries; else fail.

        What no retry mends stops the processor, which keeps it in `failure`: a server that
        refuses the URL, a file that is no journal (a thread's first connect finds a folder in
        its place), a table dropped or refused to this role, stores closed under it.
        """
        if not is_outage(exc):
            self.p._fail(exc)
            return
        logger.warning("%s: processor=%s error=%s", what, self.p.name, exc)
        self._sleep(self.p.settings.token_claim_interval.total_seconds())

    def _claim_any(self) -> TokenEntry | None:
        """Claim the first segment this worker may take, or None when there is none.

        This look answers a wake-up, which it consumes first (one that comes during the look
        then ends the wait after it). A request wakes every thread, so that the segment's owner
        obeys it at once; left set, it ended each wait of a thread that found no segment at
        once: the thread looked again and again without a pause, thousands of reads of the
        token store a second, until it claimed a segment (with more threads than segments, for
        ever). A wake-up while processing is for the segment's next check (`_process_segment`).

        A segment read free may be gone by the claim: merged into its sibling meanwhile (by
        the sibling's owner, or an operator), UnknownSegmentError. It is passed over as one
        taken meanwhile is; raised, it ended the thread, and a processor of one thread
        processed nothing any more, with no failure. The merged segment is claimed as any is.

        A claim that fails otherwise (an outage, which `_run` rides out) unmarks the segment
        too: left marked as this thread's in `_held`, no thread of the process tried it again,
        and a processor of one thread processed nothing any more, running, with no failure.
        A claim committed though its answer was lost is this owner's: the next look takes it.
        """
        self.wake.clear()
        p, now = self.p, self.p._now_ms()
        timeout = p.settings.claim_timeout_ms
        for entry in p._tokens.entries(p.name):
            segment_id = entry.segment.segment_id
            if self._resting.get(segment_id, 0) > now:
                continue
            with p._lock:
                if segment_id in p._held or not entry.is_claimable_by(
                    self.owner, now_ms=now, claim_timeout_ms=timeout
                ):
                    continue
                p._held[segment_id] = self.index
            try:
                claimed = p._tokens.claim(
                    p.name, segment_id, self.owner, now_ms=now, claim_timeout_ms=timeout
                )
            except (UnableToClaimTokenError, UnknownSegmentError):
                self._forget(segment_id)
                continue
            except BaseException:
                self._forget(segment_id)  # an outage too: see the docstring
                raise
            logger.info("claimed: processor=%s segment=%s", p.name, claimed.segment)
            return claimed
        return None

    def _release(self, segment_id: int) -> None:
        """Give the segment up, and then any sibling handed over to this owner for a merge.

        A merge that ended after the hand-over (an operator's release or split of the merging
        segment) left the sibling claimed by this owner, processed by nobody, until the claim
        timeout. Once this owner's own segment is released no hand-over reaches it any more
        (TokenStore.hand_over wants `to` to hold the merging segment), so none is left behind.
        """
        p = self.p
        p._tokens.release(p.name, segment_id, self.owner)
        self._forget(segment_id)
        for entry in p._tokens.entries(p.name):
            if entry.owner == self.owner:
                p._tokens.release(p.name, entry.segment.segment_id, self.owner)

    def _forget(self, segment_id: int) -> None:
        with self.p._lock:
            self.p._held.pop(segment_id, None)

    def _process_segment(self, entry: TokenEntry) -> None:
        """Read and handle the segment's events until stopped or a request ends the claim.

        The claim is extended (and requests obeyed) after any batch once a check is due, not
        only after the whole poll: a poll reads up to PAGES_PER_POLL pages, many batches, and
        when a slow handler made them outlast the claim timeout the claim expired under a
        busy owner, another process took the segment over and the batch in flight was
        rolled back, its work done again there.
        """
        p, segment = self.p, entry.segment
        selects = p._selects_by_id and p._source.can_select_segments
        stream = p._source.open(
            entry,
            segment=segment if selects else None,
            now_ns=p._clock.now_ns(),
            known=p._tokens.positions(p.name) if p._is_per_id else None,
        )
        state = SegmentState(entry, handled=frozenset() if p._is_per_id else self._handled(entry))
        self._next_check = p._now_ms() + self._interval_ms
        while not p._stopped.is_set():
            step = stream.poll(p._clock.now_ns())
            rows = step.rows if selects else [r for r in step.rows if self._matches(segment, r)]
            for start in range(0, len(rows), p.settings.batch_size):
                batch = rows[start : start + p.settings.batch_size]
                if p._stopped.is_set() or not handle_batch(p, self.owner, state, batch):
                    return
                if self._check_if_due(state):
                    return
            if self._check_if_due(state):  # after a poll with no rows too: an idle claim is kept
                return
            if not step.rows and step.wait_ns > 0:
                wait_ms = max(0, self._next_check - p._now_ms())
                self._sleep(min(step.wait_ns / 1e9, wait_ms / 1000))

    def _check_if_due(self, state: SegmentState) -> bool:
        """`_control` when a check is due (or a request woke the thread); True to end the claim."""
        if not self.wake.is_set() and self.p._now_ms() < self._next_check:
            return False
        self.wake.clear()
        if self._control(state):
            return True
        self._next_check = self.p._now_ms() + self._interval_ms
        return False

    def _matches(self, segment: Segment, row: EventEnvelope) -> bool:
        """Whether the segment owns the event under the processor's sequencing policy.

        A policy that raises on the event (the application's, on a payload it did not expect)
        places it in no segment: EventHandlingError, which stops the processor and names the
        event, whatever the error mode (every segment's thread meets the event: none of them
        may skip or dead-letter it for the others). Raised as it was, it ended each thread that
        read the event, and the processor stopped processing with no failure.
        """
        try:
            value_hash = sequence_hash(self.p.policy, row)
        except Exception as exc:  # the application's policy
            raise EventHandlingError(
                processor=self.p.name,
                persistence_id=row.persistence_id,
                sequence_nr=row.sequence_nr,
                cause=exc,
            ) from exc
        return segment.matches(value_hash)

    def _control(self, state: SegmentState) -> bool:
        """Extend the claim and obey a pending request; True when the claim should end.

        The claim is renewed even when it lapsed meanwhile, if nobody took the segment: what
        was stored since then ends it, as a fresh start from the store would read it. A reset
        to the very token the segment had (where it stood, or the start before any event)
        leaves token and segment as they were but moves the replay boundary (`replay_until`,
        which only a reset or a merge changes) up to where the other segments had got: going
        on, this worker handled their events up to there as new (is_replay False), its stream
        not told of the reset either (EventSource.open's `after_reset`).
        """
        p, now = self.p, self.p._now_ms()
        timeout = p.settings.claim_timeout_ms
        segment = state.entry.segment
        segment_id = segment.segment_id
        claimed = p._tokens.claim(
            p.name, segment_id, self.owner, now_ms=now, claim_timeout_ms=timeout
        )
        changed = _changes(
            ("token", state.token, claimed.token),
            ("segment", segment, claimed.segment),
            ("replay boundary", state.entry.replay_until, claimed.replay_until),
        )
        if changed:
            # The claim lapsed (a stalled process) and meanwhile another owner moved the token,
            # the segment was split or merged, or the processor was reset: this stream is behind
            # the stored token, reads the old segment's events, or replays unflagged. End the
            # claim and start afresh from the store.
            logger.warning(
                "the segment moved on under a lapsed claim: processor=%s segment=%d %s",
                p.name,
                segment_id,
                changed,
            )
            return True
        if not p._is_per_id:
            self._forget_handled(segment_id)
        return self._obeyer.obey(segment, now_ms=now, claim_timeout_ms=timeout)

    def _handled(self, entry: TokenEntry) -> AbstractSet[tuple[PersistenceId, int]]:
        """The events handled before this claim that the segment's stream may deliver again.

        The stream starts at `EventSource.start`, and nothing after the furthest offset known
        at the claim (the token, or a merged half's) was handled by anyone.
        """
        reached = entry.token.reached
        if reached is None:
            return frozenset()
        after = _key(self.p._source.start(entry))
        return self.p._tokens.handled(self.p.name, after=after, up_to=reached.key)

    def _forget_handled(self, segment_id: int) -> None:
        """Drop the handled records below every segment's stream start (`EventSource.start`).

        A stream never reads before its start; one that has processed nothing yet reads from
        the beginning, and then nothing is dropped. The starts read here may be stale by the
        delete (this process stalled past the claim timeout, and the processor was reset and
        replayed meanwhile): the delete happens only while this worker holds `segment_id`
        still, which no reset leaves (TokenStore.forget_handled).
        """
        p = self.p
        lowest = min(_key(p._source.start(e)) for e in p._tokens.entries(p.name))
        if lowest:
            p._tokens.forget_handled(p.name, segment_id, self.owner, before=lowest)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and not self.p._stopped.is_set():
            self.wake.wait(seconds)


def _key(offset: Offset) -> bytes:
    """The offset's storage key; empty (below every key) for the very beginning."""
    return offset.key if isinstance(offset, TimeUUID) else b""


def _changes(*parts: tuple[str, object, object]) -> str:
    """The parts (name, before, after) that differ, as "name before -> after, ...".

    The warning of a segment moved on under a lapsed claim named the segment before and
    after only: after a reset, or another owner's batches, the same segment twice, which
    told the operator nothing of what had changed. An absent value (no replay boundary)
    reads "none".
    """
    return ", ".join(
        f"{name} {'none' if before is None else before} -> {'none' if after is None else after}"
        for name, before, after in parts
        if before != after
    )
