"""The contiguous acker: which offset may be committed when elements complete out of order."""

from __future__ import annotations

from bisect import bisect_right
from math import inf
from typing import Final, cast

_AFTER_EVERY_OFFSET: Final = cast(int, inf)
"""Sentinel start after the last pending interval, so `ack` never checks the list's length.

Float infinity compares greater than every int (exactly, however large the int), and the
sentinel is only ever compared, never returned or used in arithmetic, hence the cast to int.
"""


class ContiguousAcker:
    """Accepts completions in any order and tells which offset may be committed.

    Offsets are dense integers in input order. `committed` is an inclusive position: the last
    offset that is done together with every offset before it. Completions above it that cannot
    be committed yet are kept as disjoint closed intervals of done offsets, so memory is
    proportional to the number of gaps (`pending_intervals`), not to the number of elements:
    one stuck element with a million completions behind it costs one interval, not a million
    entries. Seed 004's "possible improvements" section proposes exactly this.

    Called by `process_in_parallel`'s workers each time a handler finishes, and by anything
    else that processes a stream's elements out of order but must commit a position that never
    skips an unprocessed element. Not thread-safe: call it from one thread (or one event loop).

    Data structure: one flat sorted list
    `[committed, start_1, end_1, start_2, end_2, ..., +inf]` (ends inclusive). The committed
    prefix is folded in as the first "end", so advancing `committed` is just one more merge
    with the interval before it, with no special case. One `bisect_right` (in C) answers both
    questions an ack asks: an odd index means the offset lies in the gap between `bounds[i-1]`
    (an end) and `bounds[i]` (a start), so it is new unless it equals that end; an even index
    means it lies inside an interval or at or before `committed`, so it is a duplicate. The
    offset then extends the interval on its left, the one on its right, joins both (deleting
    two slots) or opens a new one (inserting two). That costs O(log k) comparisons plus a C
    `memmove` of at most 2k pointers for k pending intervals; with a window of ~1000 in-flight
    elements k stays in the low hundreds and the move is at most a few kilobytes. The list
    holds the caller's own offset objects, so it allocates no ints: 16 bytes per interval.
    bench/acker.py compares speed and peak memory with the heap below.

    Rejected alternatives:

    - A heap of done offsets, popped while its top is `committed + 1` (seed 004's priority
      queue): one entry per done-but-not-committable element, so memory grows with the
      elements, not the gaps; and a duplicate ack stays on the heap below `committed + 1`
      and blocks every later pop unless it is filtered out first.
    - Two dicts, start -> end and end -> start: every merge is O(1), but a duplicate strictly
      inside an interval touches neither dict and would open an overlapping interval; telling
      it from a new offset needs an ordered index anyway (or a set of every done offset, which
      brings back memory per element).
    """

    __slots__ = ("_bounds",)

    def __init__(self, *, committed: int = -1) -> None:
        self._bounds: list[int] = [committed, _AFTER_EVERY_OFFSET]

    @property
    def committed(self) -> int:
        """The last offset done together with every earlier one (inclusive position)."""
        return self._bounds[0]

    @property
    def pending_intervals(self) -> int:
        """How many disjoint runs of done offsets above `committed`; memory grows with this."""
        return (len(self._bounds) - 2) >> 1

    def ack(self, offset: int) -> int:
        """Mark `offset` done and return `committed` (inclusive position).

        Duplicates and offsets at or below `committed` are ignored.
        """
        bounds = self._bounds
        i = bisect_right(bounds, offset)
        if i & 1:  # bounds[i - 1] <= offset < bounds[i]: an end, then the next start
            previous_end = bounds[i - 1]
            if previous_end + 1 == offset:
                if offset + 1 == bounds[i]:
                    del bounds[i - 1 : i + 1]  # offset joins the intervals on both sides
                else:
                    bounds[i - 1] = offset
            elif offset + 1 == bounds[i]:
                bounds[i] = offset
            elif previous_end != offset:
                bounds[i:i] = (offset, offset)
        return bounds[0]

    def __repr__(self) -> str:
        bounds = self._bounds
        intervals = ", ".join(f"{bounds[i]}..{bounds[i + 1]}" for i in range(1, len(bounds) - 1, 2))
        return f"ContiguousAcker(committed={bounds[0]}, pending=[{intervals}])"
