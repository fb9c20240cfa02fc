"""Segment math, example by example, against Axon's Segment (seed 002)."""

from __future__ import annotations

import pytest

from ordo.errors import InvalidInputError, InvalidSegmentOperationError
from ordo.hashing import HASH_BITS
from ordo.processing import Segment, compute_segments, initial_segments

FULL_MASK = 2**HASH_BITS - 1


def seg(text: str) -> Segment:
    """'2/3' -> Segment(2, 3)."""
    segment_id, mask = text.split("/")
    return Segment(int(segment_id), int(mask))


def segs(text: str) -> list[Segment]:
    return [seg(part) for part in text.split()]


def test_the_root_owns_every_hash() -> None:
    root = Segment.root()
    assert root == Segment.ROOT == Segment(0, 0)
    assert root.is_root
    assert root.depth == 0
    assert str(root) == "Segment[0/0]"
    assert all(root.matches(h) for h in (0, 1, 2**31, FULL_MASK))


def test_splitting_the_root_gives_the_even_and_the_odd_half() -> None:
    assert Segment.root().split() == (seg("0/1"), seg("1/1"))
    assert [s.segment_id for s in Segment.root().split() if s.matches(6)] == [0]
    assert [s.segment_id for s in Segment.root().split() if s.matches(7)] == [1]


@pytest.mark.parametrize(
    ("segment", "halves"),
    [
        ("0/1", "0/3 2/3"),
        ("1/1", "1/3 3/3"),
        ("2/3", "2/7 6/7"),
        ("3/3", "3/7 7/7"),
        ("5/7", "5/15 13/15"),
    ],
)
def test_a_split_keeps_the_id_and_adds_id_plus_mask_plus_one(segment: str, halves: str) -> None:
    first, second = seg(segment).split()
    assert [first, second] == segs(halves)
    assert first.depth == second.depth == seg(segment).depth + 1


def test_a_four_way_split_assigns_each_hash_by_its_two_low_bits() -> None:
    quarters = [*seg("0/1").split(), *seg("1/1").split()]
    assert sorted(quarters) == segs("0/3 1/3 2/3 3/3")
    for value_hash in range(64):
        owners = [s for s in quarters if s.matches(value_hash)]
        assert owners == [Segment(value_hash & 3, 3)]


def test_the_seed_example_value_is_owned_by_segment_2() -> None:
    value_hash = 0b011010
    assert [s.segment_id for s in segs("0/3 1/3 2/3 3/3") if s.matches(value_hash)] == [2]


@pytest.mark.parametrize(
    ("segment", "sibling_id"),
    [
        ("0/1", 1),
        ("1/1", 0),
        ("0/3", 2),
        ("2/3", 0),
        ("1/3", 3),
        ("3/3", 1),
        ("1/7", 5),
        ("5/7", 1),
        ("6/7", 2),
        ("13/15", 5),
        (f"0/{FULL_MASK}", 2**31),
    ],
)
def test_the_mergeable_id_flips_the_highest_mask_bit(segment: str, sibling_id: int) -> None:
    assert seg(segment).mergeable_segment_id() == sibling_id
    sibling = seg(segment).sibling()
    assert sibling == Segment(sibling_id, seg(segment).mask)
    assert seg(segment).is_mergeable_with(sibling)
    assert sibling.is_mergeable_with(seg(segment))


def test_the_root_has_no_sibling() -> None:
    assert Segment.root().mergeable_segment_id() == 0  # as Axon returns
    assert not Segment.root().is_mergeable_with(Segment.root())
    with pytest.raises(InvalidSegmentOperationError, match=r"Segment\[0/0\]"):
        Segment.root().sibling()


