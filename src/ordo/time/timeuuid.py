"""Version-1 UUIDs ordered exactly like Cassandra's timeuuid, with a memcmp-sortable encoding."""

from __future__ import annotations

import datetime as _dt
import os
import random
import threading
import weakref
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from ordo import arguments
from ordo.clock import Clock, clock_or_system
from ordo.errors import ConfigurationError, InvalidInputError, OffsetFormatError
from ordo.time.duration import nanoseconds

GREGORIAN_OFFSET_100NS = 0x01B21DD213814000
"""100 ns intervals from the Gregorian reform (1582-10-15) to the Unix epoch."""

TIMESTAMP_MASK = (1 << 60) - 1
"""The largest timestamp a TimeUUID holds (60 bits of 100 ns intervals since 1582-10-15)."""
_LOW_MASK = (1 << 64) - 1
_SIGN_FLIP = 0x8080808080808080  # XOR per byte turns signed byte order into unsigned order
_MIN_LOW = 0x8080808080808080  # every low byte -128: Cassandra driver's startOf()
_MAX_LOW = 0x7F7F7F7F7F7F7F7F  # every low byte +127: Cassandra driver's endOf()
_VARIANT_RFC_4122 = 0b10
_MULTICAST_BIT = 1 << 40
_UNIX_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
EARLIEST_EPOCH_NS = -GREGORIAN_OFFSET_100NS * 100
"""The earliest epoch nanoseconds a TimeUUID holds (1582-10-15): where a look back stops."""
_LATEST_EPOCH_NS = (TIMESTAMP_MASK - GREGORIAN_OFFSET_100NS) * 100 + 99
"""The epoch nanoseconds a TimeUUID holds (floored to 100 ns): 1582-10-15 to 5236-03-31."""


def _version_of(value: UUID) -> int:
    return (value.int >> 76) & 0xF  # UUID.version is None outside the RFC 4122 variant


