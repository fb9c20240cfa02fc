from __future__ import annotations

import datetime as dt
import random
import threading
import uuid

import pytest

from ordo.clock import ManualClock, SkewedClock
from ordo.errors import ConfigurationError, InvalidInputError, OffsetFormatError
from ordo.time import GREGORIAN_OFFSET_100NS, TimeUUID, TimeUUIDGenerator

EPOCH_2015_NS = 1_447_977_600_000_000_000  # 2015-11-20T00:00Z


def with_low_bytes(timestamp_100ns: int, low: bytes) -> TimeUUID:
    base = TimeUUID.min_for_epoch_ns((timestamp_100ns - GREGORIAN_OFFSET_100NS) * 100)
    high = base.uuid.bytes[:8]
    return TimeUUID.from_uuid(uuid.UUID(bytes=high + low))


def test_uuid1_from_the_standard_library_is_accepted() -> None:
    value = uuid.uuid1()
    parsed = TimeUUID.parse(str(value))
    assert parsed.uuid == value
    assert parsed.timestamp_100ns == value.time


def test_round_trips_through_bytes_and_text() -> None:
    value = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS)).next()
    encoded = value.to_bytes()
    assert len(encoded) == 16
    assert TimeUUID.from_bytes(encoded) == value
    assert TimeUUID.parse(str(value)) == value
    assert str(value) == str(value.uuid)


def test_bounds_round_trip_through_text_although_outside_the_rfc_variant() -> None:
    upper = TimeUUID.max_for_epoch_ns(EPOCH_2015_NS)
    assert TimeUUID.parse(str(upper)) == upper
    assert TimeUUID.from_bytes(upper.to_bytes()) == upper


@pytest.mark.parametrize("text", ["", "not-a-uuid", "1234", "g" * 32])
def test_parse_rejects_text_that_is_not_a_uuid(text: str) -> None:
    with pytest.raises(OffsetFormatError, match="is not a UUID"):
        TimeUUID.parse(text)


def test_parse_rejects_a_version_4_uuid_naming_it() -> None:
    text = str(uuid.UUID(int=random.Random(7).getrandbits(128), version=4))
    with pytest.raises(OffsetFormatError, match=text):
        TimeUUID.parse(text)


def test_constructor_rejects_a_version_4_uuid() -> None:
    with pytest.raises(OffsetFormatError, match="version-1"):
        TimeUUID.from_uuid(uuid.UUID(int=0, version=4))


@pytest.mark.parametrize("length", [0, 15, 17])
def test_from_bytes_rejects_a_wrong_length(length: int) -> None:
    with pytest.raises(OffsetFormatError, match=f"got {length}"):
        TimeUUID.from_bytes(bytes(length))


def test_from_bytes_rejects_a_missing_version_nibble() -> None:
    with pytest.raises(OffsetFormatError, match="version 1"):
        TimeUUID.from_bytes(bytes(16))


def test_epoch_values_of_a_known_instant() -> None:
    value = TimeUUID.min_for_epoch_ns(EPOCH_2015_NS + 1_234_567_899)
    assert value.epoch_ns == EPOCH_2015_NS + 1_234_567_800
    assert value.epoch_ms == EPOCH_2015_NS // 1_000_000 + 1234
    assert value.datetime == dt.datetime(2015, 11, 20, 0, 0, 1, 234_567, tzinfo=dt.UTC)


def test_unix_epoch_is_the_gregorian_offset() -> None:
    assert TimeUUID.min_for_epoch_ns(0).timestamp_100ns == GREGORIAN_OFFSET_100NS


def test_epoch_ms_floors_before_1970() -> None:
    value = TimeUUID.min_for_epoch_ns(-100)
    assert value.epoch_ns == -100
    assert value.epoch_ms == -1


@pytest.mark.parametrize(
    "moment",
    [
        dt.datetime(2015, 11, 20, 0, 0, tzinfo=dt.UTC),
        dt.datetime(2024, 2, 29, 23, 59, 59, 999_999, tzinfo=dt.UTC),
        dt.datetime(1583, 1, 1, tzinfo=dt.UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=dt.UTC),
    ],
)
def test_datetime_round_trip(moment: dt.datetime) -> None:
    assert TimeUUID.from_datetime(moment).datetime == moment
    assert TimeUUID.from_datetime(moment, bound="max").datetime == moment


def test_from_datetime_converts_other_zones_to_utc() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    local = dt.datetime(2015, 11, 20, 2, 0, tzinfo=plus_two)
    assert TimeUUID.from_datetime(local).epoch_ns == EPOCH_2015_NS


