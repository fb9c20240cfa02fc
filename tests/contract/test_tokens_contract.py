"""The token store contract, on both backends: segments, claims, split, merge, reset, batches."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import psycopg
import pytest

from operations_support import wait_for_a_lock_wait
from ordo.errors import (
    InvalidIdentifierError,
    InvalidInputError,
    InvalidSegmentOperationError,
    PendingHandOverError,
    PendingMergeError,
    UnableToClaimTokenError,
    UnknownProcessorError,
)
from ordo.processing.control import (
    ControlReceipt,
    merge_segment,
    release_segment,
    reset_processor,
    split_segment,
)
from ordo.processing.ports import DeadLetter, PendingRequest, SegmentAction, SegmentRequest
from ordo.processing.segment import Segment
from ordo.processing.token import PartAhead, TrackingToken
from ordo.storage.open import Stores, stores_at
from ordo.time import TimeUUID
from ordo.types import PersistenceId

TIMEOUT = 10_000
T1 = TimeUUID.parse("5f1a2c10-e5f0-11f1-8000-000000000001")
T2 = TimeUUID.parse("6f1a2c10-e5f0-11f1-8000-000000000001")


def _segments(stores: Stores, processor: str = "p") -> list[tuple[int, int]]:
    return [(e.segment.segment_id, e.segment.mask) for e in stores.tokens.entries(processor)]


def test_initialize_creates_the_initial_segments_once(stores: Stores) -> None:
    entries = stores.tokens.initialize("p", segment_count=4)
    assert [(e.segment.segment_id, e.segment.mask) for e in entries] == [
        (0, 3),
        (1, 3),
        (2, 3),
        (3, 3),
    ]
    assert all(e.token == TrackingToken() and e.owner is None for e in entries)
    stores.tokens.initialize("p", segment_count=2)
    assert len(stores.tokens.entries("p")) == 4
    assert stores.tokens.processors() == ["p"]


def test_an_unknown_processor_is_an_error(stores: Stores) -> None:
    with pytest.raises(UnknownProcessorError, match="nope"):
        stores.tokens.entries("nope")
    stores.tokens.initialize("p", segment_count=1)
    with pytest.raises(UnknownProcessorError):
        stores.tokens.claim("p", 5, "a", now_ms=0, claim_timeout_ms=TIMEOUT)


def test_a_claim_can_be_taken_when_unowned_owned_or_expired(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    claimed = stores.tokens.claim("p", 0, "a", now_ms=1_000, claim_timeout_ms=TIMEOUT)
    assert (claimed.owner, claimed.claimed_at_ms) == ("a", 1_000)
    stores.tokens.claim("p", 0, "a", now_ms=2_000, claim_timeout_ms=TIMEOUT)  # renew
    with pytest.raises(UnableToClaimTokenError, match="claimed by 'a'"):
        stores.tokens.claim("p", 0, "b", now_ms=11_000, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.entries("p")[0].owner == "a"  # unchanged by the refusal
    taken = stores.tokens.claim("p", 0, "b", now_ms=12_001, claim_timeout_ms=TIMEOUT)
    assert taken.owner == "b"
    stores.tokens.release("p", 0, "a")  # not the owner: nothing happens
    assert stores.tokens.entries("p")[0].owner == "b"
    stores.tokens.release("p", 0, "b")
    assert stores.tokens.entries("p")[0].owner is None


def test_a_batch_stores_the_token_positions_and_dead_letters_together(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        assert batch.positions([PersistenceId("x")]) == {}
        batch.record(PersistenceId("x"), 3)
        batch.dead_letter(
            DeadLetter(
                persistence_id=PersistenceId("y"),
                sequence_nr=7,
                position=2,
                offset_key=T1.to_bytes(),
                error="ValueError: bad",
            )
        )
        batch.store_token(TrackingToken(T1))
    assert stores.tokens.entries("p")[0].token == TrackingToken(T1)
    assert [d.error for d in stores.tokens.dead_letters("p")] == ["ValueError: bad"]
    with stores.tokens.batch("p", 0, "a") as batch:
        assert batch.positions([PersistenceId("x"), PersistenceId("z")]) == {"x": 3}


def test_a_batch_stores_positions_of_many_ids_and_never_moves_one_back(stores: Stores) -> None:
    pids = [PersistenceId(f"id-{n:04d}") for n in range(2_500)]  # several statements' worth
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        for n, pid in enumerate(reversed(pids)):
            batch.record(pid, n + 1)
    with stores.tokens.batch("p", 0, "a") as batch:
        batch.record(pids[0], 1)  # older than what is stored: ignored
        batch.record(pids[1], 10_000)

    stored = stores.tokens.positions("p")

    assert len(stored) == len(pids)
    assert stored[pids[0]] == len(pids)
    assert stored[pids[1]] == 10_000
    assert stored[pids[-1]] == 1


def test_handled_events_are_found_by_their_batches_offsets_and_forgotten_below_a_point(
    stores: Stores,
) -> None:
    t = [TimeUUID.parse(f"{n}f1a2c10-e5f0-11f1-8000-000000000001") for n in range(1, 7)]
    x, y = PersistenceId("x"), PersistenceId("y")
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    for events in ([(x, 1, t[0]), (y, 1, t[1])], [(x, 2, t[3]), (y, 2, t[2])], [(x, 3, t[4])]):
        with stores.tokens.batch("p", 0, "a") as batch:
            for pid, position, offset in events:
                batch.record_handled(pid, position, offset.to_bytes())
    with stores.tokens.batch("p", 0, "a"):
        pass  # a batch that handled nothing records nothing

    def handled(after: int, up_to: int) -> set[tuple[str, int]]:
        return set(stores.tokens.handled("p", after=t[after].to_bytes(), up_to=t[up_to].to_bytes()))

    assert handled(0, 5) == {(x, 1), (y, 1), (x, 2), (y, 2), (x, 3)}
    assert handled(1, 5) == {(x, 2), (y, 2), (x, 3)}  # batches reaching past t[1]
    assert handled(1, 2) == {(x, 2), (y, 2)}  # and starting up to t[2]: t[2] - t[3]
    assert handled(4, 5) == set()
    assert stores.tokens.handled("other", after=b"", up_to=t[5].to_bytes()) == set()
    stores.tokens.forget_handled("p", before=t[2].to_bytes())  # the first batch ends before
    assert handled(0, 5) == {(x, 2), (y, 2), (x, 3)}


def test_a_batch_of_a_lost_claim_is_rolled_back_whole(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.claim("p", 0, "b", now_ms=20_000, claim_timeout_ms=TIMEOUT)  # a's expired

    def process_as_a() -> None:
        with stores.tokens.batch("p", 0, "a") as batch:
            batch.record(PersistenceId("x"), 9)
            batch.record_handled(PersistenceId("x"), 9, T2.to_bytes())
            batch.store_token(TrackingToken(T2))

    with pytest.raises(UnableToClaimTokenError):
        process_as_a()
    assert stores.tokens.entries("p")[0].token == TrackingToken()
    assert stores.tokens.handled("p", after=b"", up_to=T2.to_bytes()) == set()
    with stores.tokens.batch("p", 0, "b") as batch:
        assert batch.positions([PersistenceId("x")]) == {}


def test_a_batch_read_with_another_mask_stores_no_token(stores: Stores) -> None:
    """A worker that read segment 0/0 may not move the token of the 0/1 a split left there."""
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.split("p", 0, "a")  # a keeps segment id 0, now 0/1

    def store_as(mask: int) -> None:
        with stores.tokens.batch("p", 0, "a", mask=mask) as batch:
            batch.record(PersistenceId("x"), 9)
            batch.store_token(TrackingToken(T2))

    with pytest.raises(UnableToClaimTokenError, match="with mask 0"):
        store_as(0)
    assert stores.tokens.entries("p")[0].token == TrackingToken()
    store_as(1)
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)


T3 = TimeUUID.parse("7f1a2c10-e5f0-11f1-8000-000000000001")


def _tokens(stores: Stores) -> list[TrackingToken]:
    return [e.token for e in stores.tokens.entries("p")]


def test_a_reader_without_claims_moves_the_unclaimed_tokens_forward_only(stores: Stores) -> None:
    """What a Spark projection stores after each batch; a claimed token is its owner's."""
    stores.tokens.initialize("p", segment_count=3)
    stores.tokens.claim("p", 2, "worker", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.advance_unclaimed("p", T2, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T2), TrackingToken(T2), TrackingToken()]
    # A replayed batch:
    stores.tokens.advance_unclaimed("p", T1, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T2), TrackingToken(T2), TrackingToken()]
    assert stores.tokens.entries("p")[2].owner == "worker"


