"""Segments: the slices of stable_hash() space that tracking processor threads claim (Axon)."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from ordo import arguments
from ordo.errors import InvalidSegmentOperationError
from ordo.hashing import HASH_BITS

_FULL_MASK = (1 << HASH_BITS) - 1


@dataclass(frozen=True, slots=True, order=True)
class Segment:
    """The slice of stable_hash() space that one processor thread owns: Axon's `Segment`.

    A hash value belongs to the segment when `value_hash & mask == segment_id`. `mask` is
    always `2**k - 1` (its low `k` bits set) and `segment_id <= mask`, so a segment owns
    exactly `1 / 2**k` of the hash space. The root `(0, 0)` owns everything; `split()` halves a
    segment and `merge()` joins two siblings back into their parent. A set of segments reached
    from the root by splits and merges partitions the hash space: every hash value matches
    exactly one of them.

    Segments order by `(segment_id, mask)`, which is the segment id order within one set.
    Immutable, hashable and thread-safe.
    """

    segment_id: int
    mask: int

    ROOT: ClassVar[Segment]
    """The single segment (0, 0) that matches every hash value."""

    def __post_init__(self) -> None:
        for name in ("segment_id", "mask"):
            # True passed for 1 (Segment(True, 1) == Segment(1, 1)); a float or a text failed
            # later as a TypeError from a comparison or a shift, naming nothing.
            arguments.integer(getattr(self, name), name=name, error=InvalidSegmentOperationError)
        if not 0 <= self.mask <= _FULL_MASK or self.mask & (self.mask + 1):
            msg = (
                f"invalid segment {self.segment_id}/{self.mask}: mask must be 2**k - 1 "
                f"with k <= {HASH_BITS}"
            )
            raise InvalidSegmentOperationError(msg)
        if not 0 <= self.segment_id <= self.mask:
            msg = (
                f"invalid segment {self.segment_id}/{self.mask}: segment_id must be in "
                f"0..mask ({self.mask})"
            )
            raise InvalidSegmentOperationError(msg)

    def __str__(self) -> str:
        return f"Segment[{self.segment_id}/{self.mask}]"

    @classmethod
    def root(cls) -> Segment:
        """The segment (0, 0): a processor's only segment until it is split."""
        return cls.ROOT

    @property
    def depth(self) -> int:
        """How many splits separate this segment from the root: the number of mask bits."""
        return self.mask.bit_length()

    @property
    def is_root(self) -> bool:
        """True for (0, 0), which has no sibling and cannot be merged."""
        return self.mask == 0

    @property
    def can_split(self) -> bool:
        """False once the mask uses all HASH_BITS bits of the hash."""
        return self.mask != _FULL_MASK

    def matches(self, value_hash: int) -> bool:
        """True when this segment owns `value_hash` (a stable_hash() value)."""
        return value_hash & self.mask == self.segment_id

    def split(self) -> tuple[Segment, Segment]:
        """The two halves of this segment: (same id, id + mask + 1), both with one more mask bit.

        Raises:
            InvalidSegmentOperationError: the mask already uses all HASH_BITS bits.

        """
        if not self.can_split:
            msg = f"cannot split {self}: its mask already uses all {HASH_BITS} hash bits"
            raise InvalidSegmentOperationError(msg)
        mask = (self.mask << 1) | 1
        return Segment(self.segment_id, mask), Segment(self.segment_id + self.mask + 1, mask)

    def mergeable_segment_id(self) -> int:
        """The sibling's segment id: this id with the mask's highest bit flipped.

        Axon's `mergeableSegmentId()`; the root has no highest mask bit and returns its own id.
        """
        return self.segment_id ^ (self.mask ^ (self.mask >> 1))

    def sibling(self) -> Segment:
        """The segment this one was split together with, and may be merged with.

        Raises:
            InvalidSegmentOperationError: this is the root, which has no sibling.

        """
        if self.is_root:
            msg = f"{self} is the root segment and has no sibling"
            raise InvalidSegmentOperationError(msg)
        return Segment(self.mergeable_segment_id(), self.mask)

    def is_mergeable_with(self, other: Segment) -> bool:
        """True when `other` is this segment's sibling: same mask, ids differ in its top bit.

        Unlike Axon, the root is not mergeable with itself.
        """
        return (
            not self.is_root
            and other.mask == self.mask
            and other.segment_id == self.mergeable_segment_id()
        )

    def merge(self, other: Segment) -> Segment:
        """The parent of this segment and its sibling `other`: (min id, mask >> 1).

        Raises:
            InvalidSegmentOperationError: `other` is not this segment's sibling.

        """
        if not self.is_mergeable_with(other):
            msg = f"cannot merge {self} with {other}: they are not siblings"
            raise InvalidSegmentOperationError(msg)
        return Segment(min(self.segment_id, other.segment_id), self.mask >> 1)


