"""Any sequence of splits and merges from the root partitions the hash space (G4)."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ordo.hashing import HASH_BITS, stable_hash
from ordo.processing import Segment, compute_segments, initial_segments

hashes = st.integers(min_value=0, max_value=2**HASH_BITS - 1)
SAMPLE_HASHES = [0, 1, 2**HASH_BITS - 1, 2**31, *(stable_hash(f"order-{i}") for i in range(64))]


def apply(steps: list[tuple[bool, int]]) -> list[Segment]:
    """Split (False) or merge (True) the pick-th candidate, starting from the root."""
    segments = {Segment.root()}
    for is_merge, pick in steps:
        mergeable = sorted(s for s in segments if not s.is_root and s.sibling() in segments)
        if is_merge and mergeable:
            segment = mergeable[pick % len(mergeable)]
            sibling = segment.sibling()
            segments -= {segment, sibling}
            segments.add(segment.merge(sibling))
        else:
            splittable = sorted(s for s in segments if s.can_split)
            segment = splittable[pick % len(splittable)]
            segments.remove(segment)
            segments.update(segment.split())
    return sorted(segments)


def overlap(a: Segment, b: Segment) -> bool:
    common = a.mask & b.mask
    return a.segment_id & common == b.segment_id & common


def assert_partition(segments: list[Segment], extra_hashes: list[int]) -> None:
    """Shares sum to 1 and no two segments overlap: every hash has exactly one owner."""
    assert sum(Fraction(1, 2**s.depth) for s in segments) == 1
    assert not any(overlap(a, b) for a, b in combinations(segments, 2))
    probes = SAMPLE_HASHES + extra_hashes + [s.segment_id for s in segments]
    probes += [s.segment_id | (2**HASH_BITS - 1 - s.mask) for s in segments]
    for value_hash in probes:
        assert sum(s.matches(value_hash) for s in segments) == 1


steps = st.lists(st.tuples(st.booleans(), st.integers(min_value=0)), max_size=40)


@given(steps, st.lists(hashes, max_size=20))
def test_splits_and_merges_partition_the_hash_space(
    history: list[tuple[bool, int]], value_hashes: list[int]
) -> None:
    assert_partition(apply(history), value_hashes)


@given(steps)
def test_compute_segments_rebuilds_any_set_from_its_ids(history: list[tuple[bool, int]]) -> None:
    segments = apply(history)
    assert compute_segments(s.segment_id for s in segments) == segments
    assert compute_segments(reversed([s.segment_id for s in segments])) == segments


@given(st.lists(st.integers(min_value=0), max_size=12), hashes)
def test_split_segments_partition_the_hash_space(picks: list[int], key_hash: int) -> None:
    segments = [Segment.root()]
    for pick in picks:
        segments.extend(segments.pop(pick % len(segments)).split())
    assert sum(s.matches(key_hash) for s in segments) == 1


@given(hashes, st.integers(min_value=0, max_value=HASH_BITS))
def test_splitting_towards_one_hash_keeps_a_partition(value_hash: int, depth: int) -> None:
    segments = {Segment.root()}
    for _ in range(depth):
        owner = next(s for s in segments if s.matches(value_hash))
        segments.remove(owner)
        segments.update(owner.split())
    assert Segment(value_hash & (2**depth - 1), 2**depth - 1) in segments
    assert_partition(sorted(segments), [value_hash])
    assert compute_segments(s.segment_id for s in segments) == sorted(segments)


@given(st.integers(min_value=1, max_value=300), hashes)
def test_initial_segments_partition_the_hash_space(count: int, value_hash: int) -> None:
    segments = initial_segments(count)
    assert len(segments) == count
    assert_partition(segments, [value_hash])


class SegmentSetMachine(RuleBasedStateMachine):
    """A processor's segments under any interleaving of splits and merges."""

    def __init__(self) -> None:
        super().__init__()
        self.segments: set[Segment] = {Segment.root()}

    def mergeable(self) -> list[Segment]:
        return sorted(s for s in self.segments if not s.is_root and s.sibling() in self.segments)

    @rule(pick=st.integers(min_value=0))
    def split(self, pick: int) -> None:
        splittable = sorted(s for s in self.segments if s.can_split)
        segment = splittable[pick % len(splittable)]
        first, second = segment.split()
        self.segments.remove(segment)
        self.segments.update((first, second))

    @precondition(lambda self: bool(self.mergeable()))
    @rule(pick=st.integers(min_value=0))
    def merge(self, pick: int) -> None:
        candidates = self.mergeable()
        segment = candidates[pick % len(candidates)]
        sibling = segment.sibling()
        self.segments -= {segment, sibling}
        self.segments.add(segment.merge(sibling))

    @rule(value_hash=hashes)
    def a_hash_has_one_owner(self, value_hash: int) -> None:
        assert sum(s.matches(value_hash) for s in self.segments) == 1

    @invariant()
    def segments_partition_the_hash_space(self) -> None:
        assert_partition(sorted(self.segments), [])

    @invariant()
    def the_ids_alone_rebuild_the_set(self) -> None:
        assert compute_segments(s.segment_id for s in self.segments) == sorted(self.segments)


TestSegmentSetMachine = SegmentSetMachine.TestCase
