"""The token store contract: requests to a segment's owner, hand-overs and merge requests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ordo.errors import (
    InvalidSegmentOperationError,
    PendingHandOverError,
    PendingMergeError,
    UnableToClaimTokenError,
    UnknownProcessorError,
)
from ordo.hashing import HASH_BITS
from ordo.processing.control import ControlReceipt, merge_segment, release_segment, split_segment
from ordo.processing.segment_request import PendingRequest, SegmentAction, SegmentRequest
from ordo.storage.stores import Stores
from token_support import TIMEOUT
from token_support import hand_over_to as _hand_over_to
from token_support import holding_0_and_1 as _holding_0_and_1
from token_support import merging_0_while_b_holds_1 as _merging_0_while_b_holds_1
from token_support import owners as _owners
from token_support import pending as _pending
from token_support import segments as _segments


def test_requests_reach_the_owner_once(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=2)
    split = SegmentRequest(action=SegmentAction.SPLIT)
    hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner="b")
    stores.tokens.request("p", 1, split, now_ms=0)
    stores.tokens.request("p", 1, hand_over, now_ms=1)  # the latest wins
    stores.tokens.request("p", 0, split, now_ms=2)
    assert stores.tokens.pending_requests("p") == [
        PendingRequest(segment_id=0, request=split, requested_at_ms=2),
        PendingRequest(segment_id=1, request=hand_over, requested_at_ms=1),
    ]
    assert hand_over.describe() == "hand over to b"
    assert stores.tokens.take_request("p", 0) == split
    assert stores.tokens.take_request("p", 1) == hand_over
    assert stores.tokens.take_request("p", 1) is None
    assert stores.tokens.pending_requests("p") == []
    with pytest.raises(UnknownProcessorError):
        stores.tokens.request("p", 7, split, now_ms=0)


def test_a_split_request_for_a_segment_that_cannot_split_is_refused(stores: Stores) -> None:
    """A segment whose mask uses every hash bit: the request was stored, and its owner's split
    failed (InvalidSegmentOperationError), which stopped the processor; left pending, it did
    so again for the next owner. Refused when asked, nothing is stored."""
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    for _ in range(HASH_BITS):
        stores.tokens.split("p", 0, "a")
    with pytest.raises(InvalidSegmentOperationError, match="all 32 hash bits"):
        stores.tokens.request("p", 0, SegmentRequest(action=SegmentAction.SPLIT), now_ms=1)
    assert stores.tokens.pending_requests("p") == []


def test_a_request_returns_the_request_it_replaced(stores: Stores) -> None:
    """For the operator's receipt, from the transaction that replaced it: the receipt read the
    pending requests first, and named one the owner took meanwhile, or missed one stored."""
    stores.tokens.initialize("p", segment_count=2)
    split = SegmentRequest(action=SegmentAction.SPLIT)
    release = SegmentRequest(action=SegmentAction.RELEASE)
    assert stores.tokens.request("p", 1, split, now_ms=1) is None
    assert stores.tokens.request("p", 0, release, now_ms=1) is None  # another segment's
    assert stores.tokens.request("p", 1, split, now_ms=2) is None  # asked again: no replacement
    assert stores.tokens.request("p", 1, _hand_over_to("a"), now_ms=3) == PendingRequest(
        segment_id=1, request=split, requested_at_ms=2
    )
    assert stores.tokens.request(
        "p", 1, release, now_ms=4, replace_hand_over=True
    ) == PendingRequest(segment_id=1, request=_hand_over_to("a"), requested_at_ms=3)
    assert _pending(stores) == [(0, release), (1, release)]


def test_a_request_replaces_a_pending_hand_over_only_when_told_to(stores: Stores) -> None:
    """A merge whose sibling another owner holds waits for that owner to hand it over: a
    release (one request per segment, the latest wins) replaced the hand-over silently."""
    stores.tokens.initialize("p", segment_count=2)
    hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner="a")
    release = SegmentRequest(action=SegmentAction.RELEASE)
    stores.tokens.request("p", 1, hand_over, now_ms=0)
    stores.tokens.request("p", 1, hand_over, now_ms=1)  # asked again: nothing is replaced
    for request in (release, SegmentRequest(action=SegmentAction.HAND_OVER, target_owner="b")):
        with pytest.raises(
            PendingHandOverError,
            match=r"^processor 'p' segment 1 is waiting for its owner to hand it over to 'a' "
            rf"for a merge: a {request.describe()} request would replace that",
        ) as refused:
            stores.tokens.request("p", 1, request, now_ms=2)
        assert (refused.value.segment_id, refused.value.target_owner) == (1, "a")
    assert stores.tokens.pending_requests("p") == [
        PendingRequest(segment_id=1, request=hand_over, requested_at_ms=1)
    ]
    stores.tokens.request("p", 1, release, now_ms=3, replace_hand_over=True)
    assert stores.tokens.take_request("p", 1) == release


def test_an_operator_request_keeps_the_hand_over_a_merge_waits_for(stores: Stores) -> None:
    """As the owner of segment 0 leaves it when its sibling is held: asked to merge, it asks
    for the sibling and for the merge again (to retry). The operator's request is refused,
    naming the hand-over, unless it says to replace it; the receipt then says what it
    replaced."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, owner in ((0, "a"), (1, "b")):
        stores.tokens.claim("p", segment_id, owner, now_ms=0, claim_timeout_ms=TIMEOUT)
    hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner="a")
    stores.tokens.request("p", 1, hand_over, now_ms=0)
    stores.tokens.request("p", 0, SegmentRequest(action=SegmentAction.MERGE), now_ms=0)
    for operation in (release_segment, split_segment, merge_segment):
        with pytest.raises(PendingHandOverError, match="hand it over to 'a' for a merge"):
            operation(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.take_request("p", 1) == hand_over
    stores.tokens.request("p", 1, hand_over, now_ms=0)
    receipt = release_segment(
        stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT, replace_hand_over=True
    )
    assert receipt.message == (
        "asked b to release Segment[1/1] (replacing the pending hand over to a request)"
    )


MERGE = SegmentRequest(action=SegmentAction.MERGE)


_EACH_OPERATOR_REQUEST = pytest.mark.parametrize(
    ("operation", "replacing"),
    [
        (release_segment, SegmentRequest(action=SegmentAction.RELEASE)),
        (split_segment, SegmentRequest(action=SegmentAction.SPLIT)),
    ],
)
"""An operator's release or split, and the request it leaves pending."""


@_EACH_OPERATOR_REQUEST
def test_a_request_that_replaces_a_merge_withdraws_the_hand_over_the_merge_asked_for(
    stores: Stores, operation: Callable[..., ControlReceipt], replacing: SegmentRequest
) -> None:
    """The operator's request ends the merge, so the sibling's owner must not hand its segment
    over for it: it did, to an owner that was then not merging (with a split, the segment sat
    claimed by an owner busy with another one until the claim expired)."""
    _merging_0_while_b_holds_1(stores)
    merge_segment(stores.tokens, "p", 0, now_ms=1, claim_timeout_ms=TIMEOUT)  # the same merge
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]
    receipt = operation(stores.tokens, "p", 0, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert receipt.message.endswith("(replacing the pending merge request)")
    assert _pending(stores) == [(0, replacing)]


@_EACH_OPERATOR_REQUEST
def test_a_request_made_while_the_owner_merges_is_not_replaced_by_the_merge_asked_again(
    stores: Stores, operation: Callable[..., ControlReceipt], replacing: SegmentRequest
) -> None:
    """The owner takes its merge request, fails to merge (the sibling is held) and asks the
    merge again. An operator's request made between the take and the ask was replaced by the
    merge, though the operator was told that the owner was asked. It stays now, and ends the
    merge as if it had replaced the pending merge: the sibling's hand-over is withdrawn."""
    _merging_0_while_b_holds_1(stores)
    assert stores.tokens.take_request("p", 0) == MERGE
    receipt = operation(stores.tokens, "p", 0, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert receipt.message.startswith("asked a to ")
    assert "replacing" not in receipt.message  # nothing was pending
    assert stores.tokens.request_merge("p", 0, "a", now_ms=2) is False
    assert _pending(stores) == [(0, replacing)]


def test_request_merge_stores_the_merge_when_none_or_the_same_is_pending(stores: Stores) -> None:
    _merging_0_while_b_holds_1(stores)
    assert stores.tokens.request_merge("p", 0, "a", now_ms=1) is True
    assert stores.tokens.take_request("p", 0) == MERGE
    assert stores.tokens.request_merge("p", 0, "a", now_ms=2) is True
    assert stores.tokens.pending_requests("p") == [
        PendingRequest(segment_id=0, request=MERGE, requested_at_ms=2),
        PendingRequest(segment_id=1, request=_hand_over_to("a"), requested_at_ms=2),
    ]


def test_request_merge_replaces_a_hand_over_asked_by_an_earlier_owner(stores: Stores) -> None:
    """The segment's earlier owner merged and asked for segment 1; its merge is the new
    owner's now (it took the merge request), so the hand-over is to the new owner."""
    _holding_0_and_1(stores)
    stores.tokens.request("p", 1, _hand_over_to("gone"), now_ms=0)
    assert stores.tokens.request_merge("p", 0, "a", now_ms=1) is True
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]


def test_request_merge_asks_no_hand_over_of_a_sibling_the_owner_holds(stores: Stores) -> None:
    """The sibling's owner handed it over (asked by an earlier round of the merge) between the
    failed merge and the new ask: a hand-over asked then was of a segment the merging owner
    held, and stayed pending on it after the merge was given up."""
    _holding_0_and_1(stores)
    assert stores.tokens.hand_over("p", 1, "b", to="a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.request_merge("p", 0, "a", now_ms=2) is True
    assert _pending(stores) == [(0, MERGE)]


def test_a_hand_over_asked_again_while_it_is_made_ends_with_it(stores: Stores) -> None:
    """Segment 1's owner took the hand-over, and before it made it the merging owner failed
    its merge again and asked again (nothing was pending on 1). The hand-over asked then
    stayed pending on segment 1 once "a" held it: had "a" stopped before merging, whoever
    held segment 1 next could hand it to "a" again, gone, and it sat claimed for nothing."""
    _merging_0_while_b_holds_1(stores)
    assert stores.tokens.take_request("p", 1) == _hand_over_to("a")  # b's check
    assert stores.tokens.take_request("p", 0) == MERGE  # a's next check, before b hands over
    with pytest.raises(UnableToClaimTokenError, match="claimed by 'b'"):
        stores.tokens.merge("p", 0, "a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.request_merge("p", 0, "a", now_ms=1) is True
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]
    assert stores.tokens.hand_over("p", 1, "b", to="a", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert _pending(stores) == [(0, MERGE)]


def test_a_hand_over_to_an_owner_that_lost_the_sibling_is_skipped(stores: Stores) -> None:
    """Segment 0's claim lapsed while segment 1's owner was handing it to "a", and the new
    owner "c" took the merge and asked for segment 1. The segment went to "a", which merged
    nothing (it sat claimed until the claim timeout). Its owner keeps it now, and hands it to
    "c" when it takes the hand-over asked since."""
    _merging_0_while_b_holds_1(stores)
    assert stores.tokens.take_request("p", 1) == _hand_over_to("a")
    later = TIMEOUT + 1
    stores.tokens.claim("p", 1, "b", now_ms=later, claim_timeout_ms=TIMEOUT)  # renewed
    stores.tokens.claim("p", 0, "c", now_ms=later, claim_timeout_ms=TIMEOUT)  # a's lapsed
    assert stores.tokens.take_request("p", 0) == MERGE
    assert stores.tokens.request_merge("p", 0, "c", now_ms=later) is True
    assert not stores.tokens.hand_over("p", 1, "b", to="a", now_ms=later, claim_timeout_ms=TIMEOUT)
    assert _owners(stores) == [("c", later), ("b", later)]
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("c"))]


def _taken_by_b(stores: Stores) -> None:
    """ "a" merges segment 0 while "b" holds 1, and "b" has taken the hand-over (its check)."""
    _merging_0_while_b_holds_1(stores)
    assert stores.tokens.take_request("p", 1) == _hand_over_to("a")


def test_a_hand_over_the_merge_ended_for_is_skipped(stores: Stores) -> None:
    """An operator released segment 0 after "b" took the hand-over: the release withdrew no
    hand-over (none was pending), and "b" handed segment 1 to "a", which released segment 0
    and merged nothing. Whether "a" has acted on the release yet or not, "b" keeps it."""
    _taken_by_b(stores)
    release_segment(stores.tokens, "p", 0, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert not stores.tokens.hand_over("p", 1, "b", to="a", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.take_request("p", 0) == SegmentRequest(action=SegmentAction.RELEASE)
    stores.tokens.release("p", 0, "a")
    assert not stores.tokens.hand_over("p", 1, "b", to="a", now_ms=3, claim_timeout_ms=TIMEOUT)
    assert _owners(stores) == [(None, None), ("b", 0)]
    assert _pending(stores) == []


def test_a_hand_over_to_an_owner_whose_claim_lapsed_is_skipped(stores: Stores) -> None:
    """ "a" stopped (or crashed) without releasing segment 0: segment 1 went to it anyway, and
    sat claimed by nobody at work until the claim timeout."""
    _taken_by_b(stores)
    later = TIMEOUT + 1
    stores.tokens.claim("p", 1, "b", now_ms=later, claim_timeout_ms=TIMEOUT)
    assert not stores.tokens.hand_over("p", 1, "b", to="a", now_ms=later, claim_timeout_ms=TIMEOUT)
    assert _owners(stores) == [("a", 0), ("b", later)]


def test_a_hand_over_is_made_while_the_merging_owner_merges(stores: Stores) -> None:
    """ "a" has taken its merge request, so none is pending: the merge waits all the same."""
    _taken_by_b(stores)
    assert stores.tokens.take_request("p", 0) == MERGE
    assert stores.tokens.hand_over("p", 1, "b", to="a", now_ms=1, claim_timeout_ms=TIMEOUT)
    stores.tokens.merge("p", 0, "a", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert _segments(stores) == [(0, 0)]


def test_a_hand_over_to_the_owner_itself_changes_nothing(stores: Stores) -> None:
    """Its worker handed the segment to itself and then released it, for nothing."""
    _holding_0_and_1(stores)
    stores.tokens.claim("p", 0, "b", now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT)
    assert not stores.tokens.hand_over(
        "p", 1, "b", to="b", now_ms=TIMEOUT + 2, claim_timeout_ms=TIMEOUT
    )
    assert _owners(stores) == [("b", TIMEOUT + 1), ("b", 0)]


def test_a_root_segment_is_handed_over_for_no_merge(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    assert not stores.tokens.hand_over("p", 0, "a", to="b", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert _owners(stores) == [("a", 0)]


@_EACH_OPERATOR_REQUEST
def test_an_operator_request_made_while_the_owner_hands_over_is_kept(
    stores: Stores, operation: Callable[..., ControlReceipt], replacing: SegmentRequest
) -> None:
    """Made after "b" took the hand-over, nothing refused it: "b" handed segment 1 over, and
    the request stayed for "a", whose merge deleted it unseen (the operator had been told
    that "b" was asked). It is the later request now: "b" keeps the segment and takes it,
    and "a"'s merge, retried meanwhile, asks for segment 1 again only after that."""
    _taken_by_b(stores)
    receipt = operation(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert receipt.message.startswith("asked b to ")
    assert not stores.tokens.hand_over("p", 1, "b", to="a", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.take_request("p", 0) == MERGE  # a's next check: the merge retries
    assert stores.tokens.request_merge("p", 0, "a", now_ms=3) is True
    assert _pending(stores) == [(0, MERGE), (1, replacing)]
    assert stores.tokens.take_request("p", 1) == replacing


@_EACH_OPERATOR_REQUEST
def test_a_merge_leaves_a_split_or_release_asked_of_the_handed_over_sibling_to_its_owner(
    stores: Stores, operation: Callable[..., ControlReceipt], replacing: SegmentRequest
) -> None:
    """Made after "b" handed segment 1 to "a", before "a"'s next check merged the two: the
    request was asked of "a", and the merge deleted it unseen. The merge is refused while it
    is pending now: "a" takes it and acts on it first."""
    _taken_by_b(stores)
    assert stores.tokens.hand_over("p", 1, "b", to="a", now_ms=1, claim_timeout_ms=TIMEOUT)
    receipt = operation(stores.tokens, "p", 1, now_ms=2, claim_timeout_ms=TIMEOUT)
    assert receipt.message.startswith("asked a to ")
    assert stores.tokens.take_request("p", 0) == MERGE
    with pytest.raises(
        UnableToClaimTokenError, match=rf"Segment\[1/1\] has a {replacing.action} request pending"
    ):
        stores.tokens.merge("p", 0, "a", now_ms=3, claim_timeout_ms=TIMEOUT)
    assert _segments(stores) == [(0, 1), (1, 1)]
    assert _pending(stores) == [(1, replacing)]


@_EACH_OPERATOR_REQUEST
def test_a_merge_leaves_a_split_or_release_pending_on_a_free_sibling_to_be_done(
    stores: Stores, operation: Callable[..., ControlReceipt], replacing: SegmentRequest
) -> None:
    """Asked of "b", which released segment 1 (it stopped) before it took the request: "a"
    merged segment 0 with the free segment 1 and the request went with it, unseen. The merge
    is refused while it is pending, as over a sibling "a" holds: whoever claims segment 1
    acts on it first. (An operator's merge of the two, once both are free, replaces it: the
    latest wins.)"""
    _holding_0_and_1(stores)
    assert operation(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT).message.startswith(
        "asked b to "
    )
    stores.tokens.release("p", 1, "b")
    with pytest.raises(
        UnableToClaimTokenError, match=rf"Segment\[1/1\] has a {replacing.action} request pending"
    ):
        stores.tokens.merge("p", 0, "a", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert [(e.segment.mask, e.owner) for e in stores.tokens.entries("p")] == [(1, "a"), (1, None)]
    assert _pending(stores) == [(1, replacing)]


@pytest.mark.parametrize("segment_id", [0, 1], ids=["lower", "higher"])
@_EACH_OPERATOR_REQUEST
def test_a_split_or_release_of_the_merging_segment_made_since_its_merge_was_taken_ends_it(
    stores: Stores,
    operation: Callable[..., ControlReceipt],
    replacing: SegmentRequest,
    segment_id: int,
) -> None:
    """Asked of "a" after it took the merge of its segment, before it merged it with the free
    sibling: the merge went on, and deleted the request with the merged-away higher segment,
    or left it on the lower one, the merged segment's id, whose next check split or released
    the merged segment, which the operator never named. The merge is refused while it is
    pending now, as over the sibling, and asked again it ends: "a" acts on the request."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", segment_id, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    merge_segment(stores.tokens, "p", segment_id, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.take_request("p", segment_id) == MERGE
    receipt = operation(stores.tokens, "p", segment_id, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert receipt.message.startswith("asked a to ")
    with pytest.raises(
        UnableToClaimTokenError,
        match=rf"Segment\[{segment_id}/1\] has a {replacing.action} request pending",
    ):
        stores.tokens.merge("p", segment_id, "a", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.request_merge("p", segment_id, "a", now_ms=2) is False
    assert _segments(stores) == [(0, 1), (1, 1)]
    assert _pending(stores) == [(segment_id, replacing)]


_EACH_REQUEST_LEFT = pytest.mark.parametrize(
    "left",
    [
        SegmentRequest(action=SegmentAction.SPLIT),
        SegmentRequest(action=SegmentAction.RELEASE),
        MERGE,
        SegmentRequest(action=SegmentAction.HAND_OVER, target_owner="a"),
    ],
    ids=["split", "release", "merge", "hand-over"],
)
"""A request left pending on a segment nobody holds (its owner stopped before taking it)."""


@_EACH_REQUEST_LEFT
def test_an_operator_s_split_of_a_free_segment_replaces_the_request_left_on_it(
    stores: Stores, left: SegmentRequest
) -> None:
    """The split was made at once and the request stayed: the segment's next owner carried it
    out on the half it then named (split it again, released it, merged the halves back)."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.request("p", 1, left, now_ms=0)
    receipt = split_segment(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert receipt.message == (
        "split Segment[1/1] into Segment[1/3] and Segment[3/3] "
        f"(replacing the pending {left.describe()} request)"
    )
    assert _pending(stores) == []
    assert _owners(stores) == [(None, None)] * 3


@_EACH_REQUEST_LEFT
def test_an_operator_s_release_of_a_free_segment_withdraws_the_request_left_on_it(
    stores: Stores, left: SegmentRequest
) -> None:
    """Nothing to release, and the request stayed for the segment's next owner: the operator
    could not clear it but by running the processor."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.request("p", 1, left, now_ms=0)
    receipt = release_segment(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert receipt.message == (
        f"segment Segment[1/1] is not claimed (withdrew the pending {left.describe()} request)"
    )
    assert _pending(stores) == []
    assert _owners(stores) == [(None, None)] * 2
    receipt = release_segment(stores.tokens, "p", 1, now_ms=2, claim_timeout_ms=TIMEOUT)
    assert receipt.message == "segment Segment[1/1] is not claimed"


def test_an_operator_s_merge_of_two_free_segments_replaces_the_requests_left_on_them(
    stores: Stores,
) -> None:
    """A split or release left on either was refused (the merge would drop it), and nothing
    but running the processor cleared it: the operator's merge is the later request now."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.request("p", 0, SegmentRequest(action=SegmentAction.SPLIT), now_ms=0)
    stores.tokens.request("p", 1, SegmentRequest(action=SegmentAction.RELEASE), now_ms=0)
    receipt = merge_segment(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert receipt.message == (
        "merged into Segment[0/0] (replacing the pending split request of Segment[0/1] and "
        "the pending release request of Segment[1/1])"
    )
    assert _pending(stores) == []
    assert _owners(stores) == [(None, None)]


@pytest.mark.parametrize("operation", [release_segment, split_segment], ids=["release", "split"])
def test_a_merge_left_on_a_free_segment_and_replaced_withdraws_its_hand_over(
    stores: Stores, operation: Callable[..., ControlReceipt]
) -> None:
    """ "a" asked for segment 1 for its merge and stopped: the hand-over stayed when the
    operator's change replaced the merge, and "b" could hand segment 1 to "a" once "a" held
    segment 0 again, not merging."""
    _merging_0_while_b_holds_1(stores)
    stores.tokens.release("p", 0, "a")
    receipt = operation(stores.tokens, "p", 0, now_ms=1, claim_timeout_ms=TIMEOUT)
    said = {release_segment: "withdrew", split_segment: "replacing"}[operation]
    assert receipt.message.endswith(f"({said} the pending merge request)")
    assert _pending(stores) == []


def test_a_request_is_taken_only_of_the_actions_asked_for(stores: Stores) -> None:
    """A merging owner takes a split or release from the sibling, to act on it; a merge or a
    hand-over taken there too was gone for good when the merge then failed."""
    stores.tokens.initialize("p", segment_count=2)
    split = SegmentRequest(action=SegmentAction.SPLIT)
    stores.tokens.request("p", 1, MERGE, now_ms=0)
    assert stores.tokens.take_request("p", 1, actions={SegmentAction.SPLIT}) is None
    assert stores.tokens.take_request("p", 1, actions=frozenset()) is None
    assert _pending(stores) == [(1, MERGE)]
    stores.tokens.request("p", 1, split, now_ms=1)
    assert stores.tokens.take_request("p", 1, actions={SegmentAction.SPLIT}) == split
    assert _pending(stores) == []


@_EACH_OPERATOR_REQUEST
def test_request_merge_keeps_a_split_or_release_that_replaced_the_hand_over(
    stores: Stores, operation: Callable[..., ControlReceipt], replacing: SegmentRequest
) -> None:
    """The operator replaced the hand-over on purpose, and the merge asked again replaced the
    operator's request at its next retry, unseen, unless the owner had taken it by then. It
    stays now: the merge waits for its owner to act on it, and asks for the segment after."""
    _merging_0_while_b_holds_1(stores)
    operation(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT, replace_hand_over=True)
    assert stores.tokens.take_request("p", 0) == MERGE
    assert stores.tokens.request_merge("p", 0, "a", now_ms=2) is True
    assert _pending(stores) == [(0, MERGE), (1, replacing)]


def test_request_merge_refuses_an_owner_that_lost_the_segment(stores: Stores) -> None:
    """The claim lapsed and another owner took the segment: the merge was asked of the new
    owner, and the sibling's owner handed its segment to the old one."""
    _holding_0_and_1(stores)
    stores.tokens.claim("p", 0, "c", now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT)
    with pytest.raises(UnableToClaimTokenError, match="not claimed by 'a'"):
        stores.tokens.request_merge("p", 0, "a", now_ms=TIMEOUT + 2)
    assert _pending(stores) == []


def test_request_merge_refuses_a_segment_whose_sibling_was_split(stores: Stores) -> None:
    """The sibling's owner split it after the merge failed: the hand-over was asked of one
    half (1/3), for a merge that can no longer be made."""
    _holding_0_and_1(stores)
    stores.tokens.split("p", 1, "b")  # 0/1, 1/3, 3/3
    with pytest.raises(InvalidSegmentOperationError, match="no sibling to merge with"):
        stores.tokens.request_merge("p", 0, "a", now_ms=1)
    assert _pending(stores) == []


def test_a_replaced_merge_keeps_a_hand_over_asked_by_another_merge(stores: Stores) -> None:
    """Segment 1 was split after it was asked for: 1/3's hand-over is for 3/3's merge."""
    _merging_0_while_b_holds_1(stores)
    assert stores.tokens.take_request("p", 1) == _hand_over_to("a")
    stores.tokens.split("p", 1, "b")  # 0/1, 1/3, 3/3
    stores.tokens.request("p", 1, _hand_over_to("c"), now_ms=0)
    release_segment(stores.tokens, "p", 0, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert _pending(stores) == [
        (0, SegmentRequest(action=SegmentAction.RELEASE)),
        (1, _hand_over_to("c")),
    ]


def test_when_both_owners_of_a_pair_merge_it_the_lower_segment_keeps_the_merge(
    stores: Stores,
) -> None:
    """Each owner asks its own merge again and the other for its segment. When both had
    asked their merge again first, each hand-over replaced the other's merge: both handed
    their segment to the other, and the pair swapped owners without merging. Now segment 0's
    owner keeps the merge; 1's owner's ask is refused and leaves its merge."""
    _holding_0_and_1(stores)
    stores.tokens.request("p", 0, MERGE, now_ms=0)
    stores.tokens.request("p", 1, MERGE, now_ms=0)
    assert stores.tokens.take_request("p", 1) == MERGE
    with pytest.raises(
        PendingMergeError,
        match=r"^processor 'p' segment 0 is being merged with its sibling by its owner",
    ) as refused:
        stores.tokens.request_merge("p", 1, "b", now_ms=1)
    assert (refused.value.segment_id, refused.value.target_owner) == (0, "b")
    assert _pending(stores) == [(0, MERGE)]
    stores.tokens.request("p", 1, MERGE, now_ms=1)  # asked again: 0's owner replaces it
    assert stores.tokens.take_request("p", 0) == MERGE
    assert stores.tokens.request_merge("p", 0, "a", now_ms=2) is True
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]


def test_an_owner_asked_for_its_segment_leaves_its_merge_to_the_sibling_s_owner(
    stores: Stores,
) -> None:
    _merging_0_while_b_holds_1(stores)
    with pytest.raises(PendingHandOverError, match="hand it over to 'a'"):
        stores.tokens.request_merge("p", 1, "b", now_ms=1)
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]


def test_a_merge_withdraws_the_hand_overs_asked_for_either_half(stores: Stores) -> None:
    """Segment 1's owner merges and asks for segment 0, whose owner stops (releases it)
    without handing it over; the merge then claims it. The hand-over stayed on segment 0, the
    merged segment's id, and its owner handed the merged segment over to itself (its claim
    ended for nothing)."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, owner in ((0, "b"), (1, "a")):
        stores.tokens.claim("p", segment_id, owner, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.request_merge("p", 1, "a", now_ms=0) is True
    stores.tokens.release("p", 0, "b")
    stores.tokens.merge("p", 1, "a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert _pending(stores) == []


def test_a_merge_drops_a_merge_pending_on_the_other_half(stores: Stores) -> None:
    """Both halves were asked to merge, and the higher one's owner merged them while the lower
    one was free: the merge asked of 1/3 stayed pending on the merged segment's id, and its
    next owner merged 1/1 with 0/1 too."""
    stores.tokens.initialize("p", segment_count=4)  # 0/3, 1/3, 2/3, 3/3
    stores.tokens.request("p", 1, MERGE, now_ms=0)
    stores.tokens.request("p", 3, MERGE, now_ms=0)
    stores.tokens.claim("p", 3, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.take_request("p", 3) == MERGE
    stores.tokens.merge("p", 3, "a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert _segments(stores) == [(0, 3), (1, 1), (2, 3)]
    assert _pending(stores) == []


def test_a_merge_drops_the_requests_of_the_merged_away_segment(stores: Stores) -> None:
    """Else a later split that makes the id again hands the new segment an old request (a
    merge, which the merge made; a split or release there refuses the merge)."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.request("p", 1, MERGE, now_ms=0)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.merge("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.split("p", 0, "a")
    assert stores.tokens.take_request("p", 1) is None


def test_a_merge_with_a_segment_that_is_no_sibling_is_refused_even_while_held(
    stores: Stores,
) -> None:
    """The refusal used to depend on the segment being free: held, a request was stored."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 1, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.split("p", 1, "a")  # 0/1, 1/3, 3/3
    stores.tokens.claim("p", 0, "b", now_ms=0, claim_timeout_ms=TIMEOUT)
    with pytest.raises(InvalidSegmentOperationError, match="not siblings"):
        merge_segment(stores.tokens, "p", 0, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.take_request("p", 0) is None
