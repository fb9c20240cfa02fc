"""The token store contract: segments made once, claimed, split, merged and handed over."""

from __future__ import annotations

import pytest

from ordo.errors import InvalidSegmentOperationError, UnableToClaimTokenError, UnknownProcessorError
from ordo.processing.segment import Segment
from ordo.processing.token import PartAhead, TrackingToken
from ordo.storage.stores import Stores
from token_support import T1, T2, TIMEOUT, claimed_with_token


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


def test_split_copies_the_token_and_merge_keeps_the_lower_one_and_the_half_ahead(
    stores: Stores,
) -> None:
    stores.tokens.initialize("p", segment_count=1)
    claimed_with_token(stores, 0, "a", T1)
    low, high = stores.tokens.split("p", 0, "a")
    assert (low, high) == (Segment(0, 1), Segment(1, 1))
    entries = stores.tokens.entries("p")
    assert [(e.segment, e.token, e.owner) for e in entries] == [
        (Segment(0, 1), TrackingToken(T1), "a"),
        (Segment(1, 1), TrackingToken(T1), None),
    ]
    claimed_with_token(stores, 1, "b", T2)
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


def test_a_claim_is_handed_over_by_its_owner_only(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 1, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.claim("p", 0, "b", now_ms=0, claim_timeout_ms=TIMEOUT)  # to merge the two
    with pytest.raises(UnableToClaimTokenError):
        stores.tokens.hand_over("p", 1, "x", to="b", now_ms=5, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.hand_over("p", 1, "a", to="b", now_ms=5, claim_timeout_ms=TIMEOUT)
    entry = stores.tokens.entries("p")[1]
    assert (entry.owner, entry.claimed_at_ms) == ("b", 5)
