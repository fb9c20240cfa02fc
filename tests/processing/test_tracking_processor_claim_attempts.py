"""Threads of a tracking processor that hold no segment, looking for one to claim: what they
do when a segment goes away under the attempt."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.segment import Segment
from ordo.storage.open import Stores
from processing_support import FAST, TokenStoreDouble, counts_processor, now_ms, wait_for


class _MergedAwayAtTheClaim(TokenStoreDouble):
    """The token store, except that right before a thread claims segment 1, "other" merges
    its segment 0 with it: after the thread read segment 1 free (a moment a test cannot time
    otherwise)."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens)
        self.merged = threading.Event()

    def claim(self, processor: str, segment_id: int, owner: str, **options: int) -> TokenEntry:
        if segment_id == 1 and not self.merged.is_set():
            self._tokens.merge(processor, 0, "other", **options)
            self.merged.set()
        return self._tokens.claim(processor, segment_id, owner, **options)


def test_a_segment_merged_away_as_a_thread_claims_it_is_passed_over(stores: Stores) -> None:
    """The claim of a segment merged away since the thread read it raised UnknownSegmentError,
    which ended the thread: a processor of one thread processed nothing any more, with no
    failure. The thread passes over it now, and claims the merged segment once it is free."""
    stores.tokens.initialize("counts", segment_count=2)
    stores.tokens.claim("counts", 0, "other", now_ms=now_ms(), claim_timeout_ms=30_000)
    tokens = _MergedAwayAtTheClaim(stores.tokens)
    settings = replace(
        FAST, thread_count=1, initial_segment_count=2, claim_timeout=timedelta(seconds=30)
    )
    with counts_processor(stores, settings=settings, tokens=tokens) as processor:
        wait_for(tokens.merged.is_set)
        assert [e.segment for e in stores.tokens.entries("counts")] == [Segment(0, 0)]
        stores.tokens.release("counts", 0, "other")
        wait_for(lambda: stores.tokens.entries("counts")[0].owner not in (None, "other"))
        assert processor.is_running
    assert processor.failure is None