@pytest.mark.parametrize(
    ("first", "second", "parent"),
    [
        ("0/1", "1/1", "0/0"),
        ("1/1", "0/1", "0/0"),
        ("0/3", "2/3", "0/1"),
        ("3/3", "1/3", "1/1"),
        ("6/7", "2/7", "2/3"),
        ("13/15", "5/15", "5/7"),
    ],
)
def test_siblings_merge_into_their_parent(first: str, second: str, parent: str) -> None:
    assert seg(first).merge(seg(second)) == seg(parent)
    assert seg(parent).split() == tuple(sorted([seg(first), seg(second)]))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("0/3", "1/3"),  # same mask, ids differ in the low bit
        ("1/3", "2/3"),
        ("0/1", "2/3"),  # different masks
        ("0/3", "0/1"),
        ("2/3", "2/3"),  # itself
        ("0/0", "0/0"),  # the root
        ("1/7", "3/7"),
    ],
)
def test_merging_non_siblings_is_refused_naming_both(first: str, second: str) -> None:
    assert not seg(first).is_mergeable_with(seg(second))
    with pytest.raises(InvalidSegmentOperationError) as raised:
        seg(first).merge(seg(second))
    assert str(seg(first)) in str(raised.value)
    assert str(seg(second)) in str(raised.value)


def test_a_segment_splits_until_its_mask_has_32_bits() -> None:
    segment = Segment.root()
    for _ in range(HASH_BITS):
        segment = segment.split()[1]
    assert segment == Segment(FULL_MASK, FULL_MASK)
    assert segment.depth == HASH_BITS
    assert not segment.can_split
    with pytest.raises(InvalidSegmentOperationError, match=rf"Segment\[{FULL_MASK}/{FULL_MASK}\]"):
        segment.split()
    with pytest.raises(InvalidSegmentOperationError, match="32 hash bits"):
        Segment(0, FULL_MASK).split()


@pytest.mark.parametrize(
    ("segment_id", "mask"),
    [(0, 2), (0, 5), (0, 6), (4, 3), (-1, 1), (0, -1), (2, 1), (0, 2**33 - 1), (0, 2**HASH_BITS)],
)
def test_invalid_segments_cannot_be_built(segment_id: int, mask: int) -> None:
    with pytest.raises(InvalidSegmentOperationError, match=f"{segment_id}/{mask}"):
        Segment(segment_id, mask)


@pytest.mark.parametrize(
    ("segment_id", "mask", "named"),
    [(True, 1, "segment_id"), (1.0, 1, "segment_id"), ("0", 0, "segment_id"), (0, None, "mask")],
)
def test_segments_are_built_of_integers_only(segment_id: object, mask: object, named: str) -> None:
    """True passed for 1 and a float was kept; a string or None was a bare TypeError."""
    with pytest.raises(InvalidSegmentOperationError, match=f"{named} must be an integer"):
        Segment(segment_id, mask)  # type: ignore[arg-type]


@pytest.mark.parametrize("ids", [[0, True], [0, 1.0], [0, None]])
def test_compute_segments_refuses_ids_that_are_not_integers(ids: list[object]) -> None:
    with pytest.raises(InvalidSegmentOperationError, match="segment id must be an integer"):
        compute_segments(ids)  # type: ignore[arg-type]


@pytest.mark.parametrize("ids", [None, 5, "01", b"\x00"])
def test_compute_segments_refuses_what_is_not_a_collection_of_ids(ids: object) -> None:
    """None or 5 was a bare TypeError; a text was taken apart into characters."""
    with pytest.raises(
        InvalidSegmentOperationError, match=r"^segment ids must be a collection, got "
    ):
        compute_segments(ids)  # type: ignore[arg-type]


def test_a_segment_error_is_an_invalid_input() -> None:
    """The token store refuses a segment id that is no int as InvalidInputError: one except."""
    with pytest.raises(InvalidInputError):
        compute_segments([0, True])
    with pytest.raises(InvalidInputError):
        initial_segments(0)