def test_a_reader_without_claims_keeps_the_merged_parts_ahead_it_has_not_reached(
    stores: Stores,
) -> None:
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 1, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 1, "a") as batch:
        batch.store_token(TrackingToken(T2))
    stores.tokens.release("p", 1, "a")
    merge_segment(stores.tokens, "p", 0, now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.advance_unclaimed("p", T1, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T1, (PartAhead(Segment(1, 1), T2),))]
    stores.tokens.advance_unclaimed("p", T3, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T3)]


def test_a_reader_without_claims_refuses_what_is_no_offset(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    advance = partial(stores.tokens.advance_unclaimed, claim_timeout_ms=TIMEOUT)
    with pytest.raises(InvalidInputError, match="offset must be a TimeUUID, got str"):
        advance("p", str(T1), now_ms=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidIdentifierError):
        advance("", T1, now_ms=0)
    with pytest.raises(InvalidInputError, match="now_ms"):
        advance("p", T1, now_ms="0")  # type: ignore[arg-type]
    assert _tokens(stores) == [TrackingToken()]


def test_a_reader_without_claims_moves_a_segment_whose_claim_expired(stores: Stores) -> None:
    """An owner that crashed without releasing kept the token still for good: status and
    cleanup then judged a Spark projection of the same name by it. The expired claim ends, so
    that an owner that was only stalled cannot store its older token over the new one."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 0, "crashed", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.claim("p", 1, "alive", now_ms=TIMEOUT, claim_timeout_ms=TIMEOUT)
    stores.tokens.advance_unclaimed("p", T1, now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T1), TrackingToken()]
    assert [e.owner for e in stores.tokens.entries("p")] == [None, "alive"]
    with (
        pytest.raises(UnableToClaimTokenError, match="no longer claimed by 'crashed'"),
        stores.tokens.batch("p", 0, "crashed") as batch,
    ):
        batch.store_token(TrackingToken(T1))
    assert _tokens(stores) == [TrackingToken(T1), TrackingToken()]


def test_split_copies_the_token_and_merge_keeps_the_lower_one_and_the_half_ahead(
    stores: Stores,
) -> None:
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        batch.store_token(TrackingToken(T1))
    low, high = stores.tokens.split("p", 0, "a")
    assert (low, high) == (Segment(0, 1), Segment(1, 1))
    entries = stores.tokens.entries("p")
    assert [(e.segment, e.token, e.owner) for e in entries] == [
        (Segment(0, 1), TrackingToken(T1), "a"),
        (Segment(1, 1), TrackingToken(T1), None),
    ]
    stores.tokens.claim("p", 1, "b", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 1, "b") as batch:
        batch.store_token(TrackingToken(T2))
    with pytest.raises(UnableToClaimTokenError, match="claimed by 'b'"):
        stores.tokens.merge("p", 0, "a", now_ms=1, claim_timeout_ms=TIMEOUT)
    stores.tokens.release("p", 1, "b")
    merged = stores.tokens.merge("p", 0, "a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert merged == Segment(0, 0)
    (entry,) = stores.tokens.entries("p")
    ahead = (PartAhead(Segment(1, 1), T2),)
    assert (entry.segment, entry.token, entry.owner) == (
        Segment(0, 0),
        TrackingToken(T1, ahead),
        "a",
    )


def test_only_the_owner_splits_or_merges_and_refusals_change_nothing(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=4)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    before = stores.tokens.entries("p")
    with pytest.raises(UnableToClaimTokenError, match="only the owner"):
        stores.tokens.split("p", 1, "a")
    stores.tokens.claim("p", 2, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.split("p", 2, "a")  # 2/3 -> 2/7 and 6/7
    with pytest.raises(InvalidSegmentOperationError):
        stores.tokens.merge("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)  # 0/3's sibling split
    assert len(stores.tokens.entries("p")) == len(before) + 1
    single = stores.tokens.initialize("q", segment_count=1)[0]
    stores.tokens.claim("q", single.segment.segment_id, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with pytest.raises(InvalidSegmentOperationError, match="no sibling"):
        stores.tokens.merge("q", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)


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


def _hand_over_to(owner: str) -> SegmentRequest:
    return SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=owner)


def _pending(stores: Stores) -> list[tuple[int, SegmentRequest]]:
    return [(p.segment_id, p.request) for p in stores.tokens.pending_requests("p")]


def _merging_0_while_b_holds_1(stores: Stores) -> None:
    """Segment 0 held by "a", 1 by "b"; "a" merges 0 as its worker does while the sibling is
    held: it asks its own merge again (to retry at its next check) and "b" for segment 1."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, owner in ((0, "a"), (1, "b")):
        stores.tokens.claim("p", segment_id, owner, now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.request("p", 0, MERGE, now_ms=0)
    stores.tokens.request("p", 1, _hand_over_to("a"), now_ms=0, replace_hand_over=True)


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
    assert stores.tokens.request("p", 0, MERGE, now_ms=2, keep_pending=True) is False
    assert _pending(stores) == [(0, replacing)]


def test_keep_pending_stores_a_request_when_none_or_the_same_is_pending(stores: Stores) -> None:
    _merging_0_while_b_holds_1(stores)
    assert stores.tokens.request("p", 0, MERGE, now_ms=1, keep_pending=True) is True
    assert stores.tokens.take_request("p", 0) == MERGE
    assert stores.tokens.request("p", 0, MERGE, now_ms=2, keep_pending=True) is True
    assert stores.tokens.pending_requests("p")[0] == PendingRequest(
        segment_id=0, request=MERGE, requested_at_ms=2
    )
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]


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
    """Each owner asks its own merge again, then the other for its segment. When both had
    asked their merge again first, each hand-over replaced the other's merge: both handed
    their segment to the other, and the pair swapped owners without merging. Now segment 0's
    owner keeps the merge; 1's owner's hand-over is refused and 1's merge gives way."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, owner in ((0, "a"), (1, "b")):
        stores.tokens.claim("p", segment_id, owner, now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.request("p", 0, MERGE, now_ms=0)
    stores.tokens.request("p", 1, MERGE, now_ms=0)
    with pytest.raises(
        PendingMergeError,
        match=r"^processor 'p' segment 0 is being merged with its sibling by its owner",
    ) as refused:
        stores.tokens.request("p", 0, _hand_over_to("b"), now_ms=1, replace_hand_over=True)
    assert (refused.value.segment_id, refused.value.target_owner) == (0, "b")
    stores.tokens.request("p", 1, _hand_over_to("a"), now_ms=1, replace_hand_over=True)
    assert _pending(stores) == [(0, MERGE), (1, _hand_over_to("a"))]


def test_a_merge_withdraws_the_hand_overs_asked_for_either_half(stores: Stores) -> None:
    """Segment 1's owner merges and asks for segment 0, whose owner stops (releases it)
    without handing it over; the merge then claims it. The hand-over stayed on segment 0, the
    merged segment's id, and its owner handed the merged segment over to itself (its claim
    ended for nothing)."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, owner in ((0, "b"), (1, "a")):
        stores.tokens.claim("p", segment_id, owner, now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.request("p", 1, MERGE, now_ms=0)
    stores.tokens.request("p", 0, _hand_over_to("a"), now_ms=0, replace_hand_over=True)
    stores.tokens.release("p", 0, "b")
    stores.tokens.merge("p", 1, "a", now_ms=1, claim_timeout_ms=TIMEOUT)
    assert _pending(stores) == []


def test_a_merge_drops_the_requests_of_the_merged_away_segment(stores: Stores) -> None:
    """Else a later split that makes the id again hands the new segment an old request."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.request("p", 1, SegmentRequest(action=SegmentAction.SPLIT), now_ms=0)
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


def test_a_claim_is_handed_over_by_its_owner_only(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 1, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with pytest.raises(UnableToClaimTokenError):
        stores.tokens.hand_over("p", 1, "x", to="b", now_ms=5)
    stores.tokens.hand_over("p", 1, "a", to="b", now_ms=5)
    entry = stores.tokens.entries("p")[1]
    assert (entry.owner, entry.claimed_at_ms) == ("b", 5)


def test_reset_marks_replays_and_is_refused_while_running(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        batch.record(PersistenceId("x"), 5)
        batch.store_token(TrackingToken(T2))
    with pytest.raises(UnableToClaimTokenError, match="running"):
        stores.tokens.reset("p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)
    stores.tokens.release("p", 0, "a")
    stores.tokens.reset("p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT)
    entries = stores.tokens.entries("p")
    assert all(e.token == TrackingToken() and e.replay_until == TrackingToken(T2) for e in entries)
    stores.tokens.claim("p", 0, "a", now_ms=2, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        assert batch.positions([PersistenceId("x")]) == {}


def test_reset_replays_up_to_the_furthest_offset_a_merged_part_ahead_reached(
    stores: Stores,
) -> None:
    """The merged token resumes at T1, but the half ahead handled up to T2: replays too."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, offset in ((0, T1), (1, T2)):
        stores.tokens.claim("p", segment_id, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
        with stores.tokens.batch("p", segment_id, "a") as batch:
            batch.store_token(TrackingToken(offset))
    stores.tokens.release("p", 1, "a")
    stores.tokens.merge("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.release("p", 0, "a")
    stores.tokens.reset("p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT)
    (entry,) = stores.tokens.entries("p")
    assert (entry.token, entry.replay_until) == (TrackingToken(), TrackingToken(T2))


def _applied(stores: Stores, positions: dict[str, int], processor: str = "p") -> None:
    """Positions as a Spark projection's task stores them: no claim, no token."""
    with stores.tokens.batch(processor, 0, "spark") as batch:
        for persistence_id, position in positions.items():
            batch.record(PersistenceId(persistence_id), position)


def _processed_to(stores: Stores, offset: TimeUUID) -> None:
    """Processor p, one segment, unclaimed, with its token at `offset`."""
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.advance_unclaimed("p", offset, now_ms=0, claim_timeout_ms=TIMEOUT)


def test_a_reset_where_the_processor_has_positions_but_no_tokens_clears_them(
    stores: Stores,
) -> None:
    """A Spark projection's own sink: the reset said it had no tokens and left them."""
    _applied(stores, {"x": 3})
    stores.tokens.check_reset("p", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.reset("p", TrackingToken(), now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.positions("p") == {}
    assert stores.tokens.processors() == []  # no tokens made up


def test_processors_without_tokens_are_those_a_reset_clears_only_positions_of(
    stores: Stores,
) -> None:
    _applied(stores, {"x": 3, "y": 1}, processor="sink-only")
    with stores.tokens.batch("handled-only", 0, "spark") as batch:
        batch.record_handled(PersistenceId("x"), 1, T1.to_bytes())
    _processed_to(stores, T2)
    _applied(stores, {"x": 3})  # p has tokens: listed by processors()

    assert stores.tokens.processors_without_tokens() == {"handled-only": 0, "sink-only": 2}
    assert stores.tokens.processors() == ["p"]


def test_a_reset_where_the_processor_has_neither_tokens_nor_positions_is_refused(
    stores: Stores,
) -> None:
    _applied(stores, {"x": 3}, processor="other")
    for call in (stores.tokens.check_reset, partial(stores.tokens.reset, token=TrackingToken())):
        with pytest.raises(UnknownProcessorError, match="'p' has no tokens or positions"):
            call("p", now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.positions("other") == {"x": 3}


def test_a_reset_with_a_sink_clears_the_positions_there_too(
    stores: Stores, sink_stores: Stores
) -> None:
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3})
    receipt = reset_processor(
        stores.tokens,
        "p",
        TrackingToken(),
        now_ms=0,
        claim_timeout_ms=TIMEOUT,
        sink=sink_stores.tokens,
    )
    assert "cleared its positions in the sink" in receipt.message
    (entry,) = stores.tokens.entries("p")
    assert (entry.token, entry.replay_until) == (TrackingToken(), TrackingToken(T2))
    assert sink_stores.tokens.positions("p") == {}


def test_a_reset_refused_by_the_journal_or_the_sink_changes_neither(
    stores: Stores, sink_stores: Stores
) -> None:
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3}, processor="other")

    def reset() -> None:
        reset_processor(
            stores.tokens,
            "p",
            TrackingToken(),
            now_ms=1,
            claim_timeout_ms=TIMEOUT,
            sink=sink_stores.tokens,
        )

    with pytest.raises(UnknownProcessorError, match=r"^the sink: processor 'p' has no tokens"):
        reset()
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)
    _applied(sink_stores, {"x": 3})
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with pytest.raises(UnableToClaimTokenError, match="running"):
        reset()
    assert sink_stores.tokens.positions("p") == {"x": 3}
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)


def test_a_reset_is_refused_while_a_projection_renews_its_lease(
    stores: Stores, sink_stores: Stores
) -> None:
    """A Spark projection holds no claim: a reset cleared its positions while it ran."""
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3})
    for tokens in (stores.tokens, sink_stores.tokens):
        tokens.renew_projection_lease("p", "driver-1", now_ms=1_000)

    def reset(now_ms: int) -> None:
        reset_processor(
            stores.tokens,
            "p",
            TrackingToken(),
            now_ms=now_ms,
            claim_timeout_ms=TIMEOUT,
            sink=sink_stores.tokens,
        )

    expected = (
        r"^processor 'p' is running \(a Spark projection: its driver 'driver-1' renewed its "
        r"lease 9000 ms ago\): stop its streaming query before resetting$"
    )
    with pytest.raises(UnableToClaimTokenError, match=expected):
        reset(1_000 + TIMEOUT - 1_000)
    sink_stores.tokens.release_projection_lease("p", "driver-1")  # only the sink's is left
    stores.tokens.release_projection_lease("p", "other-driver")  # not its lease: it stays
    with pytest.raises(UnableToClaimTokenError, match="renewed its lease 0 ms ago"):
        reset(1_000)
    assert sink_stores.tokens.positions("p") == {"x": 3}
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)
    stores.tokens.release_projection_lease("p", "driver-1")
    sink_stores.tokens.renew_projection_lease("p", "driver-2", now_ms=1_000)
    with pytest.raises(UnableToClaimTokenError, match="'driver-2'"):
        reset(1_000)
    assert sink_stores.tokens.positions("p") == {"x": 3}

    reset(1_001 + TIMEOUT)  # driver-2 crashed: its lease expired as a claim does

    assert sink_stores.tokens.positions("p") == {}
    assert stores.tokens.entries("p")[0].token == TrackingToken()
    _applied(sink_stores, {"x": 1})
    reset(1_000)  # the reset took the expired lease away: no clock can make it fresh again
    assert sink_stores.tokens.positions("p") == {}


