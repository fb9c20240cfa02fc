"""The contiguous acker: which offset may be committed when elements complete out of order."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from math import inf
from operator import index
from typing import Final, SupportsIndex, cast

from ordo import arguments
from ordo.arguments import INT64_MAX, INT64_MIN
from ordo.errors import InvalidInputError
from ordo.settings.loading import integer_in

_AFTER_EVERY_OFFSET: Final = cast(int, inf)
"""Sentinel start after the last far interval, so no lookup checks the list's length.

Float infinity compares greater than every int (exactly, however large the int), and the
sentinels are only ever compared, never returned or used in arithmetic, hence the casts.
"""
_BEFORE_EVERY_OFFSET: Final = cast(int, -inf)
"""Sentinel end before the first far interval: the mirror of `_AFTER_EVERY_OFFSET`."""

_FIRST_SPAN: Final = 1024
"""Slots of a new acker's ring: a window of about a thousand elements in flight fits."""


def _as_int(offset: object) -> int:
    """`offset` as an int, or InvalidInputError unless it is an integer (`operator.index`).

    Integers other than int (NumPy's) are taken, but converted before any arithmetic: theirs
    is fixed-width and wraps, so an old np.uint64 offset minus `committed` came out as a huge
    distance and marked a future offset done.
    """
    try:
        return index(cast(SupportsIndex, offset))
    except TypeError as exc:
        msg = f"offset must be an integer, got {type(offset).__name__}: {offset!r:.80}"
        raise InvalidInputError(msg) from exc


def _require_int64(offset: int) -> None:
    """InvalidInputError unless `offset` is in -2**63..2**63-1.

    The range of `committed`, and of the positions both backends store: the acker would
    otherwise commit a position no store can hold.
    """
    arguments.integer(offset, name="offset", error=InvalidInputError)