def test_segments_order_by_id() -> None:
    assert sorted(segs("2/3 1/1 0/3")) == segs("0/3 1/1 2/3")
    assert isinstance(InvalidSegmentOperationError("x"), ValueError)


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ([0], "0/0"),
        ([0, 1], "0/1 1/1"),
        ([1, 0], "0/1 1/1"),
        ([0, 1, 2], "0/3 1/1 2/3"),
        ([0, 1, 3], "0/1 1/3 3/3"),
        ([3, 2, 1, 0], "0/3 1/3 2/3 3/3"),
        ([0, 1, 2, 3, 4], "0/7 1/3 2/3 3/3 4/7"),
        ([0, 1, 3, 5], "0/1 1/7 3/3 5/7"),
        ([0, 1, 2, 6], "0/3 1/1 2/7 6/7"),
        ([0, 1, 2, 4], "0/7 1/1 2/3 4/7"),
    ],
)
def test_compute_segments_rebuilds_the_masks(ids: list[int], expected: str) -> None:
    assert compute_segments(ids) == segs(expected)


def test_compute_segments_follows_a_lineage_down_to_32_bits() -> None:
    ids = [0] + [2**k for k in range(HASH_BITS)]
    expected = [Segment(0, FULL_MASK)] + [Segment(2**k, 2 ** (k + 1) - 1) for k in range(HASH_BITS)]
    assert compute_segments(ids) == sorted(expected)


def test_compute_segments_round_trips_any_split_history() -> None:
    segments = [Segment.root()]
    for pick in [0, 1, 1, 3, 0, 5, 2, 7, 7, 4]:
        segments.extend(segments.pop(pick % len(segments)).split())
    assert compute_segments(s.segment_id for s in segments) == sorted(segments)


def test_compute_segments_of_nothing_is_nothing() -> None:
    assert compute_segments([]) == []


@pytest.mark.parametrize(
    ("ids", "problem"),
    [
        ([1], "id 0 is missing"),
        ([1, 2, 3], "id 0 is missing"),
        ([0, 2], r"ids \[2\] are not created"),
        ([0, 1, 5], r"ids \[5\] are not created"),
        ([0, 1, 2, 5], r"ids \[5\] are not created"),
        ([0, 0, 1], r"duplicate ids \[0\]"),
        ([0, -1], "outside"),
        ([0, 2**HASH_BITS], "outside"),
    ],
)
def test_ids_that_do_not_partition_the_space_are_refused(ids: list[int], problem: str) -> None:
    with pytest.raises(InvalidSegmentOperationError, match=problem):
        compute_segments(ids)


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (1, "0/0"),
        (2, "0/1 1/1"),
        (3, "0/3 1/1 2/3"),
        (4, "0/3 1/3 2/3 3/3"),
        (5, "0/7 1/3 2/3 3/3 4/7"),
        (6, "0/7 1/7 2/3 3/3 4/7 5/7"),
        (7, "0/7 1/7 2/7 3/3 4/7 5/7 6/7"),
        (8, "0/7 1/7 2/7 3/7 4/7 5/7 6/7 7/7"),
    ],
)
def test_initial_segments_split_the_root_balanced_like_axon(count: int, expected: str) -> None:
    assert initial_segments(count) == segs(expected)


@pytest.mark.parametrize("count", range(1, 70))
def test_initial_segment_ids_are_dense_and_rebuild_from_their_ids(count: int) -> None:
    segments = initial_segments(count)
    assert [s.segment_id for s in segments] == list(range(count))
    assert compute_segments(range(count)) == segments
    assert max(s.depth for s in segments) - min(s.depth for s in segments) <= 1


@pytest.mark.parametrize("count", [0, -1, 2**HASH_BITS + 1, True, 2.0, "2"])
def test_initial_segment_count_must_be_possible(count: int) -> None:
    """True made one segment; 2.0 and "2" failed as a TypeError naming nothing."""
    with pytest.raises(InvalidSegmentOperationError, match=str(count)):
        initial_segments(count)
