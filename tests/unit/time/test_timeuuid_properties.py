from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from ordo.clock import ManualClock
from ordo.time import GREGORIAN_OFFSET_100NS, TimeUUID, TimeUUIDGenerator

# Every clock reading a TimeUUID can hold: 1582-10-15T00:00Z .. 5236-03-31T21:21Z.
EARLIEST_NS = -GREGORIAN_OFFSET_100NS * 100
LATEST_NS = (2**60 - 1 - GREGORIAN_OFFSET_100NS) * 100 + 99
epoch_ns = st.integers(min_value=EARLIEST_NS, max_value=LATEST_NS)
# Plausible writer clocks, 1583 to 5000, leaving the generator room to step past a burst.
plausible_ns = st.integers(min_value=-12_212_553_600 * 10**9, max_value=95_617_584_000 * 10**9)
timestamps = st.integers(min_value=0, max_value=2**60 - 1)
clock_seqs = st.integers(min_value=0, max_value=2**14 - 1)
nodes = st.integers(min_value=0, max_value=2**48 - 1)


@st.composite
def from_fields(draw: st.DrawFn) -> TimeUUID:
    return TimeUUID.from_fields(
        timestamp_100ns=draw(timestamps), clock_seq=draw(clock_seqs), node=draw(nodes)
    )


@st.composite
def with_raw_low_bytes(draw: st.DrawFn) -> TimeUUID:
    # Any 8 low bytes, outside the RFC variant too, as Cassandra accepts them.
    timestamp = draw(st.sampled_from([GREGORIAN_OFFSET_100NS, 0, 2**60 - 1]) | timestamps)
    template = TimeUUID.from_fields(timestamp_100ns=timestamp, clock_seq=0, node=0)
    return TimeUUID.from_uuid(
        uuid.UUID(bytes=template.uuid.bytes[:8] + draw(st.binary(min_size=8, max_size=8)))
    )


time_uuids = from_fields() | with_raw_low_bytes()


@given(plausible_ns, plausible_ns, nodes, clock_seqs)
def test_one_generator_orders_ids_as_its_readings(a: int, b: int, node: int, seq: int) -> None:
    earlier, later = sorted((a, b))
    clock = ManualClock(earlier)
    generator = TimeUUIDGenerator(clock, node=node, clock_seq=seq)
    first = generator.next()
    clock.advance(later - earlier)
    second = generator.next()
    assert first < second
    assert first.to_bytes() < second.to_bytes()


@given(plausible_ns, plausible_ns, nodes, clock_seqs, nodes, clock_seqs)
def test_readings_in_different_ticks_order_across_generators(
    a: int, b: int, node_a: int, seq_a: int, node_b: int, seq_b: int
) -> None:
    first = TimeUUIDGenerator(ManualClock(a), node=node_a, clock_seq=seq_a).next()
    second = TimeUUIDGenerator(ManualClock(b), node=node_b, clock_seq=seq_b).next()
    assert first.epoch_ns == a // 100 * 100
    if a // 100 < b // 100:
        assert first < second
    elif a // 100 > b // 100:
        assert first > second


@given(st.lists(time_uuids, max_size=30))
def test_sorting_by_timeuuid_equals_sorting_by_bytes(values: list[TimeUUID]) -> None:
    assert sorted(values) == sorted(values, key=TimeUUID.to_bytes)


@given(time_uuids, time_uuids)
def test_comparison_matches_the_cassandra_definition(left: TimeUUID, right: TimeUUID) -> None:
    def cassandra_key(value: TimeUUID) -> tuple[int, list[int]]:
        signed = [b - 256 if b >= 128 else b for b in value.uuid.bytes[8:]]
        return value.timestamp_100ns, signed

    assert (left < right) == (cassandra_key(left) < cassandra_key(right))
    assert (left <= right) == (cassandra_key(left) <= cassandra_key(right))
    assert (left > right) == (cassandra_key(left) > cassandra_key(right))
    assert (left >= right) == (cassandra_key(left) >= cassandra_key(right))
    assert (left == right) == (left.uuid == right.uuid)


@given(time_uuids)
def test_bytes_round_trip(value: TimeUUID) -> None:
    assert TimeUUID.from_bytes(value.to_bytes()) == value


@given(time_uuids)
def test_text_round_trip(value: TimeUUID) -> None:
    assert TimeUUID.parse(str(value)) == value


@given(time_uuids)
def test_bounds_bracket_their_timestamp(value: TimeUUID) -> None:
    epoch = (value.timestamp_100ns - GREGORIAN_OFFSET_100NS) * 100
    assert TimeUUID.min_for_epoch_ns(epoch) <= value <= TimeUUID.max_for_epoch_ns(epoch)


@given(epoch_ns)
def test_epoch_values_are_floors(reading: int) -> None:
    value = TimeUUID.min_for_epoch_ns(reading)
    assert value.epoch_ns <= reading < value.epoch_ns + 100
    assert value.epoch_ms == reading // 1_000_000
    assert TimeUUID.from_datetime(value.datetime).epoch_ns == reading // 1000 * 1000


def test_the_whole_range_is_representable() -> None:
    assert TimeUUID.min_for_epoch_ns(EARLIEST_NS).timestamp_100ns == 0
    assert TimeUUID.max_for_epoch_ns(LATEST_NS).timestamp_100ns == 2**60 - 1
