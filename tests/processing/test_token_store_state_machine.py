"""Claims and segment moves under random operations: a Hypothesis rule-based state machine.

Several owners claim, release, split and merge the segments of one processor on a real SQLite
token store; after every step the segments still partition the hash space, every segment has
at most one owner, and the store agrees with a simple model of who may hold what. A reader
without claims (a Spark projection) moves the tokens of the segments nobody holds, those
whose claim expired included.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ordo.errors import InvalidSegmentOperationError, UnableToClaimTokenError
from ordo.storage.open import open_stores
from ordo.time import TimeUUID

OWNERS = ("a", "b", "c")
TIMEOUT = 1_000
PROBES = [0, 1, 2, 3, 5, 8, 13, 255, 256, 1023, 65_535, 2**31, 2**32 - 1]


class TokenStoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.stores = open_stores(str(Path(self.directory.name) / "tokens.db"))
        self.stores.tokens.initialize("p", segment_count=2)
        self.now = 0
        self.offsets: list[TimeUUID] = []
        """What advance_unclaimed was given, each later than the one before."""

    def teardown(self) -> None:
        self.stores.close()
        self.directory.cleanup()

    def _segment_ids(self) -> list[int]:
        return [e.segment.segment_id for e in self.stores.tokens.entries("p")]

    @rule(owner=st.sampled_from(OWNERS), pick=st.integers(0, 63), advance=st.integers(0, 700))
    def claim(self, owner: str, pick: int, advance: int) -> None:
        self.now += advance
        ids = self._segment_ids()
        entry = self.stores.tokens.entries("p")[pick % len(ids)]
        claimable = entry.is_claimable_by(owner, now_ms=self.now, claim_timeout_ms=TIMEOUT)
        try:
            claimed = self.stores.tokens.claim(
                "p", entry.segment.segment_id, owner, now_ms=self.now, claim_timeout_ms=TIMEOUT
            )
        except UnableToClaimTokenError:
            assert not claimable
        else:
            assert claimable
            assert claimed.owner == owner

    @rule(owner=st.sampled_from(OWNERS), pick=st.integers(0, 63))
    def release(self, owner: str, pick: int) -> None:
        ids = self._segment_ids()
        self.stores.tokens.release("p", ids[pick % len(ids)], owner)

    @rule(owner=st.sampled_from(OWNERS), pick=st.integers(0, 63))
    def split(self, owner: str, pick: int) -> None:
        entry = self.stores.tokens.entries("p")[pick % len(self._segment_ids())]
        try:
            low, high = self.stores.tokens.split("p", entry.segment.segment_id, owner)
        except (UnableToClaimTokenError, InvalidSegmentOperationError):
            assert entry.owner != owner or not entry.segment.can_split
        else:
            assert entry.owner == owner
            assert (low, high) == entry.segment.split()

    @rule(owner=st.sampled_from(OWNERS), pick=st.integers(0, 63))
    def merge(self, owner: str, pick: int) -> None:
        entries = self.stores.tokens.entries("p")
        entry = entries[pick % len(entries)]
        before = len(entries)
        try:
            merged = self.stores.tokens.merge(
                "p", entry.segment.segment_id, owner, now_ms=self.now, claim_timeout_ms=TIMEOUT
            )
        except (UnableToClaimTokenError, InvalidSegmentOperationError):
            assert len(self.stores.tokens.entries("p")) == before
        else:
            assert entry.owner == owner
            assert merged == entry.segment.merge(entry.segment.sibling())

    @rule(advance=st.integers(0, 700))
    def advance_unclaimed(self, advance: int) -> None:
        """A claimless reader's step: a live claim keeps its segment, an expired one is free."""
        self.now += advance
        self.offsets.append(TimeUUID.min_for_epoch_ns((len(self.offsets) + 1) * 10**9))
        before = self.stores.tokens.entries("p")
        self.stores.tokens.advance_unclaimed(
            "p", self.offsets[-1], now_ms=self.now, claim_timeout_ms=TIMEOUT
        )
        for old, new in zip(before, self.stores.tokens.entries("p"), strict=True):
            if old.is_held(now_ms=self.now, claim_timeout_ms=TIMEOUT):
                assert new == old
            else:
                assert (new.token.offset, new.owner) == (self.offsets[-1], None)

    @invariant()
    def segments_partition_the_hash_space(self) -> None:
        segments = [e.segment for e in self.stores.tokens.entries("p")]
        for value in PROBES:
            assert sum(s.matches(value) for s in segments) == 1
        assert sum(1 / (s.mask + 1) for s in segments) == 1

    @invariant()
    def segment_ids_are_unique(self) -> None:
        ids = self._segment_ids()
        assert len(ids) == len(set(ids))


TokenStoreMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None
)
test_token_store_state_machine = TokenStoreMachine.TestCase
