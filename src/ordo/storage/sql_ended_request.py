"""Segment requests in SQL that end with a change of the segment, in the change's transaction.

A part of SqlTokenStore. An owner's split, release, merge or hand-over obeys the request
pending for it: the request goes only when the change commits, so a change that fails (storage
unavailable, the claim lost) leaves it for a retry; the operator who made it was told that the
owner was asked. A split, or a release as requested, is refused while another request is
pending, which was asked of the segment as it is. An operator's change of free segments
replaces the requests pending there, and reports those it deleted, read in the delete's
transaction, so that the receipt neither names a request an owner obeyed meanwhile nor misses
one stored meanwhile.
"""

from __future__ import annotations

from ordo.errors import PendingRequestError
from ordo.processing.connection import SqlConnection
from ordo.processing.segment import Segment
from ordo.processing.segment_request import PendingRequest, SegmentAction
from ordo.storage.sql_segment_request import SqlSegmentRequests, pending_request


class SqlEndedRequests(SqlSegmentRequests):
    """Deletes of segment requests inside the transaction of the change that ends them."""

    def _obey(
        self, conn: SqlConnection, processor: str, segment_id: int, action: SegmentAction
    ) -> None:
        """Delete the request of `action` pending on the segment, which the change carries out.

        A request of another action stays: it was made after the owner read this one, and the
        owner obeys it next (a split or release refuses it first: `_check_nothing_else_asked`).
        """
        conn.execute(
            self._sql(
                "DELETE FROM segment_requests WHERE processor = {p} AND segment_id = {p} "
                "AND action = {p}"
            ),
            (processor, segment_id, action.value),
        )

    def _check_nothing_else_asked(
        self, conn: SqlConnection, processor: str, segment_id: int, action: SegmentAction
    ) -> None:
        """Refuse a split or release while a request of another action is pending on the segment.

        It was asked of the segment as it is: made since the owner read the split or release
        (which it replaced: the latest wins, and its receipt said so), or before an owner's own
        split. Left on the lower half of a split, which keeps the segment id, it would be
        carried out on half the segment its requester meant; a release would carry out the
        request it replaced instead, and leave it to the segment's next owner.
        PendingRequestError: the owner keeps the segment and acts on it first. Read under the
        segment's token row lock, which every request takes first.
        """
        pending = self._pending(conn, processor, segment_id)
        if pending is not None and pending.action is not action:
            raise PendingRequestError(
                processor=processor,
                segment_id=segment_id,
                request=pending.describe(),
                refused=action.value,
            )

    def _forget_hand_over_to(
        self, conn: SqlConnection, processor: str, segment_id: int, owner: str
    ) -> None:
        """Delete a hand-over of the segment to `owner`, made or skipped: `hand_over` obeys it.

        In the hand-over's transaction, under the segment's token row lock, which
        `request_merge` takes too before it asks: one made after a hand-over finds the
        sibling held by its owner and asks nothing. A hand-over to another owner stays: the
        sibling's owner that asked it since merges, and wants the segment from whoever holds it.
        """
        conn.execute(
            self._sql(
                "DELETE FROM segment_requests WHERE processor = {p} AND segment_id = {p} "
                "AND action = {p} AND target_owner = {p}"
            ),
            (processor, segment_id, SegmentAction.HAND_OVER.value, owner),
        )

    def _forget_merged_requests(
        self, conn: SqlConnection, processor: str, segment_id: int, sibling_id: int
    ) -> None:
        """Delete the requests pending on the two merged segments, in the merge's transaction.

        Requests to the merged-away segment must not reach a segment a later split makes; a
        hand-over or merge on either half was asked for this merge (one left on the lower half
        merged the merged segment again). A split or release there refused the merge
        (`_check_nothing_asked_first`), or an operator's merge replaces it.
        """
        conn.execute(
            self._sql(
                "DELETE FROM segment_requests WHERE processor = {p} AND segment_id IN ({p}, {p})"
            ),
            (processor, segment_id, sibling_id),
        )

    def _replace_pending(
        self, conn: SqlConnection, processor: str, segments: tuple[Segment, ...]
    ) -> tuple[PendingRequest, ...]:
        """Delete and return the requests pending on `segments` by segment id, for an operator.

        As a later request replaces them (`_ask`): a merge withdraws the hand-over it asked of
        the sibling, unless that is one of `segments` (its request is replaced already).
        """
        replaced = []
        for segment in segments:
            row = conn.execute(
                self._sql(
                    "DELETE FROM segment_requests WHERE processor = {p} AND segment_id = {p} "
                    "RETURNING segment_id, action, target_owner, requested_at"
                ),
                (processor, segment.segment_id),
            ).fetchone()
            if row is not None:
                replaced.append(pending_request(row))
        if len(segments) == 1 and any(p.request.action is SegmentAction.MERGE for p in replaced):
            self._withdraw_hand_over(conn, processor, segments[0])
        return tuple(sorted(replaced, key=lambda pending: pending.segment_id))