def test_from_datetime_rejects_a_naive_datetime() -> None:
    naive = dt.datetime(2015, 11, 20)  # noqa: DTZ001 - the naive value is the point
    with pytest.raises(OffsetFormatError, match="2015-11-20T00:00:00"):
        TimeUUID.from_datetime(naive)


def test_bounds_outside_the_timeuuid_range_are_rejected() -> None:
    before_1582 = -GREGORIAN_OFFSET_100NS * 100 - 1
    with pytest.raises(
        OffsetFormatError, match=rf"^epoch_ns must be an integer >= -\d+, got {before_1582}$"
    ):
        TimeUUID.min_for_epoch_ns(before_1582)
    after_5236 = ((1 << 60) - GREGORIAN_OFFSET_100NS) * 100
    with pytest.raises(OffsetFormatError, match=rf"got {after_5236}$"):
        TimeUUID.max_for_epoch_ns(after_5236)
    assert TimeUUID.min_for_epoch_ns(before_1582 + 1).timestamp_100ns == 0
    assert TimeUUID.max_for_epoch_ns(after_5236 - 1).timestamp_100ns == (1 << 60) - 1


def test_min_and_max_bracket_every_uuid_of_their_timestamp() -> None:
    rng = random.Random(11)
    lower, upper = (
        TimeUUID.min_for_epoch_ns(EPOCH_2015_NS),
        TimeUUID.max_for_epoch_ns(EPOCH_2015_NS),
    )
    timestamp = lower.timestamp_100ns
    assert upper.timestamp_100ns == timestamp
    candidates = [with_low_bytes(timestamp, rng.randbytes(8)) for _ in range(500)]
    candidates += [with_low_bytes(timestamp, bytes([b]) * 8) for b in (0x00, 0x7F, 0x80, 0xFF)]
    for candidate in candidates:
        assert lower <= candidate <= upper
    assert TimeUUID.max_for_epoch_ns(EPOCH_2015_NS - 100) < lower
    assert upper < TimeUUID.min_for_epoch_ns(EPOCH_2015_NS + 100)


def test_same_timestamp_orders_low_bytes_as_signed_bytes() -> None:
    timestamp = TimeUUID.min_for_epoch_ns(EPOCH_2015_NS).timestamp_100ns
    negative = with_low_bytes(timestamp, bytes([0x80]) + bytes(7))  # -128
    minus_one = with_low_bytes(timestamp, bytes([0xFF]) + bytes(7))  # -1
    zero = with_low_bytes(timestamp, bytes(8))
    positive = with_low_bytes(timestamp, bytes([0x7F]) + bytes(7))  # +127
    assert negative < minus_one < zero < positive
    assert positive > negative
    assert sorted([positive, zero, negative, minus_one]) == [negative, minus_one, zero, positive]
    # A later byte decides only when the earlier ones tie, again signed.
    assert with_low_bytes(timestamp, bytes(7) + b"\x80") < with_low_bytes(timestamp, bytes(8))


def test_timestamp_decides_before_the_low_bytes() -> None:
    timestamp = TimeUUID.min_for_epoch_ns(EPOCH_2015_NS).timestamp_100ns
    earlier = with_low_bytes(timestamp, b"\x7f" * 8)
    later = with_low_bytes(timestamp + 1, b"\x80" * 8)
    assert earlier < later


def test_comparison_with_other_types_is_unsupported() -> None:
    value = TimeUUID.min_for_epoch_ns(0)
    assert value != value.uuid
    with pytest.raises(TypeError):
        _ = value < value.uuid  # type: ignore[operator]


def test_generator_is_strictly_increasing_under_a_frozen_clock() -> None:
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS), rng=random.Random(1))
    issued = [generator.next() for _ in range(1000)]
    assert issued == sorted(issued)
    assert len(set(issued)) == len(issued)
    timestamps = [value.timestamp_100ns for value in issued]
    assert timestamps == list(range(timestamps[0], timestamps[0] + 1000))


def test_generator_never_goes_back_when_the_clock_catches_up() -> None:
    clock = ManualClock(EPOCH_2015_NS)
    generator = TimeUUIDGenerator(clock)
    burst = [generator.next() for _ in range(10)]
    clock.advance(500)  # five ticks: still inside the burst
    assert generator.next().timestamp_100ns == burst[-1].timestamp_100ns + 1
    clock.advance(10_000)
    assert generator.next().epoch_ns == EPOCH_2015_NS + 10_500


