"""The token store contract: a segment request ends with the change it asks for, in its
transaction, and an operator's change of free segments replaces the requests left there.

An owner reads its request and leaves it pending; the store deletes it when the change
commits (split, release with `as_requested`, merge, hand_over made or skipped), so a change
that fails leaves it for a retry. `change_unclaimed` is an operator's split, merge or release
of segments nobody holds: it reports exactly the requests it deleted, for the receipt.
"""

from __future__ import annotations

import pytest

from ordo.errors import (
    InvalidInputError,
    InvalidSegmentOperationError,
    PendingRequestError,
    UnableToClaimTokenError,
)
from ordo.processing.segment import Segment
from ordo.processing.segment_request import PendingRequest, SegmentAction, SegmentRequest
from ordo.storage.stores import Stores
from token_support import TIMEOUT
from token_support import hand_over_to as _hand_over_to
from token_support import holding_0_and_1 as _holding_0_and_1
from token_support import merging_0_while_b_holds_1 as _merging_0_while_b_holds_1
from token_support import owners as _owners
from token_support import pending as _pending
from token_support import segments as _segments

SPLIT = SegmentRequest(action=SegmentAction.SPLIT)
MERGE = SegmentRequest(action=SegmentAction.MERGE)
RELEASE = SegmentRequest(action=SegmentAction.RELEASE)


