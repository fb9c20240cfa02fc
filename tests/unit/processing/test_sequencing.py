"""Sequencing policies (Axon) and the stable hash that places their values in segments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from ordo.errors import ConfigurationError, InvalidInputError
from ordo.hashing import stable_hash
from ordo.journal import PersistedEvent
from ordo.processing import (
    CallableSequencingPolicy,
    FullyConcurrentPolicy,
    FullySequentialPolicy,
    PropertySequencingPolicy,
    Segment,
    SequencedEvent,
    SequencingPolicy,
    SequentialPerAggregatePolicy,
    policy_from_name,
    sequence_hash,
)
from ordo.query import EventEnvelope
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, TagPidSequenceNr


@dataclass(frozen=True)
class Event:
    persistence_id: str
    sequence_nr: int
    payload: object = None


A1, A2, B1 = Event("order-a", 1), Event("order-a", 2), Event("order-b", 1)
VALID_NAMES = "per_aggregate, sequential, concurrent, property:<name>"


def test_per_aggregate_sequences_by_persistence_id() -> None:
    policy = SequentialPerAggregatePolicy()
    assert [policy.sequence_value(e) for e in (A1, A2, B1)] == ["order-a", "order-a", "order-b"]
    assert sequence_hash(policy, A1) == sequence_hash(policy, A2) == stable_hash("order-a")


def test_fully_sequential_gives_every_event_one_value() -> None:
    policy = FullySequentialPolicy()
    values = {policy.sequence_value(e) for e in (A1, A2, B1)}
    assert len(values) == 1
    assert None not in values
    assert len({sequence_hash(policy, e) for e in (A1, A2, B1)}) == 1


def test_fully_concurrent_gives_every_event_its_identity() -> None:
    policy = FullyConcurrentPolicy()
    assert [policy.sequence_value(e) for e in (A1, A2, B1)] == [
        "order-a#1",
        "order-a#2",
        "order-b#1",
    ]
    no_constraint = CallableSequencingPolicy(lambda event: None)
    for event in (A1, A2, B1):
        assert sequence_hash(policy, event) == sequence_hash(no_constraint, event)


def test_no_value_hashes_the_event_identity() -> None:
    policy = CallableSequencingPolicy(lambda event: None)
    assert policy.sequence_value(A2) is None
    assert sequence_hash(policy, A2) == stable_hash("order-a#2")


def test_a_callable_policy_uses_the_function_value() -> None:
    policy = CallableSequencingPolicy(lambda event: event.persistence_id.split("-")[0])
    assert policy.sequence_value(B1) == "order"
    assert sequence_hash(policy, B1) == stable_hash("order")


@pytest.mark.parametrize(
    ("payload", "value"),
    [
        ({"customer": "c-7"}, "c-7"),
        ({"customer": 7}, "7"),
        ({"customer": True}, "true"),
        ({"customer": {"b": 1, "a": [1, 2]}}, '{"a":[1,2],"b":1}'),
        ({"customer": ""}, ""),
    ],
)
def test_the_property_policy_reads_a_top_level_key(payload: object, value: str) -> None:
    policy = PropertySequencingPolicy("customer")
    assert policy.sequence_value(Event("order-a", 1, payload)) == value


@pytest.mark.parametrize(
    "payload",
    [{"other": "x"}, {"customer": None}, b"customer", ["customer"], "customer", None, 7],
)
def test_the_property_policy_falls_back_when_the_key_is_missing(payload: object) -> None:
    event = Event("order-a", 3, payload)
    assert PropertySequencingPolicy("customer").sequence_value(event) == "order-a"
    concurrent = PropertySequencingPolicy("customer", fallback=FullyConcurrentPolicy())
    assert concurrent.sequence_value(event) == "order-a#3"


def test_the_property_policy_refuses_values_that_are_not_json() -> None:
    event = Event("order-a", 4, {"customer": object()})
    with pytest.raises(InvalidInputError, match=r"'customer'.*order-a#4"):
        PropertySequencingPolicy("customer").sequence_value(event)


@pytest.mark.parametrize("name", ["", 5, None, ["customer"]])
def test_the_property_policy_needs_a_name(name: object) -> None:
    """5 was accepted and never found among a JSON object's keys: every event fell back."""
    with pytest.raises(ConfigurationError, match="needs a non-empty property name, got "):
        PropertySequencingPolicy(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("fallback", [None, "per_aggregate", 0])
def test_the_property_policy_needs_a_policy_to_fall_back_to(fallback: object) -> None:
    """It failed at the first payload without the property, in a processor's worker thread."""
    with pytest.raises(ConfigurationError, match=r"^fallback must be a SequencingPolicy"):
        PropertySequencingPolicy("customer", fallback=fallback)  # type: ignore[arg-type]


@pytest.mark.parametrize("fn", [None, "customer", 5])
def test_a_callable_policy_needs_a_function(fn: object) -> None:
    with pytest.raises(ConfigurationError, match="needs a function, got "):
        CallableSequencingPolicy(fn)  # type: ignore[arg-type]


def test_journal_events_and_envelopes_are_sequenced_events() -> None:
    offset = TimeUUID.from_fields(timestamp_100ns=10**15, clock_seq=1, node=2)
    persisted: SequencedEvent = PersistedEvent(
        persistence_id=PersistenceId("order-a"),
        sequence_nr=SequenceNr(2),
        timeuuid=offset,
        writer_uuid="w",
        serializer="json",
        manifest="",
        payload_bytes=b'{"customer":"c-1"}',
        metadata_json=None,
        tags={},
    )
    envelope: SequencedEvent = EventEnvelope(
        offset_key=offset.to_bytes(),
        persistence_id=PersistenceId("order-a"),
        tag_pid_sequence_nr=TagPidSequenceNr(1),
        sequence_nr=SequenceNr(2),
        serializer="json",
        manifest="",
        payload_bytes=b'{"customer":"c-1"}',
        metadata_json=None,
        tags_json="{}",
    )
    policies: list[SequencingPolicy] = [
        SequentialPerAggregatePolicy(),
        FullySequentialPolicy(),
        FullyConcurrentPolicy(),
        PropertySequencingPolicy("customer"),
    ]
    expected = ["order-a", FullySequentialPolicy().sequence_value(A1), "order-a#2", "c-1"]
    for event in (persisted, envelope):
        assert [p.sequence_value(event) for p in policies] == expected


def _hashes_in_subprocess(seed: str, values: list[str]) -> dict[str, object]:
    script = (
        "import json, sys\n"
        "from ordo.hashing import stable_hash\n"
        "values = json.loads(sys.argv[1])\n"
        "print(json.dumps({'stable': [stable_hash(v) for v in values],"
        " 'builtin': [hash(v) for v in values]}))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(values)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    output: dict[str, object] = json.loads(result.stdout)
    return output


def test_the_sequence_hash_is_the_same_in_another_process() -> None:
    events = [A1, A2, B1, Event("kunde-ü", 9), Event("", 1)]
    policies: list[SequencingPolicy] = [SequentialPerAggregatePolicy(), FullyConcurrentPolicy()]
    values = [str(p.sequence_value(e)) for p in policies for e in events]
    here = [sequence_hash(p, e) for p in policies for e in events]
    seeded_123 = _hashes_in_subprocess("123", values)
    seeded_456 = _hashes_in_subprocess("456", values)
    assert seeded_123["stable"] == seeded_456["stable"] == here
    assert seeded_123["builtin"] != seeded_456["builtin"]  # why hash() cannot be used
    assert all(0 <= h < 2**32 for h in here)


def test_a_hash_lands_in_exactly_one_of_the_initial_segments() -> None:
    quarters = [*Segment(0, 1).split(), *Segment(1, 1).split()]
    for event in (A1, A2, B1):
        value_hash = sequence_hash(SequentialPerAggregatePolicy(), event)
        assert sum(s.matches(value_hash) for s in quarters) == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("per_aggregate", SequentialPerAggregatePolicy()),
        ("sequential", FullySequentialPolicy()),
        ("concurrent", FullyConcurrentPolicy()),
        ("property:customer", PropertySequencingPolicy("customer")),
        ("property:a:b", PropertySequencingPolicy("a:b")),
    ],
)
def test_policies_are_named_for_settings_and_the_command_line(
    name: str, expected: SequencingPolicy
) -> None:
    assert policy_from_name(name) == expected


@pytest.mark.parametrize(
    "name",
    # None and 5 (a TOML value of another type) were AttributeErrors.
    ["", "fifo", "Sequential", "per-aggregate", "property:", "property", " sequential", None, 5],
)
def test_an_unknown_policy_name_lists_the_valid_ones(name: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        policy_from_name(name)
    assert repr(name) in str(raised.value)
    assert VALID_NAMES in str(raised.value)
