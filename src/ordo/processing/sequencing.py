"""Sequencing policies: which events must be processed one after another (Axon)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ordo.errors import ConfigurationError, InvalidInputError
from ordo.hashing import stable_hash

_FULLY_SEQUENTIAL_VALUE = "fully-sequential"
_PROPERTY_PREFIX = "property:"
_POLICY_NAMES = ("per_aggregate", "sequential", "concurrent", f"{_PROPERTY_PREFIX}<name>")


class SequencedEvent(Protocol):
    """What a sequencing policy reads from an event.

    Both `ordo.journal.PersistedEvent` and `ordo.query.EventEnvelope` have this shape.
    """

    @property
    def persistence_id(self) -> str:
        """The persistence id (aggregate) that wrote the event."""

    @property
    def sequence_nr(self) -> int:
        """The event's position within its persistence id, starting at 1."""

    @property
    def payload(self) -> object:
        """The decoded payload: bytes or a JSON value."""


class SequencingPolicy(Protocol):
    """Decides which events a processor must handle sequentially (Axon's `SequencingPolicy`).

    Events with the same sequence value are handled one after another, in order, by the
    segment that owns `stable_hash(value)`. `None` means the event has no ordering constraint;
    `sequence_hash` then places it by its own identity. Policies must be deterministic: every
    process has to compute the same value for the same event.
    """

    def sequence_value(self, event: SequencedEvent) -> str | None:
        """The event's sequence value, or None when it may be handled concurrently."""
        ...


@dataclass(frozen=True, slots=True)
class SequentialPerAggregatePolicy:
    """Events of one persistence id are sequential; different ids run concurrently.

    Axon's `SequentialPerAggregatePolicy` and the default policy. Immutable and picklable.
    """

    def sequence_value(self, event: SequencedEvent) -> str | None:
        """The event's persistence id."""
        return event.persistence_id


@dataclass(frozen=True, slots=True)
class FullySequentialPolicy:
    """Every event is sequential with every other: one segment does all the work.

    Axon's `SequentialPolicy`. Immutable and picklable.
    """

    def sequence_value(self, event: SequencedEvent) -> str | None:
        """One constant value for every event."""
        return _FULLY_SEQUENTIAL_VALUE


@dataclass(frozen=True, slots=True)
class FullyConcurrentPolicy:
    """No two events are sequential: each event is its own sequence.

    Axon's `FullConcurrencyPolicy` returns null, which Axon (and `sequence_hash`) replace with
    the event's identity; this policy returns that identity, `"<persistence_id>#<sequence_nr>"`,
    directly, so both give the same hash. Immutable and picklable.
    """

    def sequence_value(self, event: SequencedEvent) -> str | None:
        """The event's identity, `"<persistence_id>#<sequence_nr>"`."""
        return _identity(event)


@dataclass(frozen=True, slots=True)
class PropertySequencingPolicy:
    """Events whose payloads have the same value under key `name` are sequential.

    Axon's `PropertySequencingPolicy`, for dict (JSON object) payloads. A string value is used
    as is; any other JSON value by its compact JSON text (so `5` and `"5"` share a sequence,
    which costs concurrency, never ordering). When the payload is not a dict, or the key is
    missing or null, `fallback` decides. Immutable; picklable when `fallback` is.
    """

    name: str
    fallback: SequencingPolicy = field(default=SequentialPerAggregatePolicy(), kw_only=True)

    def __post_init__(self) -> None:
        # A name of 5 was never found in a JSON object's (text) keys, so every event took the
        # fallback without a word; a bad fallback failed in a worker thread, at the first
        # payload without the property.
        if not isinstance(self.name, str) or not self.name:
            msg = f"PropertySequencingPolicy needs a non-empty property name, got {self.name!r}"
            raise ConfigurationError(msg)
        check_policy(self.fallback, name="fallback")

    def sequence_value(self, event: SequencedEvent) -> str | None:
        """The payload's value under `name`, or the fallback's value when there is none.

        Raises:
            InvalidInputError: the value is not a JSON value (only for payloads that did not
                come from the journal).

        """
        payload = event.payload
        value = payload.get(self.name) if isinstance(payload, Mapping) else None
        if value is None:
            return self.fallback.sequence_value(event)
        if isinstance(value, str):
            return value
        try:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            msg = (
                f"property {self.name!r} of event {_identity(event)} is not a JSON value "
                f"and cannot be a sequence value: {exc}"
            )
            raise InvalidInputError(msg) from exc


@dataclass(frozen=True, slots=True)
class CallableSequencingPolicy:
    """A policy from a function: `fn(event)` is the sequence value (None: no constraint).

    `fn` must be deterministic across processes. Picklable when `fn` is.
    """

    fn: Callable[[SequencedEvent], str | None]

    def __post_init__(self) -> None:
        if not callable(self.fn):  # it failed in a worker thread, at the first event
            msg = f"CallableSequencingPolicy needs a function, got {self.fn!r:.80}"
            raise ConfigurationError(msg)

    def sequence_value(self, event: SequencedEvent) -> str | None:
        """Whatever `fn` returns for the event."""
        return self.fn(event)


def check_policy(policy: object, *, name: str = "policy") -> None:
    """ConfigurationError naming `name` unless `policy` has a `sequence_value()`.

    Processors call the policy in their worker threads: anything else failed there, per event,
    as a handler failure (under ErrorMode.SKIP every event went to the dead letters).
    """
    if not callable(getattr(policy, "sequence_value", None)):
        msg = f"{name} must be a SequencingPolicy (with sequence_value()), got {policy!r:.80}"
        raise ConfigurationError(msg)


def sequence_hash(policy: SequencingPolicy, event: SequencedEvent) -> int:
    """The 32-bit hash a segment matches (`hash & mask == segment_id`) to own `event`.

    It is `stable_hash(value)` of the policy's sequence value, or of the event's identity
    `"<persistence_id>#<sequence_nr>"` when the value is None (as Axon falls back to the event
    identifier). `stable_hash` is BLAKE2b from the standard library, cut to 32 bits: unlike
    Python's built-in `hash()`, which is salted per process (PYTHONHASHSEED), it is the same in
    every process and on every machine, so processor threads in different processes agree on
    which segment owns an event. BLAKE2b mixes every input bit into every output bit, so the
    low bits that masks select split the events evenly between sibling segments.
    Called by a processor once per event. Thread-safe when the policy is.
    """
    value = policy.sequence_value(event)
    return stable_hash(_identity(event) if value is None else value)


def policy_from_name(name: str) -> SequencingPolicy:
    """The policy a setting or CLI flag names.

    `"per_aggregate"` (the default), `"sequential"`, `"concurrent"` or `"property:<name>"`
    (a top-level payload key, falling back to per aggregate).

    Raises:
        ConfigurationError: the name is none of these; the message lists the valid ones.

    """
    if name == "per_aggregate":
        return SequentialPerAggregatePolicy()
    if name == "sequential":
        return FullySequentialPolicy()
    if name == "concurrent":
        return FullyConcurrentPolicy()
    prop = name.removeprefix(_PROPERTY_PREFIX) if isinstance(name, str) else ""
    if prop and prop != name:
        return PropertySequencingPolicy(prop)
    msg = f"unknown sequencing policy {name!r}; valid policies: {', '.join(_POLICY_NAMES)}"
    raise ConfigurationError(msg)


def _identity(event: SequencedEvent) -> str:
    return f"{event.persistence_id}#{event.sequence_nr}"
