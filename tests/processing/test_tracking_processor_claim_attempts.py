"""Threads of a tracking processor that hold no segment, looking for one to claim: what they
do when a segment goes away under the attempt, and how often they look."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.segment import Segment
from ordo.storage.open import stores_at as open_stores
from ordo.storage.sqlite import datastore
from ordo.storage.stores import Stores
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


class _CountedLooks(TokenStoreDouble):
    """The token store, counting the reads of the segments that each of the processor's
    threads makes (one per look for a segment to claim)."""

    def __init__(self, tokens: TokenStore) -> None:
        super().__init__(tokens)
        self.looks: Counter[str] = Counter()

    def entries(self, processor: str) -> Sequence[TokenEntry]:
        self.looks[threading.current_thread().name] += 1
        return self._tokens.entries(processor)


def test_threads_woken_by_a_request_look_for_a_segment_once_and_wait_again(
    stores: Stores,
) -> None:
    """A request wakes every thread, so that the segment's owner obeys it at once. A thread
    with no segment to claim kept that wake-up: it looked for a segment again and again with no
    pause, thousands of reads of the token store a second, until it claimed one (and with more
    threads than segments, for ever). It looks once now, and waits its claim interval again."""
    stores.tokens.initialize("counts", segment_count=1)
    stores.tokens.claim("counts", 0, "other", now_ms=now_ms(), claim_timeout_ms=3_600_000)
    tokens = _CountedLooks(stores.tokens)
    settings = replace(
        FAST,
        thread_count=2,
        initial_segment_count=1,
        claim_timeout=timedelta(hours=1),
        token_claim_interval=timedelta(hours=1),
    )
    with counts_processor(stores, settings=settings, tokens=tokens) as processor:
        wait_for(lambda: len(tokens.looks) == 2)  # each thread looked, found nothing, waits
        tokens.looks.clear()
        processor.split(0)  # asks "other", in no hurry; wakes both threads
        wait_for(lambda: len(tokens.looks) == 2)  # each thread looked again
        time.sleep(0.5)  # a thread looking without a pause has looked thousands of times now
        # A look under way when the request came may be followed by one more.
        assert max(tokens.looks.values()) <= 2, tokens.looks
    assert processor.failure is None


def test_a_claim_that_met_an_outage_is_tried_again_once_storage_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A claim that failed with an outage (another writer held the SQLite file's write lock
    past the busy timeout) left the segment marked as taken by the thread in its process: no
    thread of the process tried it again, and a processor of one thread processed nothing any
    more, running, with no failure. The thread claims it once storage is back now."""
    monkeypatch.setattr(datastore, "BUSY_TIMEOUT_S", 0.1)
    path = tmp_path / "journal.db"
    with open_stores(f"sqlite:///{path}") as stores:
        stores.tokens.initialize("counts", segment_count=1)
        # Held by "other" until the claim timeout: the thread's first claim comes after it.
        stores.tokens.claim("counts", 0, "other", now_ms=now_ms(), claim_timeout_ms=2_000)
        settings = replace(FAST, thread_count=1, initial_segment_count=1)
        with counts_processor(stores, settings=settings) as processor:
            with closing(sqlite3.connect(path, isolation_level=None)) as writer:
                writer.execute("BEGIN EXCLUSIVE")  # readers go on (WAL); writers wait
                wait_for(lambda: "claim failed" in caplog.text, what="the claim to fail")
                writer.execute("ROLLBACK")
            wait_for(
                lambda: (stores.tokens.entries("counts")[0].owner or "").startswith(
                    processor._instance
                ),
                what="the thread to claim the segment",
            )
            assert processor.is_running
        assert processor.failure is None
