"""Merges raced by other owners and operators, at moments a token store double makes certain:
hand-overs and releases asked meanwhile, and both owners of a pair merging it at once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from ordo.errors import (
    PendingHandOverError,
    PendingMergeError,
    StorageUnavailableError,
    UnableToClaimTokenError,
)
from ordo.processing.control import (
    ControlReceipt,
    merge_segment,
    release_segment,
    split_segment,
)
from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.processor import TrackingProcessor
from ordo.processing.segment import Segment
from ordo.processing.segment_request import PendingRequest, SegmentAction, SegmentRequest
from ordo.storage.stores import Stores
from processing_support import (
    FAST,
    TokenStoreDouble,
    counts_processor,
    now_ms,
    owner_of_segment_0,
    wait_for,
)


def _beside_other_s_segment_1(
    stores: Stores, tokens: TokenStoreDouble, *, held: int = 1
) -> TrackingProcessor:
    """A one-thread "counts" processor over two segments through `tokens` (the store behind a
    race double), with "other" holding segment 1 (or `held`) for 30 s: the processor can take
    the other segment only."""
    settings = replace(
        FAST, thread_count=1, initial_segment_count=2, claim_timeout=timedelta(seconds=30)
    )
    stores.tokens.initialize("counts", segment_count=2)
    stores.tokens.claim("counts", held, "other", now_ms=now_ms(), claim_timeout_ms=30_000)
    return counts_processor(stores, settings=settings, tokens=tokens)


class _HandOverAskedMeanwhile(TokenStoreDouble):
    """The token store, except that as soon as an owner tries a merge, the owner of the
    sibling asks it to hand its segment over: the sibling's owner merging the same two
    segments at that moment (a race a test cannot time otherwise)."""

    def __init__(self, tokens: TokenStore, *, sibling_owner: str) -> None:
        super().__init__(tokens)
        self._sibling_owner = sibling_owner

    def merge(self, processor: str, segment_id: int, owner: str, **options: int) -> Segment:
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=self._sibling_owner)
        self._tokens.request(processor, segment_id, hand_over, now_ms=0)
        return self._tokens.merge(processor, segment_id, owner, **options)


def test_an_owner_asked_for_its_segment_while_merging_hands_it_over(stores: Stores) -> None:
    """Both owners of two siblings merging them at once: each asked the other for its segment,
    and the merge request an owner asks of itself again (to retry) replaced the hand-over it
    was asked for. The hand-over stays now, and the owner of the higher segment (the lower
    one's merge goes first) hands its segment over."""
    tokens = _HandOverAskedMeanwhile(stores.tokens, sibling_owner="other")
    processor = _beside_other_s_segment_1(stores, tokens, held=0)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[1].owner is not None)
        processor.merge(1)
        wait_for(lambda: stores.tokens.entries("counts")[1].owner == "other")
        assert stores.tokens.pending_requests("counts") == []  # nor asked for segment 0
        assert processor.is_running
    assert processor.failure is None


class _Releases(TokenStoreDouble):
    """The token store, recording the segments released, and how many times requests were
    read after a hand-over was made or skipped."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens)
        self.released: list[int] = []
        self.read_after_hand_over = 0
        self._is_handed_over = False

    def release(self, processor: str, segment_id: int, owner: str, **options: bool) -> None:
        self.released.append(segment_id)
        self._tokens.release(processor, segment_id, owner, **options)

    def hand_over(self, processor: str, segment_id: int, owner: str, **options: Any) -> bool:
        self._is_handed_over = True
        return self._tokens.hand_over(processor, segment_id, owner, **options)

    def pending_requests(self, processor: str) -> Sequence[PendingRequest]:
        self.read_after_hand_over += self._is_handed_over
        return self._tokens.pending_requests(processor)


def test_an_owner_asked_to_hand_its_segment_to_itself_keeps_it(stores: Stores) -> None:
    """The worker handed the segment over to itself and then released it, for nothing. It
    keeps the segment now: it reads requests again with the same claim."""
    tokens = _Releases(stores.tokens)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner = owner_of_segment_0(stores)
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=owner)
        stores.tokens.request("counts", 0, hand_over, now_ms=0)
        wait_for(lambda: tokens.read_after_hand_over > 0)
        assert tokens.released == []
        assert stores.tokens.entries("counts")[0].owner == owner
    assert processor.failure is None


class _ReleaseAskedMeanwhile(TokenStoreDouble):
    """The token store, except that when an owner tries its merge the second time (it asked
    for the sibling at the first), the operator asks it to release the segment first: between
    reading the merge and asking it again (a race a test cannot time otherwise)."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens)
        self.merges_tried = 0
        self.receipts: list[ControlReceipt] = []

    def merge(self, processor: str, segment_id: int, owner: str, **options: int) -> Segment:
        self.merges_tried += 1
        if self.merges_tried == 2:
            self.receipts.append(
                release_segment(
                    self._tokens, processor, segment_id, now_ms=now_ms(), claim_timeout_ms=30_000
                )
            )
        return self._tokens.merge(processor, segment_id, owner, **options)