def test_generator_is_unique_across_threads() -> None:
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS))
    results: list[list[TimeUUID]] = [[] for _ in range(8)]

    def issue(into: list[TimeUUID]) -> None:
        into.extend(generator.next() for _ in range(500))

    threads = [threading.Thread(target=issue, args=(into,)) for into in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [value for into in results for value in into]
    assert len(set(everything)) == 8 * 500
    for into in results:
        assert into == sorted(into)


def test_generators_on_one_frozen_clock_issue_distinct_ids() -> None:
    # What every journal does: a generator per journal, node and clock_seq drawn by default.
    # All of them read the same instant, as journals sharing an injected clock do, so their ids
    # share every timestamp and differ only by those drawn bits: no two rows of a tag can tie.
    clock = ManualClock(EPOCH_2015_NS)
    generators = [TimeUUIDGenerator(clock) for _ in range(64)]
    issued = [generator.next_batch(16) for generator in generators]

    everything = [value for batch in issued for value in batch]
    assert len(set(everything)) == 64 * 16
    assert {value.timestamp_100ns for value in everything} == {
        issued[0][0].timestamp_100ns + n for n in range(16)
    }
    assert len({value.key[8:] for value in everything}) == 64  # one node and clock_seq each
    for batch in issued:
        assert batch == sorted(batch)


def test_generator_under_a_skewed_clock_shows_the_skew() -> None:
    base = ManualClock(EPOCH_2015_NS)
    skew_ns = -2_000_000_000
    honest = TimeUUIDGenerator(base, rng=random.Random(2))
    behind = TimeUUIDGenerator(SkewedClock(base, skew_ns=skew_ns), rng=random.Random(3))
    first, second = honest.next(), behind.next()
    assert first.epoch_ns == EPOCH_2015_NS
    assert second.epoch_ns == EPOCH_2015_NS + skew_ns
    assert second < first  # written later, sorts earlier: the skew is visible


def test_a_batch_after_a_floor_follows_it_and_so_does_everything_issued_later() -> None:
    base = ManualClock(EPOCH_2015_NS)
    ahead = TimeUUIDGenerator(SkewedClock(base, skew_ns=2_000_000_000), rng=random.Random(2))
    behind = TimeUUIDGenerator(base, rng=random.Random(3))
    floor = ahead.next()

    batch = behind.next_batch(3, after=floor)
    later = behind.next()

    assert floor < batch[0] < batch[1] < batch[2] < later
    assert batch[0].timestamp_100ns == floor.timestamp_100ns + 1
    assert behind.next_batch(1, after=TimeUUID.min_for_epoch_ns(EPOCH_2015_NS))[0] > later


def test_generator_uses_the_given_node_and_clock_seq() -> None:
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS), node=0xABCDEF012345, clock_seq=0x1234)
    value = generator.next()
    assert value.uuid.node == 0xABCDEF012345
    assert value.uuid.clock_seq == 0x1234
    assert value.uuid.version == 1
    assert value.uuid.variant == uuid.RFC_4122


def test_generator_random_node_has_the_multicast_bit() -> None:
    for seed in range(20):
        value = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS), rng=random.Random(seed)).next()
        assert value.uuid.node & (1 << 40)
        assert value.uuid.variant == uuid.RFC_4122


@pytest.mark.parametrize(
    ("node", "clock_seq", "message"),
    [(1 << 48, 0, "node"), (-1, 0, "node"), (0, 1 << 14, "clock_seq"), (0, -1, "clock_seq")],
)
def test_generator_rejects_out_of_range_fields(node: int, clock_seq: int, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TimeUUIDGenerator(ManualClock(0), node=node, clock_seq=clock_seq)


def test_to_bytes_layout() -> None:
    value = with_low_bytes(0x0123456789ABCDE, bytes(range(8)))
    encoded = value.to_bytes()
    assert encoded[:8] == bytes.fromhex("10123456789abcde")
    assert encoded[8:] == bytes(b ^ 0x80 for b in range(8))


@pytest.mark.parametrize("value", [None, 5, 1.5, b"x" * 36, ("a",), object()])
def test_parse_rejects_what_is_not_text(value: object) -> None:
    """None and bytes were a TypeError, a number or a tuple an AttributeError."""
    with pytest.raises(OffsetFormatError, match="is not a UUID"):
        TimeUUID.parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, 16, "0123456789abcdef", ("a",) * 16, object()])
def test_from_bytes_rejects_what_is_not_bytes(value: object) -> None:
    """A TypeError (no len(), or a 16-character string bytes() could not take) before."""
    with pytest.raises(OffsetFormatError, match="a stored TimeUUID is 16 bytes, got "):
        TimeUUID.from_bytes(value)  # type: ignore[arg-type]


STORED = TimeUUID.min_for_epoch_ns(EPOCH_2015_NS).to_bytes()


