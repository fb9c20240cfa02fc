"""Token stores as the token contract tests set them up and look at them."""

from __future__ import annotations

from ordo.processing.segment_request import SegmentAction, SegmentRequest
from ordo.processing.token import TrackingToken
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.types import PersistenceId

TIMEOUT = 10_000
T1 = TimeUUID.parse("5f1a2c10-e5f0-11f1-8000-000000000001")
T2 = TimeUUID.parse("6f1a2c10-e5f0-11f1-8000-000000000001")


def segments(stores: Stores, processor: str = "p") -> list[tuple[int, int]]:
    """The (segment_id, mask) of each of the processor's segments, in segment order."""
    return [(e.segment.segment_id, e.segment.mask) for e in stores.tokens.entries(processor)]


def pending(stores: Stores) -> list[tuple[int, SegmentRequest]]:
    """The requests pending for processor "p", by segment id."""
    return [(p.segment_id, p.request) for p in stores.tokens.pending_requests("p")]


def owners(stores: Stores) -> list[tuple[str | None, int | None]]:
    """The owner and claim time of each segment of processor "p"."""
    return [(e.owner, e.claimed_at_ms) for e in stores.tokens.entries("p")]


def hand_over_to(owner: str) -> SegmentRequest:
    """The request to hand a segment over to `owner`, for its merge."""
    return SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=owner)


def holding_0_and_1(stores: Stores) -> None:
    """Segment 0 held by "a", 1 by "b"."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, owner in ((0, "a"), (1, "b")):
        stores.tokens.claim("p", segment_id, owner, now_ms=0, claim_timeout_ms=TIMEOUT)


def claimed_with_token(stores: Stores, segment_id: int, owner: str, offset: TimeUUID) -> None:
    """Segment `segment_id` of processor "p" claimed by `owner`, whose batch stored its token
    at `offset`."""
    stores.tokens.claim("p", segment_id, owner, now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", segment_id, owner) as batch:
        batch.store_token(TrackingToken(offset))


def merging_0_while_b_holds_1(stores: Stores) -> None:
    """Segment 0 held by "a", 1 by "b"; "a" merges 0 as its worker does while the sibling is
    held: it asks its own merge again (to retry at its next check) and "b" for segment 1."""
    holding_0_and_1(stores)
    assert stores.tokens.request_merge("p", 0, "a", now_ms=0) is True


def applied(stores: Stores, positions: dict[str, int], processor: str = "p") -> None:
    """Positions as a Spark projection's task stores them: no claim, no token."""
    with stores.tokens.batch(processor, 0, "spark") as batch:
        for persistence_id, position in positions.items():
            batch.record(PersistenceId(persistence_id), position)