def test_an_operator_s_release_made_while_the_owner_merges_is_not_replaced(
    stores: Stores,
) -> None:
    """The owner of segment 0 merges while another owner holds segment 1: at each check it
    takes its merge request, fails to merge, and asks the merge again and for segment 1. The
    merge asked again replaced a release the operator made in between, though the operator
    was told that the owner was asked. The release stands now: the owner releases segment 0,
    and the hand-over of segment 1 that its merge asked for is withdrawn."""
    tokens = _ReleaseAskedMeanwhile(stores.tokens)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner = owner_of_segment_0(stores)
        processor.merge(0)
        wait_for(lambda: tokens.merges_tried == 2)
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is None)
        assert [r.message for r in tokens.receipts] == [
            f"asked {owner} to release Segment[0/1] (replacing the pending merge request)"
        ]
        assert stores.tokens.pending_requests("counts") == []
        assert processor.is_running
    assert processor.failure is None


class _ReleaseAskedOnceTheMergeFailed(TokenStoreDouble):
    """The token store, except that the operator asks the owner to release segment 0 right
    after the owner's first call once its merge failed (another owner holds the sibling):
    whatever it asks then, the release comes after it and before anything else it asks."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens)
        self.has_merge_failed = False
        self.receipts: list[ControlReceipt] = []

    def merge(self, processor: str, segment_id: int, owner: str, **options: int) -> Segment:
        try:
            return self._tokens.merge(processor, segment_id, owner, **options)
        except UnableToClaimTokenError:
            self.has_merge_failed = True
            raise

    def __getattr__(self, name: str) -> object:
        method = getattr(self._tokens, name)
        if not self.has_merge_failed or self.receipts:
            return method

        def then_release(*args: object, **kwargs: object) -> object:
            result = method(*args, **kwargs)
            self.receipts.append(
                release_segment(self._tokens, "counts", 0, now_ms=now_ms(), claim_timeout_ms=30_000)
            )
            return result

        return then_release


def test_an_operator_s_release_right_after_the_owner_asks_its_merge_again_ends_the_merge(
    stores: Stores,
) -> None:
    """The owner of segment 0 merges while another owner holds segment 1: it asked its merge
    again, and then, in a second transaction, for segment 1. A release made between the two
    replaced the merge (and withdrew no hand-over: none was stored yet), and the hand-over
    asked next sent segment 1 to an owner that had released its segment and was not merging.
    Both are asked in one transaction now: the release ends the merge and withdraws the
    hand-over, and segment 1's owner keeps it."""
    tokens = _ReleaseAskedOnceTheMergeFailed(stores.tokens)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner = owner_of_segment_0(stores)
        processor.merge(0)
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is None)
        assert [r.message for r in tokens.receipts] == [
            f"asked {owner} to release Segment[0/1] (replacing the pending merge request)"
        ]
        assert stores.tokens.pending_requests("counts") == []
        assert stores.tokens.entries("counts")[1].owner == "other"
    assert processor.failure is None


class _SiblingMergingAtOnce(TokenStoreDouble):
    """The token store, except that the owner of segment 1 merges the pair at the same moment
    as the processor's worker, segment 0's owner: right after the worker asks its merge again
    and for segment 1, it asks its own merge again and for segment 0 (once; a refusal leaves
    the merge to the worker, as it does in a worker)."""

    def __init__(self, tokens: TokenStore, *, sibling_owner: str) -> None:
        super().__init__(tokens)
        self._sibling_owner = sibling_owner
        self.refused: list[PendingHandOverError | PendingMergeError] = []
        self.asked = 0

    def request_merge(self, processor: str, segment_id: int, owner: str, *, now_ms: int) -> bool:
        is_pending = self._tokens.request_merge(processor, segment_id, owner, now_ms=now_ms)
        if self.asked == 0:
            try:
                self._tokens.request_merge(processor, 1, self._sibling_owner, now_ms=now_ms)
            except (PendingHandOverError, PendingMergeError) as exc:
                self.refused.append(exc)
        # Counted once the sibling's owner has asked: the test takes segment 1's hand-over
        # when it sees the count, and taken before that ask it let the ask through.
        self.asked += 1
        return is_pending