@pytest.mark.parametrize("name", ["", "a\x00b", "p" * 256, 5])
def test_a_processor_name_must_be_an_identifier(stores: Stores, name: object) -> None:
    with pytest.raises(InvalidIdentifierError, match="processor name"):
        stores.tokens.initialize(name, segment_count=1)  # type: ignore[arg-type]
    assert stores.tokens.processors() == []


@pytest.mark.parametrize("name", ["", "a\x00b", "p\ud800", 5])
def test_the_reads_and_operator_actions_check_the_processor_name(
    stores: Stores, name: object
) -> None:
    """Alike on both backends: a NUL was UnknownProcessorError or a StorageError."""
    stores.tokens.initialize("p", segment_count=1)
    bad: str = name  # type: ignore[assignment]
    for call in (
        lambda: stores.tokens.entries(bad),
        lambda: stores.tokens.pending_requests(bad),
        lambda: stores.tokens.dead_letters(bad),
        lambda: stores.tokens.positions(bad),
        lambda: stores.tokens.reset(bad, TrackingToken(), now_ms=0, claim_timeout_ms=TIMEOUT),
        lambda: split_segment(stores.tokens, bad, 0, now_ms=0, claim_timeout_ms=TIMEOUT),
    ):
        with pytest.raises(InvalidIdentifierError, match="processor name"):
            call()
    assert _segments(stores) == [(0, 0)]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"segment_id": "0"}, "segment_id"),
        ({"segment_id": True}, "segment_id"),
        ({"now_ms": None}, "now_ms"),
        ({"now_ms": 1.5}, "now_ms"),
        ({"now_ms": 2**64}, "now_ms"),
        ({"claim_timeout_ms": -1}, "claim_timeout_ms"),
        ({"claim_timeout_ms": 2**63}, "claim_timeout_ms"),
    ],
)
@pytest.mark.parametrize("action", [split_segment, merge_segment, release_segment])
def test_operator_actions_refuse_bad_numbers_and_change_nothing(
    stores: Stores,
    action: Callable[..., ControlReceipt],
    arguments: dict[str, object],
    named: str,
) -> None:
    """None was a TypeError mid-claim; 2**64 SQLite's OverflowError, PostgreSQL's StorageError."""
    stores.tokens.initialize("p", segment_count=2)
    call = {"segment_id": 1, "now_ms": 0, "claim_timeout_ms": TIMEOUT, **arguments}
    segment_id = call.pop("segment_id")

    with pytest.raises(InvalidInputError, match=named):
        action(stores.tokens, "p", segment_id, **call)
    assert _segments(stores) == [(0, 1), (1, 1)]
    assert stores.tokens.pending_requests("p") == []


