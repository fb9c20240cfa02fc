from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

from ordo.acking import ContiguousAcker
from ordo.errors import ConfigurationError, InvalidInputError


def test_a_new_acker_has_committed_nothing() -> None:
    acker = ContiguousAcker()
    assert acker.committed == -1
    assert acker.pending_intervals == 0


def test_acks_in_order_commit_each_offset() -> None:
    acker = ContiguousAcker()
    assert [acker.ack(offset) for offset in range(5)] == [0, 1, 2, 3, 4]
    assert acker.pending_intervals == 0


def test_acks_in_reverse_commit_only_at_the_end() -> None:
    acker = ContiguousAcker()
    assert [acker.ack(offset) for offset in (4, 3, 2, 1)] == [-1, -1, -1, -1]
    assert acker.pending_intervals == 1
    assert acker.ack(0) == 4
    assert acker.pending_intervals == 0


def test_a_gap_holds_back_everything_after_it() -> None:
    acker = ContiguousAcker()
    for offset in (0, 1, 3, 4, 6):
        acker.ack(offset)
    assert acker.committed == 1
    assert acker.pending_intervals == 2
    assert acker.ack(2) == 4
    assert acker.pending_intervals == 1
    assert acker.ack(5) == 6
    assert acker.pending_intervals == 0


def test_an_offset_between_two_intervals_joins_them() -> None:
    acker = ContiguousAcker()
    for offset in (2, 3, 5, 6):
        acker.ack(offset)
    assert acker.pending_intervals == 2
    acker.ack(4)
    assert acker.pending_intervals == 1
    assert repr(acker) == "ContiguousAcker(committed=-1, pending=[2..6])"


@pytest.mark.parametrize("duplicate", [2, 3, 4, 7])
def test_duplicates_anywhere_in_an_interval_are_ignored(duplicate: int) -> None:
    acker = ContiguousAcker()
    for offset in (2, 3, 4, 7):
        acker.ack(offset)
    acker.ack(duplicate)
    assert acker.pending_intervals == 2
    assert repr(acker) == "ContiguousAcker(committed=-1, pending=[2..4, 7..7])"
    assert [acker.ack(offset) for offset in (0, 1, 5, 6)] == [0, 4, 5, 7]
    assert acker.pending_intervals == 0


def test_duplicates_at_or_below_committed_are_ignored() -> None:
    acker = ContiguousAcker()
    for offset in (0, 1, 2):
        acker.ack(offset)
    assert acker.ack(1) == 2
    assert acker.ack(2) == 2
    assert acker.ack(-7) == 2
    assert acker.pending_intervals == 0
    assert acker.ack(3) == 3


def test_an_initial_committed_is_the_offset_before_the_first_element() -> None:
    acker = ContiguousAcker(committed=99)
    assert acker.committed == 99
    assert acker.ack(50) == 99
    assert acker.ack(101) == 99
    assert acker.ack(100) == 101


def test_offsets_far_apart_and_huge_stay_separate_intervals() -> None:
    acker = ContiguousAcker()
    huge = 2**63 - 3
    for offset in (huge, 10, huge + 2, 5):
        acker.ack(offset)
    assert acker.pending_intervals == 4
    acker.ack(huge + 1)
    assert acker.pending_intervals == 3
    assert acker.committed == -1


@pytest.mark.parametrize(
    ("offset", "problem"),
    [
        (2**63, r"is too large: at most 9223372036854775807 \(2\*\*63 - 1\), got 9\d+"),
        (2**80, r"is too large: at most 9223372036854775807 \(2\*\*63 - 1\), got 1\d+"),
        (-(2**63) - 1, r"must be an integer >= -9223372036854775808 \(-2\*\*63\), got -9\d+"),
    ],
)
def test_an_offset_beyond_64_bits_is_refused_and_changes_nothing(offset: int, problem: str) -> None:
    """Offsets are stored as 64-bit integers, as `committed` is checked: 2**63 was kept."""
    acker = ContiguousAcker()
    acker.ack(1)
    with pytest.raises(InvalidInputError, match=f"^offset {problem}$"):
        acker.ack(offset)
    assert repr(acker) == "ContiguousAcker(committed=-1, pending=[1..1])"


@pytest.mark.parametrize("committed", [2**63 - 1, 2**63 - 2])
def test_an_offset_beyond_64_bits_is_refused_in_the_ring_too(committed: int) -> None:
    """Near the top, 2**63 is within the ring's reach (or the next offset): it was committed."""
    acker = ContiguousAcker(committed=committed)
    with pytest.raises(InvalidInputError, match=r"^offset is too large"):
        acker.ack(2**63)
    assert acker.ack(2**63 - 1) == 2**63 - 1


def test_an_offset_beyond_64_bits_is_refused_once_committed_nears_the_top() -> None:
    """The ring (1,024 slots) reaches 2**63 only after these acks move `committed` on."""
    start = 2**63 - 1100
    acker = ContiguousAcker(committed=start)
    for offset in range(start + 1, 2**63 - 1000):
        acker.ack(offset)
    with pytest.raises(InvalidInputError, match=r"^offset is too large"):
        acker.ack(2**63)
    assert acker.committed == 2**63 - 1001


def test_the_64_bit_bounds_themselves_are_offsets() -> None:
    acker = ContiguousAcker(committed=-(2**63))
    assert acker.ack(-(2**63)) == -(2**63)  # at committed: ignored, not refused
    acker.ack(2**63 - 1)
    assert (
        repr(acker) == f"ContiguousAcker(committed={-(2**63)}, pending=[{2**63 - 1}..{2**63 - 1}])"
    )


