"""What an operator or another owner asks of a segment's owner, and what an operator changed.

The values the token store's segment requests are made of (TokenStore.request, take_request,
pending_requests, change_unclaimed), apart from the port that stores them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ordo.processing.segment import Segment


class SegmentAction(StrEnum):
    """A change asked of the owner of a segment (from another process or the CLI)."""

    SPLIT = "split"
    MERGE = "merge"
    RELEASE = "release"
    HAND_OVER = "hand_over"
    """Give the claim to `target_owner` (the owner of the sibling that wants to merge)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentRequest:
    """A pending request to a segment's owner."""

    action: SegmentAction
    target_owner: str | None = None

    def describe(self) -> str:
        """The request in an operator's words: "split", "hand over to worker-2"."""
        if self.action is SegmentAction.HAND_OVER:
            return f"hand over to {self.target_owner}"
        return self.action.value


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingRequest:
    """A request its segment's owner has not carried out yet, and when it was made.

    An owner obeys requests between batches; one that stays pending tells an operator that
    the owner is stuck in a batch or gone (its claim then expires and the next owner obeys).
    """

    segment_id: int
    request: SegmentRequest
    requested_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnclaimedChange:
    """What TokenStore.change_unclaimed made: the segments now, and the requests it replaced."""

    segments: tuple[Segment, ...]
    replaced: tuple[PendingRequest, ...]
