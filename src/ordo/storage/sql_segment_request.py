"""Segment requests in SQL: what an operator or another owner asks a segment's owner to do.

A part of SqlTokenStore: asking (`request`, with its rules for pending hand-overs and merges,
and `request_merge` for a merging owner), taking, listing the pending requests, whether a merge
still waits for the hand-over its sibling's owner is making (`hand_over`), and what a merge
leaves to its owner first (`merge`). Requests that end with a change (a split, release,
merge or hand-over): sql_ended_request.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from ordo.errors import (
    InvalidInputError,
    PendingHandOverError,
    PendingMergeError,
    UnableToClaimTokenError,
)
from ordo.journal import validation
from ordo.processing.connection import SqlConnection
from ordo.processing.ports import TokenEntry
from ordo.processing.segment import Segment
from ordo.processing.segment_request import PendingRequest, SegmentAction, SegmentRequest
from ordo.storage.sql_token_rows import SqlTokenRows, check_segment

_MERGE = SegmentRequest(action=SegmentAction.MERGE)
_KEPT_FROM_A_MERGE = frozenset({SegmentAction.SPLIT, SegmentAction.RELEASE})
"""What refuses a merge (pending on either segment), and a merge's hand-over does not replace."""


class SqlSegmentRequests(SqlTokenRows):
    """The segment_requests rows of the token store. Thread-safe."""

    def request(
        self,
        processor: str,
        segment_id: int,
        request: SegmentRequest,
        *,
        now_ms: int,
        replace_hand_over: bool = False,
    ) -> PendingRequest | None:
        """Ask the segment's owner to act (the latest request wins, but for a hand-over).

        A pending hand-over is what a merge of the segment's sibling waits for: another
        request replaces it only with `replace_hand_over` (PendingHandOverError otherwise),
        so that an operator's release does not replace it silently and hold the merge up. The
        same request again is no replacement. A pending merge that another request replaces
        ends, and so does the hand-over of the sibling it asked for (withdrawn), so that the
        sibling's owner does not hand its segment over to an owner that is no longer merging.
        A hand-over of the lower of two siblings whose own merge is pending is refused
        (PendingMergeError): both owners would be merging the pair, each handing its segment to
        the other. The checks and the writes are one transaction, under the segment's token row lock
        (PostgreSQL), which every request takes first.

        A split of a segment whose mask uses every hash bit is refused
        (InvalidSegmentOperationError): its owner could not obey it. A hand-over must name the
        owner to hand over to: its owner would ignore one that names
        none. `now_ms` must be an int: SQLite would store "x", and every later
        `pending_requests` (the status of the processor) would fail reading it back.

        Returns the different request it replaced (None when none, or the same one, was
        pending), read in this transaction under the lock of its row (`_pending_request`), so
        that the receipt neither names one the owner obeyed meanwhile nor misses one stored
        meanwhile.
        """
        check_segment(processor, segment_id)
        _check_request(request)
        validation.integer(now_ms, name="now_ms")
        with self._write() as conn:
            segment = self._entry(conn, processor, segment_id).segment
            if request.action is SegmentAction.SPLIT:
                segment.split()  # InvalidSegmentOperationError now, not in its owner's thread
            return self._ask(
                conn,
                processor,
                segment,
                request,
                now_ms=now_ms,
                replace_hand_over=replace_hand_over,
            )

    def request_merge(self, processor: str, segment_id: int, owner: str, *, now_ms: int) -> bool:
        """Ask the owned segment's merge again, and its sibling's owner to hand it to `owner`.

        For the owner of a segment whose merge found the sibling held by another owner: it
        retries at its next check, once the sibling is handed over. The two requests are one
        transaction, under both token rows' locks (PostgreSQL), taken in the order `merge`
        takes them: as two, an operator's release or split of the segment made between them
        would end the merge (and withdraw a hand-over not stored yet), and the hand-over then
        stored would send the sibling to an owner that is no longer merging.

        A different request pending on the segment counts as the later one (an operator's,
        made since the owner took its merge): it stays, the merge ends and the sibling's
        hand-over is withdrawn; returns False. A pending hand-over of the segment itself
        refuses the merge (PendingHandOverError: the sibling's owner merges the pair), and so
        does a merge pending on the sibling when that is the lower segment (PendingMergeError:
        its merge goes first); nothing is stored then. No hand-over is asked of a sibling
        `owner` holds already (its owner handed it over since the merge was tried), nor of one
        with a split or release pending (an operator's, made while its owner was handing it
        over, which `hand_over` then skipped, or with `replace_hand_over`): the hand-over
        replaced it unseen; now its owner acts on it, and the merge asks at its next retry.
        Returns True when the merge is pending.

        Raises:
            UnableToClaimTokenError: `owner` no longer holds the segment; its new owner must
                not hand the sibling to this one.
            InvalidSegmentOperationError: the sibling was split since (nothing to merge with).

        """
        check_segment(processor, segment_id, owner)
        validation.integer(now_ms, name="now_ms")
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=owner)
        with self._write() as conn:
            entry, sibling = self._owned_with_sibling(conn, processor, segment_id, owner)
            if self._ask(conn, processor, entry.segment, _MERGE, now_ms=now_ms, keep_pending=True):
                return False  # a different request was pending: it stays, and the merge ends
            on_sibling = self._pending(conn, processor, sibling.segment.segment_id)
            if sibling.owner != owner and (
                on_sibling is None or on_sibling.action not in _KEPT_FROM_A_MERGE
            ):
                # This owner's hand-over replaces one asked by an earlier owner of the segment.
                self._ask(
                    conn,
                    processor,
                    sibling.segment,
                    hand_over,
                    now_ms=now_ms,
                    replace_hand_over=True,
                )
        return True

    def _ask(
        self,
        conn: SqlConnection,
        processor: str,
        segment: Segment,
        request: SegmentRequest,
        *,
        now_ms: int,
        replace_hand_over: bool = False,
        keep_pending: bool = False,
    ) -> PendingRequest | None:
        """Store `request` for the segment by the rules of `request` and `request_merge`.

        With `keep_pending` a different pending request counts as the later one: it stays,
        and replaces this one, which is not stored (a merge so replaced withdraws the
        sibling's hand-over too). Returns the different request that was pending: replaced,
        or with `keep_pending` kept (None when none was, or the same: asked again).
        """
        found = self._pending_request(conn, processor, segment.segment_id)
        pending = None if found is None else found.request
        _check_replaceable(
            processor, segment, pending, request, replace_hand_over=replace_hand_over
        )
        is_replaced = keep_pending and pending is not None and pending != request
        if not is_replaced:
            conn.execute(
                self._sql(
                    "INSERT INTO segment_requests (processor, segment_id, action, "
                    "target_owner, requested_at) VALUES ({p}, {p}, {p}, {p}, {p}) "
                    "ON CONFLICT (processor, segment_id) DO UPDATE SET action = "
                    "excluded.action, target_owner = excluded.target_owner, "
                    "requested_at = excluded.requested_at"
                ),
                (
                    processor,
                    segment.segment_id,
                    request.action.value,
                    request.target_owner,
                    now_ms,
                ),
            )
        # The merge that ends: a pending one this request replaces, or this one, replaced.
        ended, by = (request, pending) if is_replaced else (pending, request)
        if ended is not None and ended.action is SegmentAction.MERGE and ended != by:
            self._withdraw_hand_over(conn, processor, segment)
        return None if pending == request else found

    def _withdraw_hand_over(self, conn: SqlConnection, processor: str, segment: Segment) -> None:
        """Delete the pending hand-over of the segment's sibling, which its merge asked for.

        Only of the sibling as it was (the same mask): once split, its half's hand-over is for
        the merge of that half's own sibling. The sibling's token row is not locked: `request`
        locked the segment's own row first, and the operations that lock both rows lock the
        lower segment's first, so a higher segment's request could deadlock with them. The
        root has no sibling (its "sibling" id is its own).
        """
        if segment.is_root:
            return
        conn.execute(
            self._sql(
                "DELETE FROM segment_requests WHERE processor = {p} AND segment_id = {p} "
                "AND action = {p} AND EXISTS (SELECT 1 FROM tokens WHERE processor = {p} "
                "AND segment_id = {p} AND mask = {p})"
            ),
            (
                processor,
                segment.mergeable_segment_id(),
                SegmentAction.HAND_OVER.value,
                processor,
                segment.mergeable_segment_id(),
                segment.mask,
            ),
        )

    def take_request(
        self,
        processor: str,
        segment_id: int,
        *,
        actions: AbstractSet[SegmentAction] = frozenset(SegmentAction),
    ) -> SegmentRequest | None:
        """Remove and return the pending request for the segment, if any of `actions`.

        One DELETE ... RETURNING, which checks the action too: a read and then a delete lost a
        request that `request()` stored in between (PostgreSQL, READ COMMITTED): it was deleted
        unseen.
        """
        check_segment(processor, segment_id)
        values = [_check_action(action).value for action in actions]
        if not values:
            return None
        with self._write() as conn:
            row = conn.execute(
                self._sql(
                    "DELETE FROM segment_requests WHERE processor = {p} AND segment_id = {p} "
                    f"AND action IN ({', '.join(['{p}'] * len(values))}) "
                    "RETURNING action, target_owner"
                ),
                (processor, segment_id, *values),
            ).fetchone()
        return None if row is None else _request(row[0], row[1])

    def pending_requests(self, processor: str) -> Sequence[PendingRequest]:
        """The requests no owner has taken yet, by segment id."""
        validation.processor_name(processor)
        rows = self._fetchall(
            "SELECT segment_id, action, target_owner, requested_at FROM segment_requests "
            "WHERE processor = {p} ORDER BY segment_id",
            (processor,),
        )
        return [pending_request(row) for row in rows]

    def _pending(
        self, conn: SqlConnection, processor: str, segment_id: int
    ) -> SegmentRequest | None:
        found = self._pending_request(conn, processor, segment_id)
        return None if found is None else found.request

    def _pending_request(
        self, conn: SqlConnection, processor: str, segment_id: int
    ) -> PendingRequest | None:
        """The request pending on the segment, its row locked (PostgreSQL) until the commit.

        Read under the segment's token row lock, which every request takes first. An owner's
        `take_request` takes no token row lock: it deleted the request read here before this
        transaction replaced it, which then said it replaced a request the owner took. It
        waits for this transaction now, and takes what is pending then.
        """
        row = conn.execute(
            self._sql(
                "SELECT segment_id, action, target_owner, requested_at FROM segment_requests "
                "WHERE processor = {p} AND segment_id = {p}" + self.LOCK_ROWS
            ),
            (processor, segment_id),
        ).fetchone()
        return None if row is None else pending_request(row)

    def _merge_awaits(
        self,
        conn: SqlConnection,
        entry: TokenEntry,
        sibling: TokenEntry | None,
        to: str,
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> bool:
        """Whether `to`'s merge of the sibling still waits for the segment (see `hand_over`)."""
        if (
            sibling is None
            or to == entry.owner
            or sibling.owner != to
            or not sibling.is_held(now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        ):
            return False
        on_sibling = self._pending(conn, entry.processor, sibling.segment.segment_id)
        on_segment = self._pending(conn, entry.processor, entry.segment.segment_id)
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=to)
        return on_sibling in (None, _MERGE) and on_segment in (None, hand_over)

    def _check_nothing_asked_first(self, conn: SqlConnection, half: TokenEntry) -> None:
        """Refuse a merge while a split or release is pending on either segment.

        On the merging segment, one asked of its owner since it took the merge; on the
        (claimable) sibling, one asked of the merging owner since the hand-over (before,
        `hand_over` skips the move), or left by an owner that released it before taking it.
        The command says the owner was asked, and the merge would delete the request unseen
        with the merged-away higher segment, or leave it on the lower one to split or release
        the merged segment. Whoever holds or claims the segment acts on it first
        (UnableToClaimTokenError until then; `request_merge` keeps it and ends the merge).
        """
        pending = self._pending(conn, half.processor, half.segment.segment_id)
        if pending is not None and pending.action in _KEPT_FROM_A_MERGE:
            msg = (
                f"processor {half.processor!r} segment {half.segment} has a "
                f"{pending.action} request pending: it is acted on before any merge"
            )
            raise UnableToClaimTokenError(msg)


def _check_replaceable(
    processor: str,
    segment: Segment,
    pending: SegmentRequest | None,
    request: SegmentRequest,
    *,
    replace_hand_over: bool,
) -> None:
    """Refuse what `request` must not replace: a hand-over, or the lower sibling's merge."""
    if (
        pending is not None
        and pending.action is SegmentAction.HAND_OVER
        and pending != request
        and not replace_hand_over
    ):
        raise PendingHandOverError(
            processor=processor,
            segment_id=segment.segment_id,
            target_owner=pending.target_owner,
            request=request.describe(),
        )
    if (
        pending is not None
        and pending.action is SegmentAction.MERGE
        and request.action is SegmentAction.HAND_OVER
        and segment.segment_id < segment.mergeable_segment_id()
    ):
        raise PendingMergeError(
            processor=processor, segment_id=segment.segment_id, target_owner=request.target_owner
        )


def _check_request(request: object) -> None:
    """A SegmentRequest whose action is a SegmentAction; a hand-over names its new owner."""
    if not isinstance(request, SegmentRequest) or not isinstance(request.action, SegmentAction):
        msg = f"request must be a SegmentRequest with a SegmentAction, got {request!r:.80}"
        raise InvalidInputError(msg)
    if request.action is SegmentAction.HAND_OVER or request.target_owner is not None:
        validation.owner_name(request.target_owner, name="target_owner")


def _check_action(action: object) -> SegmentAction:
    if not isinstance(action, SegmentAction):
        msg = f"actions must hold SegmentAction members, got {action!r:.80}"
        raise InvalidInputError(msg)
    return action


def pending_request(row: Sequence[object]) -> PendingRequest:
    """The PendingRequest of a row of segment_id, action, target_owner, requested_at."""
    segment_id, action, target_owner, requested_at = row
    return PendingRequest(
        segment_id=int(str(segment_id)),
        request=_request(action, target_owner),
        requested_at_ms=int(str(requested_at)),
    )


def _request(action: object, target_owner: object) -> SegmentRequest:
    return SegmentRequest(
        action=SegmentAction(str(action)),
        target_owner=None if target_owner is None else str(target_owner),
    )
