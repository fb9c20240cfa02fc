"""Splits and releases raced by an operator's request, at a moment a token store double makes
certain: the request made after the owner read its split or release is carried out on the
segment it was asked of, by the owner."""

from __future__ import annotations

import logging

import pytest

from ordo.processing.control import ControlReceipt, release_segment, split_segment
from ordo.processing.ports import TokenStore
from ordo.processing.segment import Segment
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
