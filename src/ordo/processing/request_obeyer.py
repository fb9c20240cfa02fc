"""How a tracking processor's worker obeys the request pending on its segment, between batches.

The owner reads the request and leaves it pending: the store deletes it in the transaction of
the change it asks for (TokenStore.split, release with `as_requested`, merge, hand_over), or
the owner drops it when it can never be made (a merge with nothing to merge with, or left to
the sibling's owner). So a change that fails (storage unavailable, the claim lost to another
owner) leaves it pending, and this owner or the segment's next one obeys it at its next check:
the operator was told that the owner was asked. A request that replaced a split or release the
owner read refuses it: it was asked of the segment as it is, and the owner keeps the segment and
obeys it at its next check (a split or release made since it read a merge refuses the merge
likewise: `_merge`; a hand-over goes only while nothing else is pending: `_hand_over`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ordo.errors import (
    InvalidSegmentOperationError,
    PendingHandOverError,
    PendingMergeError,
    PendingRequestError,
    UnableToClaimTokenError,
)
from ordo.processing.segment import Segment
from ordo.processing.segment_request import SegmentAction, SegmentRequest

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ordo.processing.processor import TrackingProcessor

logger = logging.getLogger(__name__)

_OBEYED_ON_SIBLING = frozenset({SegmentAction.SPLIT, SegmentAction.RELEASE})
"""What a merging owner obeys on the sibling instead of merging."""
_MERGE = frozenset({SegmentAction.MERGE})


class RequestObeyer:
    """Obeys the requests of one worker's segments: its owner name and where it rests."""

    def __init__(self, processor: TrackingProcessor, owner: str, resting: dict[int, int]) -> None:
        self.p = processor
        self.owner = owner
        self._resting = resting  # segment id -> until when (ms) the worker does not claim it

    def obey(self, segment: Segment, *, now_ms: int, claim_timeout_ms: int) -> bool:
        """Act on the request pending on the owned segment; True when the claim should end."""
        p = self.p
        asked = {r.segment_id: r.request for r in p._tokens.pending_requests(p.name)}
        request = asked.get(segment.segment_id)
        if request is None:
            return False
        if request.action is SegmentAction.MERGE:
            return self._merge(segment, asked, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        if request.action is SegmentAction.HAND_OVER and request.target_owner:
            return self._hand_over(
                segment.segment_id,
                request.target_owner,
                now_ms=now_ms,
                claim_timeout_ms=claim_timeout_ms,
            )
        return self._split_or_rest(
            segment.segment_id, request.action, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        )

    def _split_or_rest(
        self, segment_id: int, action: SegmentAction, *, now_ms: int, claim_timeout_ms: int
    ) -> bool:
        """Obey a split or release asked of this owner; True when it was one (the claim ends).

        A released segment rests from this owner's claims for two claim timeouts, so that
        another process's thread takes it up. A split or release that a request made since
        replaced is refused (PendingRequestError): the claim stays, and the next check obeys
        that request.
        """
        p = self.p
        try:
            if action is SegmentAction.SPLIT:
                low, high = p._tokens.split(p.name, segment_id, self.owner)
                logger.info("split: processor=%s into %s and %s", p.name, low, high)
                return True
            if action is SegmentAction.RELEASE:
                p._tokens.release(p.name, segment_id, self.owner, as_requested=True)
                self._resting[segment_id] = now_ms + 2 * claim_timeout_ms
                logger.info("released on request: processor=%s segment=%s", p.name, segment_id)
                return True
        except PendingRequestError as exc:
            logger.info("%s replaced by a later request: processor=%s %s", action, p.name, exc)
        return False

    def _hand_over(self, segment_id: int, to: str, *, now_ms: int, claim_timeout_ms: int) -> bool:
        """Hand the segment to `to` for its merge; True when handed over (the claim ends).

        The store skips a hand-over the merge no longer waits for (see TokenStore.hand_over),
        one to this owner among them: the segment is kept and processed on. Made or skipped,
        the hand-over request goes in the same transaction.
        """
        p = self.p
        handed = p._tokens.hand_over(
            p.name, segment_id, self.owner, to=to, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        )
        what = "handed over" if handed else "hand-over skipped, no merge waits for it"
        logger.info("%s: processor=%s segment=%s to=%s", what, p.name, segment_id, to)
        return handed

    def _merge(
        self,
        segment: Segment,
        asked: Mapping[int, SegmentRequest],
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> bool:
        """Merge the segment with its sibling, or ask the sibling's owner to hand it over.

        True when merged. While another owner holds the sibling, the merge is asked of this
        owner again (it retries at its next check) together with the hand-over of the sibling
        (`request_merge`, one transaction: an operator's release or split made between two
        requests ended the merge, and the hand-over asked after it sent the sibling to an
        owner that was not merging). A request made of this owner since it read the merge
        (an operator's release or split of either segment, the sibling once handed over), or
        a split or release left pending on a free sibling, ends the merge instead. When the
        sibling's owner merges the same two segments, one of them leaves the merge to the
        other, and hands its segment over when asked, instead of each handing its segment to
        the other: a hand-over it was asked for meanwhile refuses the merge
        (PendingHandOverError), and a merge pending on the lower segment refuses the higher
        one's (PendingMergeError). The merge request goes with the merge, or is dropped when
        it can never be made; a merge that fails otherwise leaves it pending, to retry.
        `asked` is the pending requests by segment id, as `obey` read them.
        """
        if self._obey_on_sibling(segment, asked, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms):
            return False
        try:
            merged = self._merge_or_ask(segment, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        except InvalidSegmentOperationError as exc:
            # The sibling was split since the merge was asked: nothing to merge with.
            logger.warning("merge dropped: processor=%s error=%s", self.p.name, exc)
            self._drop_merge(segment)
            return False
        if merged is not None:
            logger.info("merged: processor=%s into %s", self.p.name, merged)
        return merged is not None

    def _obey_on_sibling(
        self,
        segment: Segment,
        asked: Mapping[int, SegmentRequest],
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> bool:
        """Act on a split or release pending on the sibling, held by this owner or by nobody.

        The merge would delete the request unseen (the store refuses to while it is pending).
        Asked after the sibling was handed over, it is this owner's (the command said so); left
        on a free sibling (its owner released it before obeying it), it is its next owner's.
        This owner claims the sibling, splits it (when asked to) and releases it, and drops its
        merge (the request on the sibling, which stays until obeyed, ends it): True then. A
        request made on the sibling since `obey` read it refuses the split or release (see
        `_split_or_rest`): the sibling is released as it is, with that request left on it, and
        the merge stays pending for the next check, which reads both again (True too: nothing
        more is made on what this check read). A merge or hand-over pending there stays: the
        merge deletes it when made, and one that fails leaves it to the sibling's next owner.
        """
        if segment.is_root:
            return False  # nothing to merge with: `merge` says so
        p, sibling_id = self.p, segment.mergeable_segment_id()
        on_sibling = asked.get(sibling_id)
        if on_sibling is None or on_sibling.action not in _OBEYED_ON_SIBLING:
            return False  # the usual case: no second read of the store
        sibling = next(
            (e for e in p._tokens.entries(p.name) if segment.is_mergeable_with(e.segment)), None
        )
        if sibling is None or not sibling.is_claimable_by(
            self.owner, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        ):
            return False
        try:
            p._tokens.claim(
                p.name, sibling_id, self.owner, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
            )
        except UnableToClaimTokenError:
            return False  # taken meanwhile: its owner acts on the request
        obeyed = self._split_or_rest(
            sibling_id, on_sibling.action, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        )
        p._tokens.release(p.name, sibling_id, self.owner)  # after a split, its lower half
        if not obeyed:
            logger.info(
                "merge kept, its sibling released as it is, with a later request: "
                "processor=%s segment=%s sibling=%s",
                p.name,
                segment,
                sibling_id,
            )
            return True
        self._drop_merge(segment)
        logger.info(
            "merge dropped, its sibling %s on request: processor=%s segment=%s sibling=%s",
            "split and released" if on_sibling.action is SegmentAction.SPLIT else "released",
            p.name,
            segment,
            sibling_id,
        )
        return True

    def _merge_or_ask(
        self, segment: Segment, *, now_ms: int, claim_timeout_ms: int
    ) -> Segment | None:
        """The merged segment, or None when the sibling's owner was asked for it or it ended.

        UnableToClaimTokenError from `request_merge` (this owner lost the segment since)
        ends the claim, as it does anywhere in the worker's `_control`; the merge stays pending
        for the segment's next owner.
        """
        p = self.p
        try:
            return p._tokens.merge(
                p.name,
                segment.segment_id,
                self.owner,
                now_ms=now_ms,
                claim_timeout_ms=claim_timeout_ms,
            )
        except UnableToClaimTokenError:
            # The sibling is held, or a split or release is pending on either segment (made
            # since the merge was read): ask for the sibling, or end the merge (request_merge
            # keeps the request), out of this handler (a new error is no cause).
            pass
        try:
            if not p._tokens.request_merge(p.name, segment.segment_id, self.owner, now_ms=now_ms):
                logger.info(
                    "merge dropped for a request made meanwhile: processor=%s segment=%s",
                    p.name,
                    segment,
                )
        except (PendingHandOverError, PendingMergeError) as exc:
            logger.info("merge left to the sibling's owner: processor=%s %s", p.name, exc)
            self._drop_merge(segment)
        return None

    def _drop_merge(self, segment: Segment) -> None:
        """Drop the merge pending on the segment, which ends unmade (another request stays)."""
        p = self.p
        p._tokens.take_request(p.name, segment.segment_id, actions=_MERGE)
