"""persisted_event(), the journal's positional PersistedEvent constructor, against the dataclass."""

from __future__ import annotations

import dataclasses

import pytest

from ordo.journal.event import PersistedEvent, persisted_event
from ordo.time import TimeUUID


def test_it_sets_every_field_as_the_dataclass_constructor_does() -> None:
    """A field added to PersistedEvent but not to persisted_event fails here, not in a query."""
    values: dict[str, object] = {
        "persistence_id": "p",
        "sequence_nr": 7,
        "timeuuid": TimeUUID.min_for_epoch_ns(0),
        "writer_uuid": "w",
        "serializer": "json",
        "manifest": "m",
        "payload_bytes": b"{}",
        "metadata_json": '{"k":1}',
        "tags": {"t": 3},
    }
    assert [field.name for field in dataclasses.fields(PersistedEvent)] == list(values)

    built = persisted_event(*values.values())  # type: ignore[arg-type]

    assert built == PersistedEvent(**values)  # type: ignore[arg-type]
    assert {name: getattr(built, name) for name in values} == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.manifest = "other"  # type: ignore[misc]