@pytest.mark.parametrize(
    "key", [bytearray(STORED), memoryview(STORED), STORED.hex()[:16], None, 16]
)
def test_the_constructor_takes_bytes_only(key: object) -> None:
    """A bytearray key was kept as given: unhashable, and changed when its buffer did."""
    with pytest.raises(OffsetFormatError, match=r"^a TimeUUID key is bytes \(TimeUUID\.from_"):
        TimeUUID(key)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [bytearray, memoryview])
def test_from_bytes_copies_a_bytes_like_value(make: type[bytearray | memoryview]) -> None:
    buffer = bytearray(STORED)
    value = TimeUUID.from_bytes(make(buffer))
    buffer[15] ^= 1
    assert type(value.key) is bytes
    assert value == TimeUUID(STORED)
    assert {value: 1}[TimeUUID(STORED)] == 1


@pytest.mark.parametrize("value", [None, "5f1a2c10-e5f0-11f1-8000-000000000001", 5])
def test_from_uuid_rejects_what_is_not_a_uuid(value: object) -> None:
    with pytest.raises(OffsetFormatError, match="a UUID is needed"):
        TimeUUID.from_uuid(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, "2024-01-01T00:00:00Z", 0, dt.date(2024, 1, 1)])
def test_from_datetime_rejects_what_is_not_a_datetime(value: object) -> None:
    """An AttributeError (no tzinfo) before; a date has no time to take a bound of."""
    with pytest.raises(OffsetFormatError, match="an aware datetime is needed"):
        TimeUUID.from_datetime(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, False, 1.0, None, "0"])
@pytest.mark.parametrize("build", [TimeUUID.min_for_epoch_ns, TimeUUID.max_for_epoch_ns])
def test_epoch_bounds_take_integers_only(build: object, value: object) -> None:
    """True was taken for 1 ns; a float, None or a text failed as a TypeError naming nothing."""
    with pytest.raises(OffsetFormatError, match=r"^epoch_ns must be an integer, got "):
        build(value)  # type: ignore[operator]


@pytest.mark.parametrize("field", ["timestamp_100ns", "clock_seq", "node"])
@pytest.mark.parametrize("value", [True, 1.0, None, "1"])
def test_from_fields_takes_integers_only(field: str, value: object) -> None:
    """True was taken for 1 (as the other constructors refuse it); a float was a TypeError."""
    fields: dict[str, object] = {"timestamp_100ns": 0, "clock_seq": 0, "node": 0} | {field: value}
    with pytest.raises(OffsetFormatError, match=f"^{field} must be an integer, got "):
        TimeUUID.from_fields(**fields)  # type: ignore[arg-type]


def test_from_fields_refuses_a_timestamp_beyond_60_bits() -> None:
    with pytest.raises(OffsetFormatError, match=r"timestamp_100ns must be an integer >= 0, got -1"):
        TimeUUID.from_fields(timestamp_100ns=-1, clock_seq=0, node=0)


def test_a_generator_refuses_a_bool_node_or_clock_seq() -> None:
    with pytest.raises(ConfigurationError, match=r"^node must be an integer, got True"):
        TimeUUIDGenerator(ManualClock(0), node=True, clock_seq=0)
    with pytest.raises(ConfigurationError, match=r"^clock_seq must be an integer, got 1\.5"):
        TimeUUIDGenerator(ManualClock(0), node=0, clock_seq=1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [-5, 1.5, True, None])
def test_a_batch_count_that_is_not_a_count_is_refused_and_ids_stay_unique(count: object) -> None:
    """A negative count moved the generator back: its next ids repeated issued ones."""
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS))
    issued = generator.next_batch(10)
    with pytest.raises(InvalidInputError, match=r"^count must be "):
        generator.next_batch(count)  # type: ignore[arg-type]
    assert generator.next() > issued[-1]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"clock": 5}, "^clock must be a Clock"),
        ({"clock": "system"}, "^clock must be a Clock"),
        ({"clock": ManualClock(EPOCH_2015_NS), "rng": 7}, "^rng must be a random.Random"),
    ],
)
def test_a_generator_refuses_a_clock_or_rng_of_the_wrong_kind(
    arguments: dict[str, object], problem: str
) -> None:
    """An AttributeError, the clock's only once the first id was asked for."""
    with pytest.raises(ConfigurationError, match=problem):
        TimeUUIDGenerator(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("after", ["5f1a2c10-e5f0-11f1-8000-000000000001", 5, b"x" * 16])
def test_next_batch_refuses_an_after_that_is_no_timeuuid(after: object) -> None:
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS))
    with pytest.raises(InvalidInputError, match=r"^after must be a TimeUUID or None"):
        generator.next_batch(1, after=after)  # type: ignore[arg-type]
