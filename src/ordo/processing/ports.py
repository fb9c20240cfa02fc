"""What tracking processors need from storage: the token store and its batch transaction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

from ordo.processing.connection import SqlConnection
from ordo.processing.segment import Segment
from ordo.processing.segment_request import (
    PendingRequest,
    SegmentAction,
    SegmentRequest,
    UnclaimedChange,
)
from ordo.processing.token import TrackingToken
from ordo.query import EventEnvelope
from ordo.time import TimeUUID
from ordo.types import PersistenceId

PROJECTION_LEASE_TIMEOUT = timedelta(seconds=10)
"""How long a Spark projection's lease stays fresh after its last renewal, at the least.

A reset refuses a lease renewed within its claim timeout or within this, whichever is longer.
The claim timeout alone is the processors' setting, which the projection's driver does not
renew by: given one shorter than the driver's renewal interval, a reset took a running
projection's lease for a crashed driver's and reset under its query.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEntry:
    """One segment of a processor as stored: its token, claim and replay boundary."""

    processor: str
    segment: Segment
    token: TrackingToken
    owner: str | None
    claimed_at_ms: int | None
    replay_until: TrackingToken | None
    """Events up to this token (inclusive) are replays of a reset processor."""

    def is_claimable_by(self, owner: str, *, now_ms: int, claim_timeout_ms: int) -> bool:
        """Unowned, owned by `owner`, or its claim expired (Axon's rule)."""
        return self.owner == owner or not self.is_held(
            now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        )

    def is_held(self, *, now_ms: int, claim_timeout_ms: int) -> bool:
        """Whether an owner holds a claim that has not expired, which nobody else may take."""
        return (
            self.owner is not None
            and self.claimed_at_ms is not None
            and self.claimed_at_ms >= now_ms - claim_timeout_ms
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    """An event a handler could not process, kept with the error for an operator."""

    persistence_id: PersistenceId
    sequence_nr: int
    position: int
    offset_key: bytes
    error: str

    @classmethod
    def of(cls, event: EventEnvelope, error: BaseException) -> DeadLetter:
        """The dead letter of an event its handler failed on."""
        return cls(
            persistence_id=event.persistence_id,
            sequence_nr=event.sequence_nr,
            position=event.tag_pid_sequence_nr,
            offset_key=event.offset_key,
            error=repr(error),
        )


class BatchTransaction(Protocol):
    """One batch of a segment: handler writes, positions and the new token, committed together.

    The processor opens it with TokenStore.batch(); on a clean exit the token is stored only
    if the caller still owns the segment, otherwise UnableToClaimTokenError rolls everything
    back (another process took the segment over: its work must not be applied twice).
    """

    @property
    def connection(self) -> SqlConnection:
        """The database connection of this transaction, for handlers that write projections."""
        ...

    @property
    def placeholder(self) -> str:
        """The connection driver's parameter placeholder (`?` for SQLite, `%s` for psycopg)."""
        ...

    def positions(self, persistence_ids: Iterable[PersistenceId]) -> Mapping[PersistenceId, int]:
        """The last processed position of each persistence id (absent: none processed)."""
        ...

    def record(self, persistence_id: PersistenceId, position: int) -> None:
        """Mark `position` of the persistence id processed (stored at commit)."""
        ...

    def record_handled(
        self, persistence_id: PersistenceId, position: int, offset_key: bytes
    ) -> None:
        """Record one event as handled (stored at commit), for policies without positions."""
        ...

    def dead_letter(self, letter: DeadLetter) -> None:
        """Keep a failed event in the dead-letter table (committed with the batch)."""
        ...

    def store_token(self, token: TrackingToken) -> None:
        """The segment's token after this batch (stored at commit, if still owned)."""
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested transaction: an exception inside undoes only what happened inside.

        StorageUnavailableError when the savepoint itself fails: the transaction is lost.
        """
        ...


@runtime_checkable
class TokenStore(Protocol):
    """Tokens and claims of tracking processors; every operation is atomic. Thread-safe."""

    def initialize(self, processor: str, *, segment_count: int) -> Sequence[TokenEntry]:
        """Create the processor's first segments unless it has some; return its segments."""
        ...

    def entries(self, processor: str) -> Sequence[TokenEntry]:
        """Every segment of the processor (UnknownProcessorError if it has none)."""
        ...

    def processors(self) -> Sequence[str]:
        """The names of every processor with tokens."""
        ...

    def processors_without_tokens(self) -> Mapping[str, int]:
        """Processors with positions (or handled batches) but no tokens: their positions' count.

        A Spark projection's own sink holds only its positions.
        """
        ...

    def claim(
        self, processor: str, segment_id: int, owner: str, *, now_ms: int, claim_timeout_ms: int
    ) -> TokenEntry:
        """Take or renew the claim (UnableToClaimTokenError if another owner holds it)."""
        ...

    def release(
        self, processor: str, segment_id: int, owner: str, *, as_requested: bool = False
    ) -> None:
        """Give the claim up (nothing happens unless `owner` holds it).

        `as_requested`: obeying the release pending on the segment, which goes with the claim.
        A request of another action pending there refuses it (PendingRequestError), and the
        owner keeps the claim: made since the owner read the release, it replaced that (the
        receipt said so), and the owner acts on it instead, on the segment it holds.
        """
        ...

    def split(self, processor: str, segment_id: int, owner: str) -> tuple[Segment, Segment]:
        """Split an owned segment, obeying a split pending there; the new half is unclaimed.

        A release, merge or hand-over pending there refuses the split (PendingRequestError): it
        was asked of the whole segment (made since the owner read the split, which it
        replaced), and the lower half, which keeps the segment id, would carry it out on half
        of it. The owner acts on it first. UnableToClaimTokenError when `owner` does not hold
        the segment.
        """
        ...

    def merge(
        self,
        processor: str,
        segment_id: int,
        owner: str,
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> Segment:
        """Merge an owned segment with its sibling, which must be claimable.

        The lower token is kept and the merged segment stays claimed by `owner`, and the
        requests pending on either half end. A split or release pending on either refuses the
        merge (UnableToClaimTokenError), which would drop it unseen, or carry it out on the
        merged segment: one asked of `owner` for its segment since it read the merge, or for
        the sibling since that was handed over to it, or one left on a free sibling by an
        owner that released it first. Whoever holds or claims the segment acts on it first.
        UnableToClaimTokenError also when the sibling is not claimable.
        """
        ...

    def change_unclaimed(
        self,
        processor: str,
        segment_id: int,
        action: SegmentAction,
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> UnclaimedChange:
        """An operator's split, merge (with the sibling) or release of segments nobody holds.

        One transaction (UnableToClaimTokenError while an owner holds one): an expired claim
        ends, and the requests pending there are replaced, as by a later request, and returned
        ordered by segment id (a merge's two halves in the same order whichever one is named).
        """
        ...

    def request(
        self,
        processor: str,
        segment_id: int,
        request: SegmentRequest,
        *,
        now_ms: int,
        replace_hand_over: bool = False,
    ) -> PendingRequest | None:
        """Ask the segment's owner, wherever it runs, to split, merge, release or hand over.

        A segment holds one request and the latest wins, except over a pending hand-over
        (what a merge waits for): a different request replaces that only with
        `replace_hand_over`, and is refused with PendingHandOverError otherwise. A request
        that replaces a pending merge withdraws the hand-over that merge asked of the sibling,
        and a hand-over of the lower of two siblings whose own merge is pending is refused
        with PendingMergeError (both owners merge the pair: the lower segment's goes first).
        The checks and writes are one transaction, which returns the different request it
        replaced on the segment (None when none, or the same one, was pending).
        """
        ...

    def request_merge(self, processor: str, segment_id: int, owner: str, *, now_ms: int) -> bool:
        """Ask an owned segment's merge again and the sibling's owner to hand it to `owner`.

        For an owner whose merge found the sibling held: one transaction, so that nothing
        (an operator's release or split) ends the merge between the two requests and leaves a
        hand-over to an owner that is not merging. A different request pending on the segment
        wins as if it came later: it stays, the merge ends, the sibling's hand-over is
        withdrawn, and this returns False. PendingHandOverError when the segment is to be
        handed over itself, PendingMergeError when the sibling is the lower segment and its
        own merge is pending (the merge is then left to the sibling's owner); nothing is
        stored then. No hand-over is asked of a sibling `owner` holds, nor of one with a split
        or release pending (it stays; the merge asks at its next retry). UnableToClaimTokenError
        when `owner` does not hold the segment, InvalidSegmentOperationError when it has no
        sibling to merge with. Returns True when the merge is pending.
        """
        ...

    def take_request(
        self,
        processor: str,
        segment_id: int,
        *,
        actions: AbstractSet[SegmentAction] = frozenset(SegmentAction),
    ) -> SegmentRequest | None:
        """Remove and return the segment's pending request if of `actions` (atomically)."""
        ...

    def pending_requests(self, processor: str) -> Sequence[PendingRequest]:
        """The requests no owner has carried out yet, by segment id (an owner reads its own)."""
        ...

    def hand_over(
        self,
        processor: str,
        segment_id: int,
        owner: str,
        *,
        to: str,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> bool:
        """Move an owned claim to `to` for its merge (UnableToClaimTokenError if not owned).

        Only while the merge waits for it: `to` holds the sibling under a live claim with
        nothing but its merge pending there, and nothing but a hand-over to `to` is pending on
        the segment (another is an operator's, made since); otherwise (and to `owner` itself)
        False: the owner keeps it. Either way the hand-over to `to` pending there is obeyed.
        """
        ...

    def reset(
        self, processor: str, token: TrackingToken, *, now_ms: int, claim_timeout_ms: int
    ) -> None:
        """Move every segment to `token`, marking what was processed before as replay.

        The replay boundary (`replay_until`) is the furthest offset processed, or `token`
        when that is further: the segments' streams do not look back before it, so the events
        up to `token` stay processed though their positions are cleared.

        Clears the processor's positions and handled batches too, so that the replayed
        events are handled again (where it has positions but no tokens, a Spark projection's
        sink, only those). Refused (UnableToClaimTokenError) while any
        segment is claimed or a projection's lease is fresh (renew_projection_lease: renewed
        within `claim_timeout_ms` or PROJECTION_LEASE_TIMEOUT, whichever is longer), and
        (UnknownProcessorError) when there is nothing to reset.
        """
        ...

    def check_reset(self, processor: str, *, now_ms: int, claim_timeout_ms: int) -> None:
        """Raise what `reset` would refuse, changing nothing."""
        ...

    def renew_projection_lease(self, processor: str, owner: str, *, now_ms: int) -> None:
        """Write or renew a running Spark projection's lease (reset refuses while it is fresh)."""
        ...

    def release_projection_lease(self, processor: str, owner: str) -> None:
        """Delete the projection's lease (nothing happens unless `owner` holds it)."""
        ...

    def advance_unclaimed(
        self, processor: str, offset: TimeUUID, *, now_ms: int, claim_timeout_ms: int
    ) -> None:
        """Move the token of every segment nobody holds forward to `offset` (never back).

        For a reader that holds no claims and has applied every event up to `offset` (a Spark
        projection), so that status and cleanup see how far it got. A segment under a live
        claim keeps its token; one whose claim expired at `now_ms` is free, as for `claim`:
        its token moves and the expired claim ends.
        """
        ...

    def batch(
        self,
        processor: str,
        segment_id: int,
        owner: str,
        *,
        mask: int | None = None,
        idle_limit_ms: int | None = None,
    ) -> AbstractContextManager[BatchTransaction]:
        """Open one batch transaction for an owned segment.

        With `mask`, a stored token commits only while the segment still has that mask (the
        batch is rolled back with UnableToClaimTokenError otherwise). With `idle_limit_ms`, a
        backend whose locks outlive a stalled process ends the transaction when it sits idle
        that long, so that the segment's next owner is not kept waiting (a StorageError then
        rolls the batch back).
        """
        ...

    def dead_letters(self, processor: str) -> Sequence[DeadLetter]:
        """The processor's dead letters, oldest first."""
        ...

    def positions(self, processor: str) -> Mapping[PersistenceId, int]:
        """The last processed position of every persistence id (for lag and status)."""
        ...

    def handled(
        self, processor: str, *, after: bytes, up_to: bytes
    ) -> AbstractSet[tuple[PersistenceId, int]]:
        """The (persistence id, position) of events that batches recorded as handled.

        Every batch whose events' offset keys reach past `after` and start up to `up_to`
        (`record_handled`) contributes all its events.
        """
        ...

    def forget_handled(self, processor: str, segment_id: int, owner: str, *, before: bytes) -> None:
        """Drop the records of handled events below `before` (an offset key) while held.

        Only while `owner` holds the segment still, checked in the same statement. The caller
        read `before` from the segments earlier (the lowest stream start). Without a reset no
        stream start moves back, and a reset ends every claim: one held still says no reset
        came in between. Unchecked, a worker that stalled after the read deleted what the
        replay after a reset had recorded below that stale point, which a merged segment's
        stream then handled again.
        """
        ...
