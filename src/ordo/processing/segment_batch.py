"""A batch of a claimed segment's events, handled in one transaction with its token.

The worker (`SegmentWorker`) reads a segment's events and hands them here a batch at a time:
the handler runs in the batch's transaction, which records what was handled and stores the
token moved past the batch. A failing handler reruns the batch event by event, with retries
and the processor's error mode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import TYPE_CHECKING

from ordo.errors import EventHandlingError, StorageUnavailableError
from ordo.processing.handler import HandlerContext
from ordo.processing.ports import BatchTransaction, DeadLetter, TokenEntry
from ordo.query import EventEnvelope
from ordo.settings import ErrorMode
from ordo.time import TimeUUID
from ordo.types import PersistenceId

if TYPE_CHECKING:
    from ordo.processing.processor import TrackingProcessor

logger = logging.getLogger(__name__)


class _HandlerFailedError(Exception):
    """Internal: a handler raised during an optimistic batch; rerun it event by event."""


class _StoppedRetryingError(Exception):
    """Internal: the processor stopped while an event waited for its next retry."""


def handle_batch(
    p: TrackingProcessor, owner: str, state: SegmentState, rows: list[EventEnvelope]
) -> bool:
    """Handle `rows` as one batch of `owner`'s claimed segment; the worker calls it per batch.

    A failing handler reruns the batch event by event with retries (see `_handle`). False when
    the processor stopped during a retry's wait: the batch was rolled back, and its events are
    handled again by the segment's next claim (the retries were not used up, so the error mode
    does not apply to an event only because the processor stopped).

    The claim is extended between batches only (extending it inside would need the batch's
    transaction), so a batch handled for longer than the claim timeout outlives it: another
    owner may take the segment, and on PostgreSQL the server ends the transaction once it sits
    idle that long. That is logged at WARNING, whatever the batch's outcome, so that
    batch_size or claim_timeout can be fitted to the handler.
    """
    started = time.monotonic()
    try:
        try:
            _batch(p, owner, state, rows, careful=False)
        except _HandlerFailedError:
            _batch(p, owner, state, rows, careful=True)
    except _StoppedRetryingError:
        return False
    finally:
        _warn_if_past_the_claim(p, state, time.monotonic() - started)
    return True


def _warn_if_past_the_claim(p: TrackingProcessor, state: SegmentState, seconds: float) -> None:
    """The WARNING of a batch that outlasted the claim timeout (see `handle_batch`)."""
    timeout = p.settings.claim_timeout.total_seconds()
    if seconds > timeout:
        logger.warning(
            "a batch was handled for longer than the claim timeout, so its claim may have "
            "lapsed under it: processor=%s segment=%d batch=%.3f s claim_timeout=%g s (lower "
            "batch_size or the handler's retries, or raise claim_timeout)",
            p.name,
            state.entry.segment.segment_id,
            seconds,
            timeout,
        )


def _batch(
    p: TrackingProcessor,
    owner: str,
    state: SegmentState,
    rows: list[EventEnvelope],
    *,
    careful: bool,
) -> None:
    segment = state.entry.segment
    with p._tokens.batch(
        p.name,
        segment.segment_id,
        owner,
        mask=segment.mask,
        idle_limit_ms=p.settings.claim_timeout_ms,
    ) as batch:
        seen = batch.positions({r.persistence_id for r in rows}) if p._is_per_id else {}
        context = HandlerContext(
            processor=p.name,
            segment=state.entry.segment,
            is_replay=False,
            connection=batch.connection,
            placeholder=batch.placeholder,
        )
        for row in rows:
            if row.tag_pid_sequence_nr <= seen.get(row.persistence_id, 0):
                continue  # processed already (positions are exact)
            if (row.persistence_id, row.tag_pid_sequence_nr) in state.handled:
                continue  # handled before this claim (by this segment or a merged half)
            replaying = state.replay_key is not None and row.offset_key <= state.replay_key
            event_context = context if not replaying else _replay(context)
            if careful:
                _handle(p, row, event_context, batch)
            else:
                try:
                    p._handler(row, event_context)
                except Exception as exc:  # user code: rerun the batch carefully
                    raise _HandlerFailedError from exc
                except BaseException as exc:
                    raise _handling_error(p, row, exc) from exc
            if p._is_per_id:
                batch.record(row.persistence_id, row.tag_pid_sequence_nr)
            else:
                batch.record_handled(row.persistence_id, row.tag_pid_sequence_nr, row.offset_key)
        state.advance(rows)
        batch.store_token(state.token)


def _handle(
    p: TrackingProcessor, row: EventEnvelope, context: HandlerContext, batch: BatchTransaction
) -> None:
    """One event with retries and backoff, each attempt in a savepoint; then the mode."""
    settings = p.settings
    for attempt in range(settings.max_retries + 1):
        try:
            with batch.savepoint():
                p._handler(row, context)
            return
        except StorageUnavailableError:
            raise  # the batch's transaction is lost: rolled back, and claimed again
        except Exception as exc:  # user code: retry, then apply error_mode
            error = exc
            if attempt < settings.max_retries and p._stopped.wait(_retry_wait(p, attempt)):
                raise _StoppedRetryingError from exc
        except BaseException as exc:
            raise _handling_error(p, row, exc) from exc
    if settings.error_mode is ErrorMode.SKIP:
        logger.warning(
            "skipped an event: processor=%s persistence_id=%s sequence_nr=%d error=%r",
            p.name,
            row.persistence_id,
            row.sequence_nr,
            error,
        )
    elif settings.error_mode is ErrorMode.DEAD_LETTER:
        batch.dead_letter(DeadLetter.of(row, error))
    else:
        raise _handling_error(p, row, error)


def _handling_error(
    p: TrackingProcessor, row: EventEnvelope, cause: BaseException
) -> EventHandlingError:
    """The error that stops the processor on `row`: its handler failed for good, or exited.

    A handler's BaseException that is no Exception (SystemExit, KeyboardInterrupt,
    GeneratorExit) stops the processor at once, whatever the error mode: it asks to end, not
    to retry or pass over the event. Let through, it ended the thread that met the event
    (threading drops SystemExit without a word) with no `failure` kept, while the other
    threads went on with their segments: the event's segment was processed no more.
    """
    return EventHandlingError(
        processor=p.name,
        persistence_id=row.persistence_id,
        sequence_nr=row.sequence_nr,
        cause=cause,
    )


def _retry_wait(p: TrackingProcessor, attempt: int) -> float:
    """Seconds before retry `attempt + 1`: the backoff doubled, at most half the claim timeout.

    The batch's transaction stays open while it waits: on PostgreSQL a transaction idle for the
    claim timeout is ended (`TokenStore.batch`'s idle limit), and the retries would start over
    with every claim, never reaching the error mode. Uncapped, the doubling also outgrew what
    a wait accepts (an OverflowError from the 17th retry of a one-day backoff).
    """
    settings = p.settings
    doubled = settings.retry_backoff.total_seconds() * 2.0**attempt
    return min(doubled, settings.claim_timeout.total_seconds() / 2)


class SegmentState:
    """The token of the claimed segment as batches move it forward (it never moves back)."""

    def __init__(
        self, entry: TokenEntry, *, handled: AbstractSet[tuple[PersistenceId, int]]
    ) -> None:
        self.entry = entry
        self.handled = handled
        """Events handled before the claim, for policies without per-id positions."""
        self.token = entry.token
        # A replay boundary is a point (the reset stores one without parts ahead); `reached`
        # also reads right one stored with parts by an earlier version.
        replay = None if entry.replay_until is None else entry.replay_until.reached
        self.replay_key = None if replay is None else replay.key

    def advance(self, rows: list[EventEnvelope]) -> None:
        """Move the token to the newest of `rows` (inclusive), if that is further on."""
        if not rows:
            return
        newest = max(row.offset_key for row in rows)
        if self.token.offset is None or self.token.offset.key < newest:
            self.token = self.token.advanced_to(TimeUUID.from_bytes(newest))


def _replay(context: HandlerContext) -> HandlerContext:
    return replace(context, is_replay=True)