@pytest.mark.parametrize("token", [None, "5f1a2c10-e5f0-11f1-8000-000000000001", T1])
def test_reset_refuses_what_is_not_a_tracking_token(stores: Stores, token: object) -> None:
    stores.tokens.initialize("p", segment_count=1)
    with pytest.raises(InvalidInputError, match="TrackingToken"):
        reset_processor(stores.tokens, "p", token, now_ms=0, claim_timeout_ms=TIMEOUT)  # type: ignore[arg-type]
    assert stores.tokens.entries("p")[0].token == TrackingToken()


@pytest.mark.parametrize(
    ("arguments", "error", "named"),
    [
        ({"segment_id": True}, InvalidInputError, "segment_id"),
        ({"segment_id": "1"}, InvalidInputError, "segment_id"),
        ({"segment_id": 1.0}, InvalidInputError, "segment_id"),
        ({"segment_id": 2**64}, InvalidInputError, "segment_id"),
        ({"owner": None}, InvalidIdentifierError, "owner"),
        ({"owner": ""}, InvalidIdentifierError, "owner"),
        ({"owner": 5}, InvalidIdentifierError, "owner"),
        ({"owner": "a\x00b"}, InvalidIdentifierError, "owner"),
        ({"processor": 5}, InvalidIdentifierError, "processor name"),
        ({"now_ms": float("nan")}, InvalidInputError, "now_ms"),
        ({"now_ms": 1.5}, InvalidInputError, "now_ms"),
        ({"now_ms": None}, InvalidInputError, "now_ms"),
        ({"claim_timeout_ms": "10"}, InvalidInputError, "claim_timeout_ms"),
    ],
)
def test_a_claim_refuses_bad_arguments_and_changes_nothing(
    stores: Stores, arguments: dict[str, object], error: type[Exception], named: str
) -> None:
    """Alike on both backends, before any statement.

    True claimed segment 1 and "1" or 1.0 claimed it too on SQLite, NaN stored a claim with no
    time; owners and processors of the wrong type or with a NUL were PostgreSQL StorageErrors.
    """
    stores.tokens.initialize("p", segment_count=2)
    call = {"processor": "p", "segment_id": 1, "owner": "a", "now_ms": 0}
    call.update({"claim_timeout_ms": TIMEOUT, **arguments})

    with pytest.raises(error, match=named):
        stores.tokens.claim(**call)  # type: ignore[arg-type]
    assert [(e.owner, e.claimed_at_ms) for e in stores.tokens.entries("p")] == [(None, None)] * 2