class ContiguousAcker:
    """Accepts completions in any order and tells which offset may be committed.

    Offsets are dense integers in input order. `committed` is an inclusive position: the last
    offset that is done together with every offset before it. Called by
    `process_in_parallel`'s workers each time a handler finishes, and by anything else that
    processes a stream's elements out of order but must commit a position that never skips an
    unprocessed element. Duplicates and offsets at or below `committed` are ignored. Not
    thread-safe: call it from one thread (or one event loop).

    Data structure, in two tiers:

    - A ring of bytes over the offsets just above `committed`: the slot of offset `o` is
      `o & (span - 1)` and holds 1 once `o` is done. Marking a completion is one store, a
      duplicate stores the same 1 again, and when `committed + 1` completes, `committed` moves
      over the whole run of done slots after it with one `bytearray.find(0)` and clears them
      with one slice assignment, both in C. The slot of `committed + 1` is always 0 (otherwise
      `committed` would be further on), so the search always stops within one lap. The ring
      starts with 1,024 slots and doubles (up to `max_span`) when a completion lands further
      ahead, so its size follows how far completions run ahead of the oldest unfinished
      element, not how many elements there are.
    - Completions even further ahead, beyond `max_span`, are kept as disjoint closed intervals
      in one flat sorted list `[-inf, start_1, end_1, ..., +inf]`, so one element stuck for a
      long time with millions of completions behind it costs one ring and a few intervals,
      not a million entries. One `bisect_right` tells whether an offset falls in a gap (odd
      index) or inside an interval (even index: a duplicate), and the offset then extends an
      interval, joins two or opens one. When `committed` moves, the intervals that come
      within the ring's reach are moved into it.

    Seed 004 keeps a heap of done offsets; its "possible improvements" section proposes
    storing ranges instead. bench/acker.py compares speed and peak memory with the heap: the
    ring marks a completion with fewer bytecodes than a heap push and advances over a run in
    C instead of one pop per offset, and a byte per slot is smaller than a heap entry.

    Rejected alternatives:

    - A heap of done offsets, popped while its top is `committed + 1` (seed 004's priority
      queue): one entry per done-but-not-committable element, and a duplicate ack stays on
      the heap below `committed + 1` and blocks every later pop unless filtered out first.
    - Intervals alone (a previous version of this class): memory per gap, the best there is,
      but a bisect and several list lookups per ack made it slower than the heap.
    - Two dicts, start -> end and end -> start: every merge is O(1), but a duplicate strictly
      inside an interval touches neither dict and would open an overlapping interval.
    """

    __slots__ = ("_committed", "_done", "_far", "_mask", "_max_span", "_reach", "_top", "_zeros")

    def __init__(self, *, committed: int = -1, max_span: int = 1 << 20) -> None:
        """Start after `committed`; `max_span` bounds the ring (rounded up to a power of two).

        Both are checked here in full, acks only as far as it costs them nothing (see `ack`):
        a float `committed` was kept and never advanced, and True was taken for 1.

        Raises:
            InvalidInputError: `committed` is not an int (a bool is not) in -2**63..2**63-1:
                it is an offset, as `ack`'s are, and positions are stored as 64-bit integers.
            ConfigurationError: `max_span` is not an int of at least 2.

        """
        arguments.integer(committed, name="committed", error=InvalidInputError)
        integer_in("max_span", max_span, 2)
        self._committed = committed
        self._max_span = 1 << (max_span - 1).bit_length()
        span = min(_FIRST_SPAN, self._max_span)
        self._done = bytearray(span)
        self._zeros = memoryview(bytes(span))
        self._mask = span - 1
        self._far: list[int] = [_BEFORE_EVERY_OFFSET, _AFTER_EVERY_OFFSET]
        self._bound_reach()

    @property
    def committed(self) -> int:
        """The last offset done together with every earlier one (inclusive position)."""
        return self._committed

    @property
    def pending_intervals(self) -> int:
        """How many disjoint runs of done offsets lie above `committed` (a diagnostic)."""
        slots = self._slots()
        far = self._far
        joined = slots[-2:-1] == b"\x01" and far[1] == self._committed + len(slots)
        return (b"\x00" + slots).count(b"\x00\x01") + (len(far) - 2) // 2 - joined

    def ack(self, offset: int) -> int:
        """Mark `offset` done and return `committed` (inclusive position).

        InvalidInputError, and nothing changes, unless `offset` is an integer (an int, or a
        type with `__index__`) in -2**63..2**63-1 (as `committed`). Unchecked, 1.5 beyond the
        ring's reach was kept among the far intervals and every later ack that reached it
        failed with a TypeError, float infinity was dropped, None, a string or a float failed
        as a TypeError naming no argument, and 2**63 was kept. An offset that is not exactly
        an int (a bool is taken for 0 or 1, NumPy's integers for their value) is converted
        first: checking the type costs about 5% of an ack (bench/acker.py), and checking less
        let NumPy's wrapping arithmetic through (np.uint64(5) with `committed` at 100 came out
        a distance of 2**64 - 95, and ring slot 5 then marked offset 1029 done; an np.int32
        made `committed` an np.int32 that overflowed at 2**31). Only the rarer paths (offsets
        at or below `committed`, beyond `_reach`) check the range: comparing every offset with
        2**63-1 took about 7% (the bound is no small int for CPython).
        """
        if offset.__class__ is not int:  # a bool, NumPy's integers, or no integer at all
            offset = _as_int(offset)
        committed = self._committed
        distance = offset - committed
        if distance <= 0:
            if offset < INT64_MIN:
                _require_int64(offset)
            return committed
        if distance > self._reach and not self._admit(distance, offset):
            self._add_far(offset)
            return committed
        if distance != 1:
            self._done[offset & self._mask] = 1
            return committed
        committed = self._advance(offset)
        if self._far[1] <= committed + self._mask:
            committed = self._take_far(committed)
        return committed

    def _advance(self, offset: int) -> int:
        """`offset` (= committed + 1) is done: move `committed` to the end of its run."""
        done = self._done
        start = (offset + 1) & self._mask
        end = done.find(0, start)
        if end >= 0:
            done[start:end] = self._zeros[: end - start]
            committed = offset + end - start
        else:  # the run wraps around the ring's end
            end = done.find(0)
            done[start:] = self._zeros[start:]
            done[:end] = self._zeros[:end]
            committed = offset + len(done) - start + end
        self._committed = committed
        if committed > self._top:  # the ring now reaches offsets beyond 2**63-1
            self._reach = 0
        return committed

    def _bound_reach(self) -> None:
        """Set `_reach`, how far ahead an ack may go into the ring unchecked, for a new `_mask`.

        The ring holds offsets up to `committed + _mask`: while that is at most 2**63-1 every
        offset in it is one a store holds, and `_reach` is `_mask`. Past `_top` (only for a
        `committed` within `max_span` of 2**63, which counting never reaches) it is 0, so
        that every ack is checked by `_admit`; `_advance` sets it so when `committed` gets
        there, which costs it one comparison.
        """
        self._top = INT64_MAX - self._mask
        self._reach = self._mask if self._committed <= self._top else 0

    def _admit(self, distance: int, offset: int) -> bool:
        """Whether `offset` (at `distance`, beyond `_reach`) goes into the ring, or else far.

        Checks `offset`'s range first (InvalidInputError), then widens the ring when it is
        beyond the ring's reach (`_widen`).
        """
        if offset > INT64_MAX:
            _require_int64(offset)
        return distance <= self._mask or self._widen(distance)

    def _widen(self, distance: int) -> bool:
        """Double the ring until `distance` fits, if `max_span` allows; keep every slot.

        False, and nothing changes, when it may not: the offset goes to the far intervals.
        """
        if distance >= self._max_span:
            return False
        committed, slots = self._committed, self._slots()
        span = 1 << distance.bit_length()
        start = (committed + 1) & (span - 1)
        head = min(len(slots), span - start)
        done = bytearray(span)
        done[start : start + head] = slots[:head]
        done[: len(slots) - head] = slots[head:]
        self._done, self._zeros, self._mask = done, memoryview(bytes(span)), span - 1
        self._bound_reach()
        if self._far[1] <= committed + self._mask:
            self._take_far(committed)
        return True

    def _add_far(self, offset: int) -> None:
        """Record a done offset beyond the ring's reach in the interval list."""
        far = self._far
        i = bisect_right(far, offset)
        if i & 1:  # far[i - 1] <= offset < far[i]: an end, then the next start
            previous_end = far[i - 1]
            if previous_end + 1 == offset:
                if offset + 1 == far[i]:
                    del far[i - 1 : i + 1]  # offset joins the intervals on both sides
                else:
                    far[i - 1] = offset
            elif offset + 1 == far[i]:
                far[i] = offset
            elif previous_end != offset:
                far[i:i] = (offset, offset)

    def _take_far(self, committed: int) -> int:
        """Move the far intervals now within the ring's reach into it, advancing over them."""
        far, done, mask = self._far, self._done, self._mask
        while far[1] <= committed + mask:
            start, end = far[1], far[2]
            last = min(end, committed + mask)  # the furthest offset the ring can hold
            if last == end:
                del far[1:3]
            else:
                far[1] = last + 1
            slot, count = start & mask, last - start + 1
            head = min(count, mask + 1 - slot)
            done[slot : slot + head] = b"\x01" * head
            done[: count - head] = b"\x01" * (count - head)
            if start == committed + 1:
                done[start & mask] = 0
                committed = self._advance(start)
        return committed

    def _pending(self) -> Iterator[tuple[int, int]]:
        """The runs of done offsets above `committed`, in order, as (first, last) pairs."""
        committed, slots = self._committed, self._slots()
        runs: list[tuple[int, int]] = []
        begin = slots.find(1)
        while begin >= 0:
            stop = slots.find(0, begin)
            runs.append((committed + 1 + begin, committed + stop))
            begin = slots.find(1, stop)
        far = self._far
        for i in range(1, len(far) - 1, 2):
            if runs and runs[-1][1] + 1 == far[i]:
                runs[-1] = (runs[-1][0], far[i + 1])
            else:
                runs.append((far[i], far[i + 1]))
        return iter(runs)

    def _slots(self) -> bytes:
        """The ring in offset order: item k is offset `committed + 1 + k` (the last is 0)."""
        done, first = self._done, (self._committed + 1) & self._mask
        return bytes(done[first:] + done[:first])

    def __repr__(self) -> str:
        intervals = ", ".join(f"{first}..{last}" for first, last in self._pending())
        return f"ContiguousAcker(committed={self._committed}, pending=[{intervals}])"
