"""Splits and releases raced by an operator's request, at a moment a token store double makes
certain: the request made after the owner read its split or release is carried out on the
segment it was asked of, by the owner; and an operator's change of free segments raced by
another operator's split says in its receipt what it changed."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from ordo.processing.control import (
    ControlReceipt,
    merge_segment,
    release_segment,
    split_segment,
)
from ordo.processing.ports import TokenStore
from ordo.processing.segment import Segment
from ordo.processing.segment_request import SegmentAction, SegmentRequest, UnclaimedChange
from ordo.storage.stores import Stores
from processing_support import TokenStoreDouble, holding_segment_0, now_ms, wait_for


class _ReleaseAskedAtTheSplit(TokenStoreDouble):
    """The token store, except that right before the owner splits, the operator asks it to
    release the segment: after the owner read the split (a moment a test cannot time
    otherwise)."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens)
        self.receipts: list[ControlReceipt] = []

    def split(self, processor: str, segment_id: int, owner: str) -> tuple[Segment, Segment]:
        self.receipts.append(
            release_segment(
                self._tokens, processor, segment_id, now_ms=now_ms(), claim_timeout_ms=30_000
            )
        )
        return self._tokens.split(processor, segment_id, owner)


def test_a_release_asked_after_the_owner_read_its_split_releases_the_whole_segment(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """The release replaced the split, and the receipt said so, but the owner split all the
    same and then released the lower half, which kept the segment id. The split is refused
    now: the owner keeps processing the segment and releases it, whole, at its next check."""
    caplog.set_level(logging.INFO)
    tokens = _ReleaseAskedAtTheSplit(stores.tokens)
    with holding_segment_0(stores, tokens) as (processor, owner):
        processor.split(0)
        wait_for(lambda: "released on request" in caplog.text)
        assert [e.segment for e in stores.tokens.entries("counts")] == [Segment(0, 0)]
        assert stores.tokens.pending_requests("counts") == []
        assert [r.message for r in tokens.receipts] == [
            f"asked {owner} to release Segment[0/0] (replacing the pending split request)"
        ]
        assert "split replaced by a later request" in caplog.text
        assert processor.is_running
    assert processor.failure is None


class _SplitAskedAtTheRelease(TokenStoreDouble):
    """The token store, except that right before the owner releases the segment as asked, the
    operator asks it to split the segment: after the owner read the release (a moment a test
    cannot time otherwise). Records who held the segment once that release was over."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens)
        self.receipts: list[ControlReceipt] = []
        self.held_after: list[str | None] = []

    def release(self, processor: str, segment_id: int, owner: str, **options: bool) -> None:
        if not options.get("as_requested") or self.receipts:
            self._tokens.release(processor, segment_id, owner, **options)
            return
        self.receipts.append(
            split_segment(
                self._tokens, processor, segment_id, now_ms=now_ms(), claim_timeout_ms=30_000
            )
        )
        try:
            self._tokens.release(processor, segment_id, owner, **options)
        finally:
            self.held_after.append(self._tokens.entries(processor)[0].owner)


def test_a_split_asked_after_the_owner_read_its_release_is_made_by_the_owner(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """The split replaced the release, and the receipt said so, but the owner released the
    segment all the same, and left the split to whoever claimed it next. The release is
    refused now: the owner keeps the segment and splits it at its next check."""
    caplog.set_level(logging.INFO)
    tokens = _SplitAskedAtTheRelease(stores.tokens)
    with holding_segment_0(stores, tokens) as (processor, owner):
        processor.release(0)
        wait_for(lambda: len(stores.tokens.entries("counts")) == 2)
        assert [e.segment for e in stores.tokens.entries("counts")] == [
            Segment(0, 1),
            Segment(1, 1),
        ]
        assert tokens.held_after == [owner]  # the claim was never given up
        assert stores.tokens.pending_requests("counts") == []
        assert [r.message for r in tokens.receipts] == [
            f"asked {owner} to split segment Segment[0/0] (replacing the pending release request)"
        ]
        assert "release replaced by a later request" in caplog.text
        assert "released on request" not in caplog.text
        assert processor.is_running
    assert processor.failure is None


class _SplitByAnotherOperator(TokenStoreDouble):
    """The token store, except that right before an operator's change of free segments,
    another operator splits segment 1 (Segment[1/1]) and a split is left pending on its new
    half: after the first operator's command read the segments (a moment a test cannot time
    otherwise)."""

    def change_unclaimed(
        self, processor: str, segment_id: int, action: SegmentAction, **options: int
    ) -> UnclaimedChange:
        split_segment(self._tokens, processor, 1, now_ms=now_ms(), claim_timeout_ms=30_000)
        self._tokens.request(processor, 3, SegmentRequest(action=SegmentAction.SPLIT), now_ms=0)
        return self._tokens.change_unclaimed(processor, segment_id, action, **options)


@pytest.mark.parametrize(
    ("steer", "receipt", "left"),
    [
        (split_segment, "split Segment[1/3] into Segment[1/7] and Segment[5/7]", [3]),
        (release_segment, "segment Segment[1/3] is not claimed", [3]),
        (
            merge_segment,
            "merged into Segment[1/1] (replacing the pending split request of Segment[3/3])",
            [],
        ),
    ],
)
def test_the_receipt_of_a_change_of_free_segments_names_what_it_changed(
    stores: Stores, steer: Callable[..., ControlReceipt], receipt: str, left: list[int]
) -> None:
    """The receipt named the segments as the command had read them, before another
    operator's split: `split Segment[1/1] into Segment[1/7] and Segment[5/7]`, which no split
    makes, and a merge of the two new halves left out the request it deleted on one of them
    (the receipt names the requests a change deletes)."""
    stores.tokens.initialize("counts", segment_count=2)
    tokens = _SplitByAnotherOperator(stores.tokens)
    done = steer(tokens, "counts", 1, now_ms=now_ms(), claim_timeout_ms=30_000)
    assert (done.is_done, done.message) == (True, receipt)
    assert [p.segment_id for p in stores.tokens.pending_requests("counts")] == left