@dataclass(frozen=True, slots=True, order=True)
class TimeUUID:
    """A version-1 UUID that sorts the way Cassandra's ``timeuuid`` column type does.

    Order is by the 60-bit timestamp first, then by the low 8 bytes (clock_seq and node)
    compared as signed bytes, one by one. Offsets built on it therefore sort identically
    in ordo and in a Cassandra-backed Akka journal. The one field is that order's
    memcmp-sortable 16-byte encoding (`to_bytes()`), so comparing, hashing and storing are
    plain bytes operations: the query compares offsets per event. Immutable, thread-safe.
    """

    key: bytes

    def __post_init__(self) -> None:
        """OffsetFormatError unless `key` is bytes: 16, with the version-1 nibble first.

        Only bytes, which `from_bytes` copies any bytes-like value to: a bytearray key was
        kept as given, so the TimeUUID could not be hashed (a set or dict of offsets failed)
        and changed when the buffer did; a memoryview could not be ordered.
        """
        if not isinstance(self.key, bytes):
            msg = (
                f"a TimeUUID key is bytes (TimeUUID.from_bytes copies other bytes-like values), "
                f"got {type(self.key).__name__}: {self.key!r:.80}"
            )
            raise OffsetFormatError(msg)
        if len(self.key) != 16 or self.key[0] >> 4 != 1:
            msg = f"{self.key.hex()} is not a stored TimeUUID (16 bytes, version 1)"
            raise OffsetFormatError(msg)

    @classmethod
    def from_uuid(cls, value: UUID) -> TimeUUID:
        """Wrap a standard UUID; OffsetFormatError unless it is a version-1 UUID."""
        if not isinstance(value, UUID):
            msg = f"a UUID is needed, got {type(value).__name__}: {value!r:.80}"
            raise OffsetFormatError(msg)
        if _version_of(value) != 1:
            msg = f"{value} is not a version-1 (time-based) UUID"
            raise OffsetFormatError(msg)
        return cls._from_timestamp_and_low(value.time, value.int & _LOW_MASK)

    @property
    def uuid(self) -> UUID:
        """The standard UUID (RFC 4122 field layout)."""
        high = int.from_bytes(self.key[:8], "big")
        timestamp = high & TIMESTAMP_MASK
        low = int.from_bytes(self.key[8:], "big") ^ _SIGN_FLIP
        time_low = timestamp & 0xFFFFFFFF
        time_mid = (timestamp >> 32) & 0xFFFF
        time_hi_and_version = 0x1000 | (timestamp >> 48)
        return UUID(int=(time_low << 96) | (time_mid << 80) | (time_hi_and_version << 64) | low)

    @classmethod
    def from_fields(cls, *, timestamp_100ns: int, clock_seq: int, node: int) -> TimeUUID:
        """Build an RFC 4122 version-1 UUID; the generator and tests call this.

        ``timestamp_100ns`` counts 100 ns intervals since 1582-10-15 (60 bits), ``clock_seq``
        has 14 bits (the variant bits are added here) and ``node`` 48 bits.

        Raises:
            OffsetFormatError: a field is not an int (a bool is not: True was taken for 1)
                or does not fit its bits.

        """
        for name, value, bits in (
            ("timestamp_100ns", timestamp_100ns, 60),
            ("clock_seq", clock_seq, 14),
            ("node", node, 48),
        ):
            arguments.integer(
                value, name=name, error=OffsetFormatError, minimum=0, maximum=(1 << bits) - 1
            )
        low = (_VARIANT_RFC_4122 << 62) | (clock_seq << 48) | node
        return cls._from_timestamp_and_low(timestamp_100ns, low)

    @classmethod
    def _from_timestamp_and_low(cls, timestamp_100ns: int, low: int) -> TimeUUID:
        """Build from the 60-bit timestamp and the 8 raw low bytes (clock_seq and node).

        Every caller has the timestamp in range: checked, or a UUID's 60-bit `time`.
        """
        return cls(((1 << 60) | timestamp_100ns).to_bytes(8, "big") + _low_key(low))

    @classmethod
    def parse(cls, text: str) -> TimeUUID:
        """Read a UUID string (as stored in offsets and CLI flags); it must be version 1.

        Raises:
            OffsetFormatError: the text is not a UUID, or not a version-1 UUID; also when it
                is no text at all (None or a number was a TypeError or AttributeError).

        """
        try:
            value = UUID(text)
        except (ValueError, TypeError, AttributeError) as exc:
            msg = f"{text!r:.80} is not a UUID"
            raise OffsetFormatError(msg) from exc
        if _version_of(value) != 1:
            msg = f"{text!r} is not a version-1 (time-based) UUID"
            raise OffsetFormatError(msg)
        return cls.from_uuid(value)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> TimeUUID:
        """Decode the 16-byte storage encoding written by `to_bytes`; the exact inverse.

        Raises:
            OffsetFormatError: the data is not 16 bytes or has no version-1 nibble; also when
                it is not bytes-like (None, a number or a text was a TypeError).

        """
        try:
            if len(data) != 16:
                msg = f"a stored TimeUUID is 16 bytes, got {len(data)}: {bytes(data).hex()}"
                raise OffsetFormatError(msg)
            return cls(bytes(data))
        except TypeError as exc:  # no len(), or not bytes-like: checked only when it fails
            msg = f"a stored TimeUUID is 16 bytes, got {type(data).__name__}: {data!r:.80}"
            raise OffsetFormatError(msg) from exc

    @classmethod
    def min_for_epoch_ns(cls, epoch_ns: int) -> TimeUUID:
        """Return the smallest TimeUUID at ``epoch_ns`` (floored to 100 ns), for range queries.

        Its low bytes are all 0x80, as in the Cassandra driver's ``startOf()``.

        Raises:
            OffsetFormatError: `epoch_ns` is not an int (a bool is not) in the TimeUUID range.

        """
        return cls._from_timestamp_and_low(_checked_timestamp(epoch_ns), _MIN_LOW)

    @classmethod
    def max_for_epoch_ns(cls, epoch_ns: int) -> TimeUUID:
        """Return the largest TimeUUID at ``epoch_ns`` (floored to 100 ns), for range queries.

        Its low bytes are all 0x7f, as in the Cassandra driver's ``endOf()``.

        Raises:
            OffsetFormatError: `epoch_ns` is not an int (a bool is not) in the TimeUUID range.

        """
        return cls._from_timestamp_and_low(_checked_timestamp(epoch_ns), _MAX_LOW)

    @classmethod
    def from_datetime(cls, dt: _dt.datetime, *, bound: Literal["min", "max"] = "min") -> TimeUUID:
        """Return the min or max TimeUUID at an aware datetime, for time-range queries.

        Raises:
            OffsetFormatError: the datetime is naive (its instant would be a guess), is
                no datetime (a date, a text or a number was an AttributeError or TypeError),
                or is outside the times a TimeUUID holds (1582-10-15 to 5236-03-31: the
                error named only `epoch_ns`, no argument of the caller's).

        """
        arguments.aware_datetime(dt, name="datetime", error=OffsetFormatError)
        epoch_ns = nanoseconds(dt - _UNIX_EPOCH)
        if not EARLIEST_EPOCH_NS <= epoch_ns <= _LATEST_EPOCH_NS:
            held = " to ".join(
                (_UNIX_EPOCH + _dt.timedelta(microseconds=ns // 1000)).isoformat()
                for ns in (EARLIEST_EPOCH_NS, _LATEST_EPOCH_NS)
            )
            msg = f"datetime {dt.isoformat()} is outside the times a TimeUUID holds ({held})"
            raise OffsetFormatError(msg)
        if bound == "min":
            return cls.min_for_epoch_ns(epoch_ns)
        if bound == "max":
            return cls.max_for_epoch_ns(epoch_ns)
        msg = f"bound must be 'min' or 'max', got {bound!r}"
        raise ConfigurationError(msg)

    @property
    def timestamp_100ns(self) -> int:
        """The 60-bit count of 100 ns intervals since 1582-10-15 UTC."""
        return int.from_bytes(self.key[:8], "big") & TIMESTAMP_MASK

    @property
    def epoch_ns(self) -> int:
        """Nanoseconds since the Unix epoch (a multiple of 100; negative before 1970)."""
        return (self.timestamp_100ns - GREGORIAN_OFFSET_100NS) * 100

    @property
    def epoch_ms(self) -> int:
        """Milliseconds since the Unix epoch, floored: what time buckets are keyed on."""
        timestamp = int.from_bytes(self.key[:8], "big") & TIMESTAMP_MASK
        return (timestamp - GREGORIAN_OFFSET_100NS) // 10_000

    @property
    def datetime(self) -> _dt.datetime:
        """The instant as an aware UTC datetime, floored to the microsecond."""
        return _UNIX_EPOCH + _dt.timedelta(microseconds=self.epoch_ns // 1000)

    def to_bytes(self) -> bytes:
        """Encode as 16 bytes whose memcmp order is the TimeUUID order.

        Stores write it to BLOB/bytea columns so that SQLite's and PostgreSQL's byte order is
        Cassandra's order: version nibble and timestamp big-endian, then each low byte ^ 0x80.
        """
        return self.key

    def __str__(self) -> str:
        return str(self.uuid)


def _low_key(low: int) -> bytes:
    """The stored form of the 8 low bytes: each flipped so signed order becomes memcmp order."""
    return (low ^ _SIGN_FLIP).to_bytes(8, "big")


def _checked_timestamp(epoch_ns: object) -> int:
    """`_timestamp_for` a caller's `epoch_ns`: True was 1 ns, a float a TypeError from a shift."""
    checked = arguments.integer(
        epoch_ns,
        name="epoch_ns",
        error=OffsetFormatError,
        minimum=EARLIEST_EPOCH_NS,
        maximum=_LATEST_EPOCH_NS,
    )
    return _timestamp_for(checked)


def _timestamp_for(epoch_ns: int) -> int:
    """Floor epoch nanoseconds to 100 ns units and shift them to the Gregorian origin."""
    return epoch_ns // 100 + GREGORIAN_OFFSET_100NS


class TimeUUIDGenerator:
    """Issues strictly increasing TimeUUIDs for one writer. Thread-safe.

    The journal writer calls `next` once per event. Time comes from the injected clock
    only; when the clock has not moved past the last issued timestamp (a burst within one
    tick, or a clock stepping back), the last timestamp plus one is used instead, so ids
    from one generator are unique and ascending.

    Omitted ``node`` (48 bits) and ``clock_seq`` (14 bits) come from ``rng`` (default
    ``random.SystemRandom()``); a random node has RFC 4122's multicast bit set.

    Ids of two generators (one per Journal) differ even at one clock reading, each having drawn
    its own 61 random bits: so no two events of a tag share an offset, which every reader that
    pages on the offset alone relies on (tag_views would keep such a tie, and a page boundary
    split it). The copy a child made by os.fork inherits draws its omitted fields again, from
    ``random.SystemRandom()`` (a seeded ``rng``'s copy would repeat the parent's draws), so it
    cannot repeat its parent's ids either; fields that were given stay as they were (with both
    given, the child issues its parent's ids).

    A `clock` of None is the system clock (as a Journal's); one without `now_ns()`, or an `rng`
    without `getrandbits()`, is a ConfigurationError (an AttributeError, the clock's at the
    first id).
    """

    def __init__(
        self,
        clock: Clock | None,
        *,
        node: int | None = None,
        clock_seq: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock_or_system(clock)
        if rng is not None and not callable(getattr(rng, "getrandbits", None)):
            msg = f"rng must be a random.Random (with getrandbits()) or None, got {rng!r:.80}"
            raise ConfigurationError(msg)
        self._given_node, self._given_clock_seq = node, clock_seq
        self._draw_low_key(rng if rng is not None else random.SystemRandom())
        self._last_100ns = -1
        self._lock = threading.Lock()
        _GENERATORS.add(self)

    def _draw_low_key(self, source: random.Random) -> None:
        """Set the low 8 bytes of every id: the given node and clock_seq, the others drawn."""
        node = self._given_node
        if node is None:
            node = source.getrandbits(48) | _MULTICAST_BIT
        clock_seq = self._given_clock_seq
        if clock_seq is None:
            clock_seq = source.getrandbits(14)
        try:
            template = TimeUUID.from_fields(timestamp_100ns=0, clock_seq=clock_seq, node=node)
        except OffsetFormatError as exc:
            raise ConfigurationError(str(exc)) from exc
        self._low_key = template.key[8:]

    def _renew_in_child(self) -> None:
        """In a forked child: new random fields, and a lock no parent's thread holds.

        Drawn until they differ from the parent's: a clock_seq alone is only 14 bits.
        """
        inherited = self._low_key
        if self._given_node is None or self._given_clock_seq is None:
            while self._low_key == inherited:
                self._draw_low_key(random.SystemRandom())
        self._lock = threading.Lock()

    def next(self) -> TimeUUID:
        """Issue the next TimeUUID, strictly greater than every one issued before.

        Raises:
            OffsetFormatError: the clock reads outside the timeuuid range (before 1582).

        """
        return self.next_batch(1)[0]

    def next_batch(self, count: int, *, after: TimeUUID | None = None) -> list[TimeUUID]:
        """Issue `count` ascending TimeUUIDs at once: one clock reading, consecutive ticks.

        The journal calls this once per append, so a hundred events cost one clock read and
        one lock, and their ids are strictly greater than every one issued before, and than
        `after` (the last offset of the persistence id, which another writer, whose clock may
        be ahead of this one, may have issued). Like a Lamport clock, the generator then goes
        on from there for every id, so that no later id can equal one of these: it runs ahead
        of its own clock by at most the skew of the writer it took the id from.

        Raises:
            OffsetFormatError: the clock reads outside the timeuuid range (before 1582).
            InvalidInputError: `count` is not an int >= 0 (a negative one would move the
                generator back, so that its next ids repeat ones it has issued), or `after`
                is neither a TimeUUID nor None (an AttributeError).

        """
        arguments.integer(count, name="count", error=InvalidInputError, minimum=0)
        if after is not None and not isinstance(after, TimeUUID):
            msg = f"after must be a TimeUUID or None, got {type(after).__name__}: {after!r:.80}"
            raise InvalidInputError(msg)
        reading = _timestamp_for(self._clock.now_ns())
        with self._lock:
            first = max(reading, self._last_100ns + 1)
            if after is not None:
                first = max(first, after.timestamp_100ns + 1)
            if not (first >= 0 and first + count - 1 <= TIMESTAMP_MASK):
                msg = f"the clock reads outside the timeuuid range: {first} (100 ns units)"
                raise OffsetFormatError(msg)
            self._last_100ns = first + count - 1
        low = self._low_key
        return [
            _issued(((1 << 60) | timestamp).to_bytes(8, "big") + low)
            for timestamp in range(first, first + count)
        ]


def _issued(key: bytes) -> TimeUUID:
    """A TimeUUID of a key `next_batch` built, without `__post_init__`'s checks of given keys.

    The key is bytes, 16 of them, version 1 by construction; the checks were a third of the
    cost of an id, paid per appended event.
    """
    issued = object.__new__(TimeUUID)
    object.__setattr__(issued, "key", key)
    return issued


_GENERATORS: weakref.WeakSet[TimeUUIDGenerator] = weakref.WeakSet()
"""Every live generator, renewed in a forked child before any of its code runs."""


def _renew_generators_in_child() -> None:
    for generator in list(_GENERATORS):
        generator._renew_in_child()


os.register_at_fork(after_in_child=_renew_generators_in_child)