def test_the_other_segment_operations_check_their_arguments(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    bad: str = None  # type: ignore[assignment]
    split = SegmentRequest(action=SegmentAction.SPLIT)
    for call, named in (
        (lambda: stores.tokens.release("p", "0", "a"), "segment_id"),  # type: ignore[arg-type]
        (lambda: stores.tokens.release("p", 0, bad), "owner"),
        (lambda: stores.tokens.split("p", True, "a"), "segment_id"),
        (lambda: stores.tokens.merge("p", 0, "a", now_ms=bad, claim_timeout_ms=1), "now_ms"),  # type: ignore[arg-type]
        (lambda: stores.tokens.take_request("p", bad), "segment_id"),  # type: ignore[arg-type]
        (lambda: stores.tokens.hand_over("p", 0, "a", to="", now_ms=0), "to"),
        (lambda: stores.tokens.request("p", 0, split, now_ms=bad), "now_ms"),  # type: ignore[arg-type]
        (lambda: stores.tokens.request("p", 0, "split", now_ms=0), "SegmentRequest"),  # type: ignore[arg-type]
        (lambda: stores.tokens.batch("p", 0, "a", mask="1").__enter__(), "mask"),  # type: ignore[arg-type]
        (lambda: stores.tokens.handled("p", after="", up_to=b""), "after"),  # type: ignore[arg-type]
        (lambda: stores.tokens.forget_handled("p", before=bad), "before"),  # type: ignore[arg-type]
        (
            lambda: stores.tokens.reset("p", TrackingToken(), now_ms=bad, claim_timeout_ms=1),
            "now_ms",
        ),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidInputError, match=named):
            call()
    assert [(e.segment.segment_id, e.owner) for e in stores.tokens.entries("p")] == [
        (0, "a"),
        (1, None),
    ]
    assert stores.tokens.pending_requests("p") == []


def test_a_request_with_a_time_that_is_no_integer_is_refused_not_stored(stores: Stores) -> None:
    """SQLite stored "x", and every later pending_requests (processor status) failed on it."""
    stores.tokens.initialize("p", segment_count=1)
    split = SegmentRequest(action=SegmentAction.SPLIT)
    with pytest.raises(InvalidInputError, match="now_ms"):
        stores.tokens.request("p", 0, split, now_ms="x")  # type: ignore[arg-type]
    assert stores.tokens.pending_requests("p") == []


def test_a_hand_over_request_must_name_the_new_owner(stores: Stores) -> None:
    """One with none was stored, and its owner took it and did nothing."""
    stores.tokens.initialize("p", segment_count=1)
    nobody = SegmentRequest(action=SegmentAction.HAND_OVER)
    with pytest.raises(InvalidIdentifierError, match="target_owner"):
        stores.tokens.request("p", 0, nobody, now_ms=0)
    assert stores.tokens.take_request("p", 0) is None


@pytest.mark.postgres
def test_a_request_stored_while_the_owner_takes_one_is_not_lost(postgres_dsn: str) -> None:
    """take_request read the pending request and then deleted the segment's row: under READ
    COMMITTED a request another process stored in between was deleted unseen (the owner acted
    on the older one). Here that process's request is written, not committed, when the owner
    takes the segment's request: the take waits for it and returns the newer request."""
    release = SegmentRequest(action=SegmentAction.RELEASE)
    taken: list[SegmentRequest | None] = []
    with stores_at(postgres_dsn) as stores, psycopg.connect(postgres_dsn) as other:
        stores.tokens.initialize("p", segment_count=1)
        stores.tokens.request("p", 0, SegmentRequest(action=SegmentAction.SPLIT), now_ms=0)
        other.execute(  # what request() writes (the latest wins), not committed yet
            "INSERT INTO segment_requests (processor, segment_id, action, target_owner, "
            "requested_at) VALUES ('p', 0, 'release', NULL, 1) ON CONFLICT (processor, "
            "segment_id) DO UPDATE SET action = excluded.action, "
            "target_owner = excluded.target_owner, requested_at = excluded.requested_at"
        )
        owner = threading.Thread(target=lambda: taken.append(stores.tokens.take_request("p", 0)))
        owner.start()
        wait_for_a_lock_wait(postgres_dsn, "DELETE FROM segment_requests")
        other.commit()
        owner.join(timeout=30)
        assert taken == [release]
        assert stores.tokens.pending_requests("p") == []