def test_when_both_owners_of_a_pair_merge_it_at_once_the_lower_segment_s_owner_merges(
    stores: Stores,
) -> None:
    """Both asked their own merge again, then each other for the sibling: each hand-over
    replaced the other's merge request, so each owner handed its segment to the other and the
    pair swapped owners without merging. Each owner asks both at once now: segment 0's owner
    asked first and keeps the merge, the other owner's ask is refused (segment 1 is to be
    handed over), and it hands segment 1 over when asked."""
    tokens = _SiblingMergingAtOnce(stores.tokens, sibling_owner="other")
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner = owner_of_segment_0(stores)
        merge_segment(stores.tokens, "counts", 0, now_ms=now_ms(), claim_timeout_ms=30_000)
        wait_for(lambda: tokens.asked == 1)
        # The owner of segment 1 takes the hand-over asked of it, as its worker does.
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner=owner)
        assert stores.tokens.take_request("counts", 1) == hand_over
        assert stores.tokens.hand_over(
            "counts", 1, "other", to=owner, now_ms=now_ms(), claim_timeout_ms=30_000
        )
        wait_for(
            lambda: (
                len(stores.tokens.entries("counts")) == 1
                or stores.tokens.entries("counts")[0].owner == "other"
            )
        )
        assert [e.segment for e in stores.tokens.entries("counts")] == [Segment(0, 0)]
        # A merge ends the claim: the worker releases the merged segment and claims it again.
        wait_for(lambda: stores.tokens.entries("counts")[0].owner == owner)
        assert [(type(e), e.segment_id) for e in tokens.refused] == [(PendingHandOverError, 1)]
    assert processor.failure is None


_EACH_OPERATOR_ACTION = pytest.mark.parametrize(
    "operation", [release_segment, split_segment], ids=["release", "split"]
)
"""An operator's release or split, asked of a segment's owner."""


class _HandedOverThenAsked(TokenStoreDouble):
    """The token store, except that right after the worker (segment 0's owner) asks for
    segment 1 the first time, segment 1's owner hands it over, as its worker does, and then
    the operator applies `operation` to `segment_id`: all before the worker's next check,
    which merges the two (a moment a test cannot time otherwise). Records the claims and
    releases made after the operator's action."""

    def __init__(
        self, tokens: TokenStore, *, operation: Callable[..., ControlReceipt], segment_id: int
    ) -> None:
        super().__init__(tokens)
        self._operation = operation
        self._segment_id = segment_id
        self.receipts: list[ControlReceipt] = []
        self.calls: list[tuple[str, int]] = []

    def request_merge(self, processor: str, segment_id: int, owner: str, *, now_ms: int) -> bool:
        is_pending = self._tokens.request_merge(processor, segment_id, owner, now_ms=now_ms)
        if not self.receipts and self._tokens.take_request(processor, 1) is not None:
            self._tokens.hand_over(
                processor, 1, "other", to=owner, now_ms=now_ms, claim_timeout_ms=30_000
            )
            self.receipts.append(
                self._operation(
                    self._tokens,
                    processor,
                    self._segment_id,
                    now_ms=now_ms,
                    claim_timeout_ms=30_000,
                )
            )
        return is_pending

    def claim(
        self, processor: str, segment_id: int, owner: str, *, now_ms: int, claim_timeout_ms: int
    ) -> TokenEntry:
        if self.receipts:
            self.calls.append(("claim", segment_id))
        return self._tokens.claim(
            processor, segment_id, owner, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        )

    def release(self, processor: str, segment_id: int, owner: str, **options: bool) -> None:
        if self.receipts:
            self.calls.append(("release", segment_id))
        self._tokens.release(processor, segment_id, owner, **options)