def _held_by_a(stores: Stores, *requests: tuple[int, SegmentRequest]) -> None:
    """Two segments, 0 held by "a", with `requests` pending (segment id, request)."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    for segment_id, request in requests:
        stores.tokens.request("p", segment_id, request, now_ms=0)


def _replace_what_the_owner_read(
    stores: Stores, read: SegmentRequest, other: SegmentRequest
) -> None:
    """Segment 0 held by "a" with `read` pending, which the owner reads at its check; then
    `other` asked, which replaces it (and says so)."""
    _held_by_a(stores, (0, read))
    assert _pending(stores) == [(0, read)]
    replaced = stores.tokens.request("p", 0, other, now_ms=1)
    assert replaced == PendingRequest(segment_id=0, request=read, requested_at_ms=0)


def test_a_split_obeys_the_split_pending_on_its_segment(stores: Stores) -> None:
    """The owner read the split and left it pending: it goes with the split, and a request on
    another segment stays."""
    _held_by_a(stores, (0, SPLIT), (1, RELEASE))
    assert stores.tokens.split("p", 0, "a") == (Segment(0, 3), Segment(2, 3))
    assert _pending(stores) == [(1, RELEASE)]


@pytest.mark.parametrize(
    "other", [RELEASE, MERGE, _hand_over_to("b")], ids=["release", "merge", "hand-over"]
)
def test_a_split_is_refused_while_a_request_made_since_the_owner_read_it_is_pending(
    stores: Stores, other: SegmentRequest
) -> None:
    """The owner read the split; a different request made before the split committed
    replaced it (the latest wins, and says so). It was asked of the whole segment: the split
    would leave it on the lower half, which keeps the id. The split is refused, and the
    request stays on the segment it was asked of, for the owner."""
    _replace_what_the_owner_read(stores, SPLIT, other)
    with pytest.raises(
        PendingRequestError,
        match=rf"segment 0 has a {other.describe()} request pending, asked of the segment as it "
        r"is: it is acted on before any split",
    ):
        stores.tokens.split("p", 0, "a")
    assert _segments(stores) == [(0, 1), (1, 1)]
    assert _pending(stores) == [(0, other)]


def test_a_merge_that_replaced_the_split_the_owner_read_merges_the_segment_asked_of(
    stores: Stores,
) -> None:
    """Not the lower half with the upper one the split made (which merged the split back)."""
    _held_by_a(stores, (0, SPLIT))
    stores.tokens.request("p", 0, MERGE, now_ms=1)
    with pytest.raises(PendingRequestError):
        stores.tokens.split("p", 0, "a")
    assert stores.tokens.merge("p", 0, "a", now_ms=2, claim_timeout_ms=TIMEOUT) == Segment(0, 0)
    assert _pending(stores) == []


def test_a_hand_over_that_replaced_the_split_the_owner_read_reaches_the_merge_it_is_for(
    stores: Stores,
) -> None:
    """ "b" merges segment 1 and asked for segment 0 after "a" read its split: "a" hands the
    segment over, and "b" merges the two (a split lower half had no merge waiting for it: the
    hand-over was skipped, and "b"'s merge found no sibling to merge with)."""
    _holding_0_and_1(stores)
    stores.tokens.request("p", 0, SPLIT, now_ms=0)
    stores.tokens.request("p", 1, MERGE, now_ms=0)
    stores.tokens.request("p", 0, _hand_over_to("b"), now_ms=1)
    with pytest.raises(PendingRequestError):
        stores.tokens.split("p", 0, "a")
    assert stores.tokens.hand_over("p", 0, "a", to="b", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.merge("p", 1, "b", now_ms=3, claim_timeout_ms=TIMEOUT) == Segment(0, 0)
    assert _pending(stores) == []


def test_a_split_obeys_a_split_asked_again_since_the_owner_read_it(stores: Stores) -> None:
    """The same request again replaces nothing: the split goes with the split."""
    _held_by_a(stores, (0, SPLIT))
    assert stores.tokens.request("p", 0, SPLIT, now_ms=1) is None
    assert stores.tokens.split("p", 0, "a") == (Segment(0, 3), Segment(2, 3))
    assert _pending(stores) == []


def test_a_split_by_an_owner_that_lost_the_claim_is_refused_as_such(stores: Stores) -> None:
    """Not owning the segment is what the owner is told, whatever is pending there."""
    _held_by_a(stores, (0, RELEASE))
    with pytest.raises(UnableToClaimTokenError, match="not claimed by 'b'"):
        stores.tokens.split("p", 0, "b")
    assert _pending(stores) == [(0, RELEASE)]


def test_a_split_that_fails_leaves_its_request_pending(stores: Stores) -> None:
    """The claim was lost before the split: the segment's next owner obeys it."""
    _held_by_a(stores, (0, SPLIT))
    with pytest.raises(UnableToClaimTokenError, match="not claimed by 'b'"):
        stores.tokens.split("p", 0, "b")
    assert _pending(stores) == [(0, SPLIT)]


def test_a_release_as_requested_obeys_the_release_pending_on_its_segment(stores: Stores) -> None:
    _held_by_a(stores, (0, RELEASE), (1, RELEASE))
    stores.tokens.release("p", 0, "a", as_requested=True)
    assert _owners(stores) == [(None, None), (None, None)]
    assert _pending(stores) == [(1, RELEASE)]


def test_a_release_not_as_requested_leaves_the_release_pending(stores: Stores) -> None:
    """An owner that stops gives up its claims: a release asked of it stays for the next owner,
    which obeys it (the operator was told that the owner was asked)."""
    _held_by_a(stores, (0, RELEASE))
    stores.tokens.release("p", 0, "a")
    assert _owners(stores) == [(None, None), (None, None)]
    assert _pending(stores) == [(0, RELEASE)]


@pytest.mark.parametrize(
    "other", [SPLIT, MERGE, _hand_over_to("b")], ids=["split", "merge", "hand-over"]
)
def test_a_release_as_requested_is_refused_while_a_request_made_since_the_owner_read_it_is_pending(
    stores: Stores, other: SegmentRequest
) -> None:
    """The owner read the release; a different request made before the release committed
    replaced it (the latest wins, and its receipt says so). Released, the segment went to
    whoever claims it next with the new request left on it: the release the receipt said was
    replaced was carried out. The release is refused, the owner keeps the segment, and the
    request stays for it."""
    _replace_what_the_owner_read(stores, RELEASE, other)
    with pytest.raises(
        PendingRequestError,
        match=rf"segment 0 has a {other.describe()} request pending, asked of the segment as it "
        r"is: it is acted on before any release",
    ):
        stores.tokens.release("p", 0, "a", as_requested=True)
    assert _owners(stores) == [("a", 0), (None, None)]
    assert _pending(stores) == [(0, other)]


def test_a_split_that_replaced_the_release_the_owner_read_is_made_by_the_owner(
    stores: Stores,
) -> None:
    """The refused release leaves the owner holding the segment: it splits it, as asked."""
    _held_by_a(stores, (0, RELEASE))
    stores.tokens.request("p", 0, SPLIT, now_ms=1)
    with pytest.raises(PendingRequestError):
        stores.tokens.release("p", 0, "a", as_requested=True)
    assert stores.tokens.split("p", 0, "a") == (Segment(0, 3), Segment(2, 3))
    assert _owners(stores) == [("a", 0), (None, None), (None, None)]
    assert _pending(stores) == []


def test_a_release_as_requested_obeys_a_release_asked_again_since_the_owner_read_it(
    stores: Stores,
) -> None:
    """The same request again replaces nothing: the release goes with the release."""
    _held_by_a(stores, (0, RELEASE))
    assert stores.tokens.request("p", 0, RELEASE, now_ms=1) is None
    stores.tokens.release("p", 0, "a", as_requested=True)
    assert _owners(stores) == [(None, None), (None, None)]
    assert _pending(stores) == []


def test_a_release_not_as_requested_gives_the_claim_up_whatever_is_pending(
    stores: Stores,
) -> None:
    """An owner that stops (or lets go of a sibling it claimed) releases what it holds: the
    request stays for the segment's next owner."""
    _held_by_a(stores, (0, SPLIT))
    stores.tokens.release("p", 0, "a")
    assert _owners(stores) == [(None, None), (None, None)]
    assert _pending(stores) == [(0, SPLIT)]


def test_a_release_as_requested_by_an_owner_that_lost_the_claim_leaves_the_release(
    stores: Stores,
) -> None:
    """Nothing is released, so nothing is obeyed: the segment's owner obeys it."""
    _held_by_a(stores, (0, RELEASE))
    stores.tokens.release("p", 0, "b", as_requested=True)
    assert _owners(stores) == [("a", 0), (None, None)]
    assert _pending(stores) == [(0, RELEASE)]


def test_a_hand_over_made_obeys_the_hand_over_pending_on_its_segment(stores: Stores) -> None:
    """ "a" merges segment 0 while "b" holds 1: neither owner has taken its request (read it,
    left it pending). The hand-over goes with the move."""
    _merging_0_while_b_holds_1(stores)
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]
    assert stores.tokens.hand_over("p", 1, "b", to="a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert _owners(stores) == [("a", 0), ("a", 1)]
    assert _pending(stores) == [(0, MERGE)]


def test_a_hand_over_skipped_obeys_the_hand_over_pending_on_its_segment(stores: Stores) -> None:
    """ "a"'s claim lapsed: no merge waits for the segment, which "b" keeps. The hand-over to
    "a" goes all the same: left pending, it sent the segment to "a" at "b"'s next check."""
    _merging_0_while_b_holds_1(stores)
    later = TIMEOUT + 1
    stores.tokens.claim("p", 1, "b", now_ms=later, claim_timeout_ms=TIMEOUT)
    assert not stores.tokens.hand_over("p", 1, "b", to="a", now_ms=later, claim_timeout_ms=TIMEOUT)
    assert _owners(stores) == [("a", 0), ("b", later)]
    assert _pending(stores) == [(0, MERGE)]


@pytest.mark.parametrize(
    "other", [RELEASE, SPLIT, _hand_over_to("c")], ids=["release", "split", "hand-over to c"]
)
def test_a_hand_over_skipped_leaves_another_request_pending(
    stores: Stores, other: SegmentRequest
) -> None:
    """Made since the owner read the hand-over (an operator's, or another merging owner's
    hand-over): the hand-over is skipped and the later request stays, for the owner."""
    _merging_0_while_b_holds_1(stores)
    stores.tokens.request("p", 1, other, now_ms=1, replace_hand_over=True)
    assert not stores.tokens.hand_over("p", 1, "b", to="a", now_ms=2, claim_timeout_ms=TIMEOUT)
    assert _owners(stores) == [("a", 0), ("b", 0)]
    assert _pending(stores) == [(0, MERGE), (1, other)]


@pytest.mark.parametrize(
    "on_sibling", [MERGE, _hand_over_to("a")], ids=["merge", "hand-over to the merging owner"]
)
def test_a_merge_obeys_the_requests_pending_on_both_halves(
    stores: Stores, on_sibling: SegmentRequest
) -> None:
    """The merge pending on the owner's segment and what it asked of the free sibling (or a
    merge asked of it too) go with the merge; a request on another segment stays."""
    stores.tokens.initialize("p", segment_count=4)  # 0/3, 1/3, 2/3, 3/3
    stores.tokens.claim("p", 1, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    for segment_id, request in ((1, MERGE), (3, on_sibling), (2, SPLIT)):
        stores.tokens.request("p", segment_id, request, now_ms=0)
    assert stores.tokens.merge("p", 1, "a", now_ms=1, claim_timeout_ms=TIMEOUT) == Segment(1, 1)
    assert _pending(stores) == [(2, SPLIT)]


def test_a_merge_that_fails_leaves_its_request_pending(stores: Stores) -> None:
    """The sibling is held: the merge stays pending, and the owner retries it."""
    _holding_0_and_1(stores)
    stores.tokens.request("p", 0, MERGE, now_ms=0)
    with pytest.raises(UnableToClaimTokenError, match="claimed by 'b'"):
        stores.tokens.merge("p", 0, "a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert _pending(stores) == [(0, MERGE)]


_EACH_CHANGE = pytest.mark.parametrize(
    "action",
    [SegmentAction.SPLIT, SegmentAction.MERGE, SegmentAction.RELEASE],
    ids=["split", "merge", "release"],
)


@pytest.mark.parametrize(
    ("action", "held"),
    [
        (SegmentAction.SPLIT, 0),
        (SegmentAction.RELEASE, 0),
        (SegmentAction.MERGE, 0),
        (SegmentAction.MERGE, 1),
    ],
    ids=["split", "release", "merge", "merge with a held sibling"],
)
def test_change_unclaimed_refuses_a_segment_an_owner_holds(
    stores: Stores, action: SegmentAction, held: int
) -> None:
    """Its owner is asked instead (control's `_ask`); a merge is refused for either half. The
    refusal changes nothing: not the other half's expired claim, not a request."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 1 - held, "gone", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.claim("p", held, "a", now_ms=TIMEOUT, claim_timeout_ms=TIMEOUT)
    stores.tokens.request("p", 0, RELEASE, now_ms=0)
    stores.tokens.request("p", 1, SPLIT, now_ms=0)
    before = stores.tokens.entries("p")
    with pytest.raises(UnableToClaimTokenError, match=r"claimed by 'a': ask its owner instead"):
        stores.tokens.change_unclaimed("p", 0, action, now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.entries("p") == before
    assert _pending(stores) == [(0, RELEASE), (1, SPLIT)]


@_EACH_CHANGE
def test_change_unclaimed_ends_expired_claims(stores: Stores, action: SegmentAction) -> None:
    """A claim whose owner stopped without releasing it: the segments end up unclaimed."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id in (0, 1):
        stores.tokens.claim("p", segment_id, "gone", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.change_unclaimed("p", 1, action, now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT)
    owners = _owners(stores)
    expected = {
        SegmentAction.SPLIT: [("gone", 0), (None, None), (None, None)],
        SegmentAction.MERGE: [(None, None)],
        SegmentAction.RELEASE: [("gone", 0), (None, None)],
    }[action]
    assert owners == expected


@pytest.mark.parametrize(
    ("action", "segments"),
    [
        (SegmentAction.SPLIT, (Segment(1, 3), Segment(3, 3))),
        (SegmentAction.RELEASE, (Segment(1, 1),)),
    ],
    ids=["split", "release"],
)
def test_change_unclaimed_returns_the_request_it_deleted(
    stores: Stores, action: SegmentAction, segments: tuple[Segment, ...]
) -> None:
    """Exactly what it deleted: the request on the segment, with its time; not one on another
    segment, which stays."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.request("p", 0, SPLIT, now_ms=3)
    stores.tokens.request("p", 1, RELEASE, now_ms=5)
    change = stores.tokens.change_unclaimed("p", 1, action, now_ms=7, claim_timeout_ms=TIMEOUT)
    assert change.segments == segments
    assert change.replaced == (PendingRequest(segment_id=1, request=RELEASE, requested_at_ms=5),)
    assert _pending(stores) == [(0, SPLIT)]
    again = stores.tokens.change_unclaimed("p", 1, action, now_ms=8, claim_timeout_ms=TIMEOUT)
    assert again.replaced == ()


def test_change_unclaimed_merge_returns_the_requests_it_deleted_on_both_halves(
    stores: Stores,
) -> None:
    stores.tokens.initialize("p", segment_count=4)  # 0/3, 1/3, 2/3, 3/3
    stores.tokens.request("p", 1, SPLIT, now_ms=3)
    stores.tokens.request("p", 2, SPLIT, now_ms=4)
    stores.tokens.request("p", 3, RELEASE, now_ms=5)
    change = stores.tokens.change_unclaimed(
        "p", 3, SegmentAction.MERGE, now_ms=7, claim_timeout_ms=TIMEOUT
    )
    assert change.segments == (Segment(1, 1),)
    assert change.replaced == (  # by segment id, though segment 3 is the one named
        PendingRequest(segment_id=1, request=SPLIT, requested_at_ms=3),
        PendingRequest(segment_id=3, request=RELEASE, requested_at_ms=5),
    )
    assert _pending(stores) == [(2, SPLIT)]


@pytest.mark.parametrize("action", [SegmentAction.SPLIT, SegmentAction.RELEASE])
def test_change_unclaimed_of_a_merge_left_withdraws_its_hand_over_and_returns_the_merge(
    stores: Stores, action: SegmentAction
) -> None:
    """The merge replaced ends, and the hand-over it asked of the sibling with it (as when a
    request replaces it); the receipt names the merge, which the operator replaced."""
    _merging_0_while_b_holds_1(stores)
    stores.tokens.release("p", 0, "a")
    change = stores.tokens.change_unclaimed("p", 0, action, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert change.replaced == (PendingRequest(segment_id=0, request=MERGE, requested_at_ms=0),)
    assert _pending(stores) == []


def test_change_unclaimed_refuses_a_hand_over_and_a_root_merge(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.request("p", 0, SPLIT, now_ms=0)
    with pytest.raises(InvalidInputError, match="split, merge or release"):
        stores.tokens.change_unclaimed(
            "p", 0, SegmentAction.HAND_OVER, now_ms=1, claim_timeout_ms=TIMEOUT
        )
    with pytest.raises(InvalidSegmentOperationError, match="no sibling to merge with"):
        stores.tokens.change_unclaimed(
            "p", 0, SegmentAction.MERGE, now_ms=1, claim_timeout_ms=TIMEOUT
        )
    assert _pending(stores) == [(0, SPLIT)]
