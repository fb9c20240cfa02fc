from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordo.acking import ContiguousAcker
from ordo.errors import InvalidInputError

_LARGEST = 2**63 - 1


def _longest_prefix_end(done: set[int], committed: int) -> int:
    while committed + 1 in done:
        committed += 1
    return committed


def _runs_above(done: set[int], committed: int) -> int:
    """Maximal runs of consecutive done offsets above `committed`."""
    above = {offset for offset in done if offset > committed}
    return sum(1 for offset in above if offset - 1 not in above)


@st.composite
def _acks(draw: st.DrawFn) -> tuple[int, list[int]]:
    """An initial committed and completions of some offsets, with duplicates, in any order.

    Offsets never drawn are elements that never complete (failed or still running); a few
    completions lie at or below the initial committed.
    """
    committed = draw(st.integers(min_value=-3, max_value=1000))
    count = draw(st.integers(min_value=0, max_value=60))
    offsets = range(committed - 3, committed + 1 + count)
    completed = draw(st.lists(st.sampled_from(offsets), max_size=120)) if count else []
    duplicates = draw(st.lists(st.sampled_from(completed), max_size=20)) if completed else []
    order = draw(st.permutations(completed + duplicates))
    return committed, order


@settings(max_examples=500, deadline=None)
@given(_acks(), st.sampled_from([2, 4, 16, 1 << 20]))
def test_committed_is_the_end_of_the_longest_acked_prefix(
    case: tuple[int, list[int]], max_span: int
) -> None:
    """Small spans send most completions to the far intervals and back into the ring."""
    start, order = case
    acker = ContiguousAcker(committed=start, max_span=max_span)
    done: set[int] = set()
    for offset in order:
        done.add(offset)
        expected = _longest_prefix_end(done, start)
        assert acker.ack(offset) == expected
        assert acker.committed == expected
        assert acker.pending_intervals == _runs_above(done, expected)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=_LARGEST - 40, max_value=_LARGEST),
    st.lists(st.integers(min_value=_LARGEST - 45, max_value=_LARGEST + 5), max_size=60),
    st.sampled_from([2, 4, 16, 1 << 20]),
)
def test_near_the_top_offsets_beyond_64_bits_are_refused_and_change_nothing(
    start: int, order: list[int], max_span: int
) -> None:
    """Wherever 2**63 lies: in the ring, among the far intervals, or the next offset."""
    acker = ContiguousAcker(committed=start, max_span=max_span)
    done: set[int] = set()
    for offset in order:
        if offset > _LARGEST:
            with pytest.raises(InvalidInputError, match=r"^offset is too large"):
                acker.ack(offset)
        else:
            done.add(offset)
            assert acker.ack(offset) == _longest_prefix_end(done, start)
        expected = _longest_prefix_end(done, start)
        assert acker.committed == expected
        assert acker.pending_intervals == _runs_above(done, expected)


@settings(max_examples=100, deadline=None)
@given(
    st.permutations(range(200)),
    st.integers(min_value=0, max_value=199),
    st.sampled_from([8, 64, 1 << 20]),
)
def test_all_offsets_but_one_leave_at_most_one_gap(
    order: list[int], missing: int, max_span: int
) -> None:
    acker = ContiguousAcker(max_span=max_span)
    for offset in order:
        if offset != missing:
            acker.ack(offset)
    assert acker.committed == missing - 1
    assert acker.pending_intervals == (1 if missing < 199 else 0)
    assert acker.ack(missing) == 199


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=-3, max_value=10**6),
    st.integers(min_value=1500, max_value=12_000),
    st.integers(min_value=0, max_value=2**32),
    st.sampled_from([2048, 4096, 8192]),
)
def test_a_ring_that_grows_keeps_every_completion(
    start: int, length: int, seed: int, max_span: int
) -> None:
    """Completions spread further than the first ring's 1024 slots, in any order.

    The other properties never widen the ring (their spans are at most 16 slots, or their
    offsets lie within the first ring): here the ring doubles with completions in it, the
    offsets beyond `max_span` go to the far intervals, and they come back into the ring. The
    order is drawn from a seed: thousands of draws from Hypothesis exceed its input size.
    """
    rnd = random.Random(seed)
    offsets = range(start + 1, start + 1 + length)
    missing = set(rnd.sample(offsets, k=rnd.randint(1, 5)))
    order = [offset for offset in offsets if offset not in missing]
    rnd.shuffle(order)
    acker = ContiguousAcker(committed=start, max_span=max_span)
    done: set[int] = set()
    expected = start
    for offset in order:
        done.add(offset)
        expected = _longest_prefix_end(done, expected)
        assert acker.ack(offset) == expected
    assert acker.pending_intervals == _runs_above(done, expected)
    for offset in sorted(missing, key=lambda _: rnd.random()):
        done.add(offset)
        assert acker.ack(offset) == _longest_prefix_end(done, start)
    assert acker.committed == start + length
    assert acker.pending_intervals == 0