@_EACH_OPERATOR_ACTION
def test_a_release_or_split_of_the_sibling_handed_over_for_a_merge_is_done_and_ends_it(
    stores: Stores, operation: Callable[..., ControlReceipt]
) -> None:
    """Asked after segment 1's owner handed it to the merging owner, before that owner's next
    check merged the two, the request was the merging owner's, which merged the pair and
    deleted it unseen, though the operator was told it was asked. The merging owner acts on
    it now, instead of merging: it releases segment 1 (split first, when asked to split) and
    keeps processing segment 0."""
    tokens = _HandedOverThenAsked(stores.tokens, operation=operation, segment_id=1)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner = owner_of_segment_0(stores)
        processor.merge(0)
        # The owner releases the sibling, then drops its merge: wait for both.
        wait_for(
            lambda: (
                all(e.owner is None for e in stores.tokens.entries("counts")[1:])
                and not stores.tokens.pending_requests("counts")
            )
        )
        entries = stores.tokens.entries("counts")
        what = {release_segment: "release", split_segment: "split segment"}[operation]
        assert [r.message for r in tokens.receipts] == [f"asked {owner} to {what} Segment[1/1]"]
        expected = {release_segment: [(1, 1)], split_segment: [(1, 3), (3, 3)]}[operation]
        assert [(e.segment.segment_id, e.segment.mask) for e in entries] == [(0, 1), *expected]
        assert entries[0].owner == owner
        assert stores.tokens.pending_requests("counts") == []
        assert processor.is_running
    assert processor.failure is None


@_EACH_OPERATOR_ACTION
def test_a_merge_ended_after_the_hand_over_releases_the_sibling_with_the_segment(
    stores: Stores, operation: Callable[..., ControlReceipt]
) -> None:
    """The operator released or split segment 0 after segment 1 was handed to its owner for
    the merge: the merge ended and the owner gave segment 0 up, but segment 1 stayed claimed
    by it, processed by nobody, until the claim timeout (after a split the worker went back
    to segment 0). It releases segment 1 right after segment 0 now, before it claims again."""
    tokens = _HandedOverThenAsked(stores.tokens, operation=operation, segment_id=0)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner_of_segment_0(stores)
        processor.merge(0)
        wait_for(lambda: ("release", 0) in tokens.calls and tokens.calls[-1][0] == "claim")
        replacing = "(replacing the pending merge request)"
        assert [r.message.endswith(replacing) for r in tokens.receipts] == [True]
        released = tokens.calls.index(("release", 0))
        claimed = next(i for i, c in enumerate(tokens.calls) if i > released and c[0] == "claim")
        assert ("release", 1) in tokens.calls[released:claimed]
        assert processor.is_running
    assert processor.failure is None


@_EACH_OPERATOR_ACTION
def test_a_release_or_split_left_pending_on_a_free_sibling_is_done_and_ends_the_merge(
    stores: Stores, operation: Callable[..., ControlReceipt]
) -> None:
    """Segment 1's owner released it (it stopped) before it took the operator's request: the
    merging owner merged segment 0 with the free segment 1, and the request went with it,
    though the operator was told it was asked. The merging owner acts on it now, as on a
    sibling handed over to it: it claims segment 1, splits it (when asked to split), releases
    it, and keeps processing segment 0."""
    processor = _beside_other_s_segment_1(stores, TokenStoreDouble(stores.tokens))
    with processor:
        owner = owner_of_segment_0(stores)
        receipt = operation(stores.tokens, "counts", 1, now_ms=now_ms(), claim_timeout_ms=30_000)
        assert receipt.message.startswith("asked other to ")
        stores.tokens.release("counts", 1, "other")
        processor.merge(0)
        wait_for(
            lambda: (
                stores.tokens.pending_requests("counts") == []
                and all(e.owner is None for e in stores.tokens.entries("counts")[1:])
            )
        )
        entries = stores.tokens.entries("counts")
        expected = {release_segment: [(1, 1)], split_segment: [(1, 3), (3, 3)]}[operation]
        assert [(e.segment.segment_id, e.segment.mask) for e in entries] == [(0, 1), *expected]
        assert entries[0].owner == owner
        assert processor.is_running
    assert processor.failure is None