Segment.ROOT = Segment(0, 0)


def compute_segments(segment_ids: Iterable[int]) -> list[Segment]:
    """Rebuild a processor's segments from the segment ids stored in its token store.

    Axon's `Segment.computeSegments`: only ids are stored, and the masks follow from them.
    Starting from the root, a segment is split while the id its split would create is
    present; the segments left unsplit are the answer, sorted by segment id. No id of a valid
    set lies inside a segment that is not split, so the result is exact. Called when a
    processor starts and after every split or merge. No ids gives no segments (a processor
    that has not been initialized; see `initial_segments`).

    Raises:
        InvalidSegmentOperationError: the ids are not the ids of a set of segments that
            partitions the hash space (id 0 missing, a duplicate, an id out of range, or an id
            no sequence of splits from the root creates), an id is not an int (a bool is not),
            or `segment_ids` is not a collection (None, a number, a text).

    """
    ids = [
        arguments.integer(segment_id, name="segment id", error=InvalidSegmentOperationError)
        for segment_id in arguments.collection(
            segment_ids, name="segment ids", error=InvalidSegmentOperationError
        )
    ]
    wanted = set(ids)
    if not wanted:
        return []
    problem = ""
    if len(wanted) != len(ids):
        duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
        problem = f"duplicate ids {duplicates}"
    elif 0 not in wanted:
        problem = "id 0 is missing"
    elif out_of_range := sorted(i for i in wanted if not 0 <= i <= _FULL_MASK):
        problem = f"ids {out_of_range} are outside 0..{_FULL_MASK}"
    if problem:
        msg = f"segment ids {sorted(wanted)} do not form a segment set: {problem}"
        raise InvalidSegmentOperationError(msg)

    found: list[Segment] = []
    pending = [Segment.ROOT]
    while pending:
        segment = pending.pop()
        if segment.can_split and segment.segment_id + segment.mask + 1 in wanted:
            pending.extend(segment.split())
        else:
            found.append(segment)
    if unplaced := wanted - {s.segment_id for s in found}:
        msg = (
            f"segment ids {sorted(wanted)} do not form a segment set: ids {sorted(unplaced)} "
            "are not created by splitting the segments of the other ids"
        )
        raise InvalidSegmentOperationError(msg)
    return sorted(found)


def initial_segments(count: int) -> list[Segment]:
    """The `count` segments a processor starts with (`initial_segment_count`), by segment id.

    Axon's `Segment.splitBalanced(ROOT_SEGMENT, count - 1)`: split the root `count - 1`
    times, always splitting the segment with the smallest mask, the lowest id first. The
    ids are 0..count-1; when `count` is not a power of two the lowest ids own smaller shares.

    Raises:
        InvalidSegmentOperationError: `count` is not an int, is below 1 or above 2**HASH_BITS.

    """
    arguments.integer(
        count,
        name="initial segment count",
        error=InvalidSegmentOperationError,
        minimum=1,
        maximum=1 << HASH_BITS,
    )
    heap = [(0, 0)]  # (mask, segment_id): the smallest mask, then the lowest id, first
    for _ in range(count - 1):
        mask, segment_id = heapq.heappop(heap)
        for half in Segment(segment_id, mask).split():
            heapq.heappush(heap, (half.mask, half.segment_id))
    return sorted(Segment(segment_id, mask) for mask, segment_id in heap)