def test_memory_behind_a_stuck_element_is_bounded_by_max_span() -> None:
    tracemalloc.start()
    try:
        acker = ContiguousAcker(max_span=4096)
        for offset in range(1, 200_001):
            acker.ack(offset)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024  # a 4 KiB ring, its zeros and one interval; not 200k entries
    assert acker.pending_intervals == 1
    assert acker.ack(0) == 200_000
    assert acker.pending_intervals == 0


def test_runs_across_the_ring_and_the_far_intervals_read_as_one() -> None:
    acker = ContiguousAcker(max_span=8)
    for offset in (3, 4, 5, 6, 7, 8, 9, 20):
        acker.ack(offset)
    assert repr(acker) == "ContiguousAcker(committed=-1, pending=[3..9, 20..20])"
    assert acker.pending_intervals == 2
    assert [acker.ack(offset) for offset in (1, 2, 0)] == [-1, -1, 9]
    assert repr(acker) == "ContiguousAcker(committed=9, pending=[20..20])"


def test_a_completion_far_ahead_widens_the_ring_and_keeps_every_slot() -> None:
    acker = ContiguousAcker()
    for offset in (5, 1000, 1023, 5000):
        acker.ack(offset)
    assert repr(acker) == (
        "ContiguousAcker(committed=-1, pending=[5..5, 1000..1000, 1023..1023, 5000..5000])"
    )
    assert [acker.ack(offset) for offset in range(5)] == [0, 1, 2, 3, 5]


def test_max_span_below_two_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="max_span must be an integer >= 2, got 1"):
        ContiguousAcker(max_span=1)


@pytest.mark.parametrize("max_span", [2.5, "8", True])
def test_a_max_span_that_is_not_an_integer_is_rejected(max_span: object) -> None:
    """A bad max_span was a bare TypeError."""
    with pytest.raises(ConfigurationError, match="max_span must be an integer"):
        ContiguousAcker(max_span=max_span)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("committed", "problem"),
    [
        (1.5, "must be an integer, got 1.5"),
        (True, "must be an integer, got True"),
        (None, "must be an integer, got None"),
        (
            2**63,
            r"is too large: at most 9223372036854775807 \(2\*\*63 - 1\), got 9\d+",
        ),
    ],
)
def test_a_committed_offset_is_refused_as_an_ack_is(committed: object, problem: str) -> None:
    """`committed` is an offset: refused with ack's InvalidInputError, not ConfigurationError.

    A committed of 1.5 was kept and never advanced; True was taken for 1.
    """
    with pytest.raises(InvalidInputError, match=f"^committed {problem}$"):
        ContiguousAcker(committed=committed)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "offset", [None, "1", 0.0, 1.0, 5.0, 2_000.5, 2_000_000.5, -0.5, float("nan"), float("inf")]
)
def test_an_offset_that_is_not_an_integer_is_refused_and_changes_nothing(offset: object) -> None:
    """Near ones were a bare TypeError; 2,000,000.5 was kept among the far intervals.

    There it made every later ack that reached it fail; infinity was dropped, -0.5 ignored.
    """
    acker = ContiguousAcker(max_span=1 << 20)
    acker.ack(1)
    with pytest.raises(InvalidInputError, match=r"^offset must be an integer, got "):
        acker.ack(offset)  # type: ignore[arg-type]
    assert repr(acker) == "ContiguousAcker(committed=-1, pending=[1..1])"
    assert acker.ack(0) == 1


def test_a_far_offset_that_is_not_an_integer_does_not_break_later_acks() -> None:
    acker = ContiguousAcker(max_span=4)
    with pytest.raises(InvalidInputError, match=r"got float: 10\.5"):
        acker.ack(10.5)  # type: ignore[arg-type]
    assert [acker.ack(offset) for offset in range(13)] == list(range(13))


def test_an_old_numpy_unsigned_offset_marks_no_future_offset_done() -> None:
    """np.uint64(5) - 100 wrapped to 2**64 - 95: 5 went to the far intervals below committed.

    The next advance put it in ring slot 5, which then stood for offset 1029, and `committed`
    passed 1029 although it was never acked.
    """
    acker = ContiguousAcker(committed=100)
    assert acker.ack(np.uint64(5)) == 100  # type: ignore[arg-type]
    assert repr(acker) == "ContiguousAcker(committed=100, pending=[])"
    for offset in range(101, 1029):
        acker.ack(offset)
    assert acker.committed == 1028
    assert acker.ack(1029) == 1029


@pytest.mark.parametrize("kind", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_numpy_offsets_are_taken_for_their_values(kind: type[np.integer[Any]]) -> None:
    """An np.int32 made `committed` an np.int32 (which failed past 2**31); the others failed.

    np.int8, np.uint8 and np.uint64 raised OverflowError on their arithmetic with the ring's
    mask or with committed -1.
    """
    acker = ContiguousAcker(committed=-1)
    assert [acker.ack(kind(offset)) for offset in (1, 0, 2)] == [-1, 1, 2]  # type: ignore[arg-type]
    assert type(acker.committed) is int
    assert acker.ack(2**40) == 2
    assert repr(acker) == f"ContiguousAcker(committed=2, pending=[{2**40}..{2**40}])"