class _AskedAgainOfTheSibling(TokenStoreDouble):
    """The token store, except that right before the merging owner splits or releases the
    sibling as asked (segment 1, which it claimed for that), the operator applies `operation`
    to it, asked of that owner: after the owner read the first request (a moment a test cannot
    time otherwise)."""

    def __init__(self, tokens: TokenStore, *, operation: Callable[..., ControlReceipt]) -> None:
        super().__init__(tokens)
        self._operation = operation
        self.receipts: list[ControlReceipt] = []

    def split(
        self, processor: str, segment_id: int, owner: str, **options: bool
    ) -> tuple[Segment, Segment]:
        self._ask_first(processor, segment_id)
        return self._tokens.split(processor, segment_id, owner, **options)

    def release(self, processor: str, segment_id: int, owner: str, **options: bool) -> None:
        if options.get("as_requested"):
            self._ask_first(processor, segment_id)
        self._tokens.release(processor, segment_id, owner, **options)

    def _ask_first(self, processor: str, segment_id: int) -> None:
        if segment_id == 1 and not self.receipts:
            self.receipts.append(
                self._operation(
                    self._tokens, processor, 1, now_ms=now_ms(), claim_timeout_ms=30_000
                )
            )


@pytest.mark.parametrize(
    ("first", "then"),
    [(split_segment, release_segment), (release_segment, split_segment)],
    ids=["split then release", "release then split"],
)
def test_a_request_made_on_the_sibling_after_the_merging_owner_read_one_there_is_obeyed_first(
    stores: Stores,
    caplog: pytest.LogCaptureFixture,
    first: Callable[..., ControlReceipt],
    then: Callable[..., ControlReceipt],
) -> None:
    """A split or release left on the free sibling, replaced by the operator's other request
    once the merging owner had read it and claimed the sibling: the split or release was
    refused, and the owner released the sibling as it was, with the later request left on it,
    yet dropped its merge and logged that the sibling was released on request. It keeps its
    merge now, and at its next check obeys the later request on the sibling first, which ends
    the merge: its log says so only then."""
    caplog.set_level(logging.INFO)
    tokens = _AskedAgainOfTheSibling(stores.tokens, operation=then)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner = owner_of_segment_0(stores)
        first(stores.tokens, "counts", 1, now_ms=now_ms(), claim_timeout_ms=30_000)
        stores.tokens.release("counts", 1, "other")
        processor.merge(0)
        wait_for(lambda: "merge dropped, its sibling" in caplog.text)
        asked = {release_segment: "release", split_segment: "split segment"}[then]
        replaced = {release_segment: "release", split_segment: "split"}[first]
        assert [r.message for r in tokens.receipts] == [
            f"asked {owner} to {asked} Segment[1/1] (replacing the pending {replaced} request)"
        ]
        obeyed, dropped = {
            release_segment: ("released on request", "released on request"),
            split_segment: ("split", "split and released on request"),
        }[then]
        steps = (obeyed + ":", "merge kept", "merge dropped")
        logged = [m for r in caplog.records if (m := r.getMessage()).startswith(steps)]
        assert [m.split(":")[0] for m in logged] == [
            "merge kept, its sibling released as it is, with a later request",
            obeyed,
            f"merge dropped, its sibling {dropped}",
        ]
        expected = {release_segment: [(1, 1)], split_segment: [(1, 3), (3, 3)]}[then]
        entries = stores.tokens.entries("counts")
        assert [(e.segment.segment_id, e.segment.mask) for e in entries] == [(0, 1), *expected]
        assert entries[0].owner == owner
        assert all(e.owner is None for e in entries[1:])
        assert stores.tokens.pending_requests("counts") == []
        assert processor.is_running
    assert processor.failure is None


class _SiblingMergeAskedThenTheMergeFails(_HandedOverThenAsked):
    """As _HandedOverThenAsked, with the operator asking for a merge of segment 1, and the
    merge that follows (the worker's next check) failing once, as a lost connection fails
    it."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens, operation=merge_segment, segment_id=1)
        self.has_failed = False

    def merge(self, processor: str, segment_id: int, owner: str, **options: int) -> Segment:
        if self.receipts and not self.has_failed:
            self.has_failed = True
            msg = "connection lost (injected)"
            raise StorageUnavailableError(msg)
        return self._tokens.merge(processor, segment_id, owner, **options)


def test_an_operator_s_merge_of_the_sibling_handed_over_stays_pending_when_the_merge_fails(
    stores: Stores,
) -> None:
    """The operator asked for a merge of segment 1 once it was handed over to the merging
    owner, which took that request with the sibling's at its next check and then failed to
    merge: the request was gone, though nothing was merged. Both merge requests stay pending
    until a merge carries them out: the owner's retry, once the storage failure is over."""
    tokens = _SiblingMergeAskedThenTheMergeFails(stores.tokens)
    processor = _beside_other_s_segment_1(stores, tokens)
    with processor:
        owner = owner_of_segment_0(stores)
        processor.merge(0)
        wait_for(lambda: len(stores.tokens.entries("counts")) == 1)
        assert tokens.has_failed
        what = "merge Segment[1/1] with its sibling"
        assert [r.message for r in tokens.receipts] == [f"asked {owner} to {what}"]
        assert stores.tokens.pending_requests("counts") == []
    assert processor.failure is None


class _AskedOfTheMergingOwner(TokenStoreDouble):
    """The token store, except that when the worker, having read a merge request, merges, the
    operator first applies `operation` to the segment it merges (asked of the worker, which
    holds it): a moment a test cannot time otherwise. Records the splits and releases made
    after the operator's action, once made."""

    def __init__(self, tokens: TokenStore, *, operation: Callable[..., ControlReceipt]) -> None:
        super().__init__(tokens)
        self._operation = operation
        self.receipts: list[ControlReceipt] = []
        self.calls: list[tuple[str, int]] = []

    def merge(self, processor: str, segment_id: int, owner: str, **options: int) -> Segment:
        if not self.receipts:
            self.receipts.append(
                self._operation(
                    self._tokens, processor, segment_id, now_ms=now_ms(), claim_timeout_ms=30_000
                )
            )
        return self._tokens.merge(processor, segment_id, owner, **options)

    def split(
        self, processor: str, segment_id: int, owner: str, **options: bool
    ) -> tuple[Segment, Segment]:
        halves = self._tokens.split(processor, segment_id, owner, **options)
        self.calls.append(("split", segment_id))
        return halves

    def release(self, processor: str, segment_id: int, owner: str, **options: bool) -> None:
        self._tokens.release(processor, segment_id, owner, **options)
        if self.receipts:
            self.calls.append(("release", segment_id))


@pytest.mark.parametrize("segment_id", [0, 1], ids=["lower", "higher"])
@_EACH_OPERATOR_ACTION
def test_a_release_or_split_of_the_segment_asked_while_its_owner_merges_is_done_and_ends_it(
    stores: Stores, operation: Callable[..., ControlReceipt], segment_id: int
) -> None:
    """Asked after the owner took the merge, before it merged its segment with the free
    sibling: the merge went on, and the request went with the merged-away higher segment, or
    stayed on the lower one, the merged segment's id, which its owner then split or released,
    though the operator had named a half. The merge ends now, and the owner splits or releases
    the segment the operator named."""
    tokens = _AskedOfTheMergingOwner(stores.tokens, operation=operation)
    settings = replace(
        FAST, thread_count=1, initial_segment_count=2, claim_timeout=timedelta(seconds=30)
    )
    stores.tokens.initialize("counts", segment_count=2)
    sibling_id = 1 - segment_id
    # The worker claims the first free segment: "other" holds the sibling until it has.
    stores.tokens.claim("counts", sibling_id, "other", now_ms=now_ms(), claim_timeout_ms=30_000)
    processor = counts_processor(stores, settings=settings, tokens=tokens)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[segment_id].owner is not None)
        owner = stores.tokens.entries("counts")[segment_id].owner
        stores.tokens.release("counts", sibling_id, "other")
        processor.merge(segment_id)
        what = {release_segment: "release", split_segment: "split"}[operation]
        wait_for(lambda: (what, segment_id) in tokens.calls)
        asked = {release_segment: "release", split_segment: "split segment"}[operation]
        replacing = "(replacing the pending merge request)"
        assert [r.message for r in tokens.receipts] == [
            f"asked {owner} to {asked} Segment[{segment_id}/1] {replacing}"
        ]
        halves = {0: [(0, 3), (1, 1), (2, 3)], 1: [(0, 1), (1, 3), (3, 3)]}[segment_id]
        expected = {release_segment: [(0, 1), (1, 1)], split_segment: halves}[operation]
        entries = stores.tokens.entries("counts")
        assert [(e.segment.segment_id, e.segment.mask) for e in entries] == expected
        assert stores.tokens.pending_requests("counts") == []
        assert processor.is_running
    assert processor.failure is None
