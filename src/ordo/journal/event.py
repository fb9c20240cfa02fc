"""The events an application appends, and the events the journal gives back."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ordo.journal import validation
from ordo.journal.serialization import (
    EventKey,
    deserialize_metadata,
    deserialize_payload,
    stored_json,
)
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr

_QUOTED_TAGS: dict[str, str] = {}
_QUOTED_TAGS_LIMIT = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """One event to append: a payload (bytes or a JSON value), optional metadata and tags.

    `manifest` names the event type for the application's own deserialization; ordo stores it
    and hands it back untouched. A JSON payload comes back as `json` reads what it wrote:
    tuples as lists, non-text object keys as text (keys are not walked per event to refuse
    them: the append path stays one C encoder call).
    """

    payload: object
    manifest: str = ""
    metadata: Mapping[str, object] | None = None
    tags: frozenset[Tag] = field(default_factory=frozenset)

    @classmethod
    def of(
        cls,
        payload: object,
        *,
        tags: Iterable[str] = (),
        manifest: str = "",
        metadata: Mapping[str, object] | None = None,
    ) -> NewEvent:
        """Build an event, validating every tag (InvalidIdentifierError on a bad one)."""
        return cls(
            payload=payload,
            manifest=manifest,
            metadata=metadata,
            tags=frozenset(validation.tag(t) for t in validation.tag_collection(tags)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistedEvent:
    """An event as stored in the journal (`messages`). Payload decoding is lazy.

    `tags` maps each of the event's tags to its tag pid sequence nr: the position of this event
    among the events of (persistence_id, tag), assigned when the event was appended.
    """

    persistence_id: PersistenceId
    sequence_nr: SequenceNr
    timeuuid: TimeUUID
    writer_uuid: str
    serializer: str
    manifest: str
    payload_bytes: bytes
    metadata_json: str | None
    tags: Mapping[Tag, TagPidSequenceNr]

    @property
    def payload(self) -> object:
        """The payload as the application gave it (bytes, or the decoded JSON value)."""
        of = (self.persistence_id, self.sequence_nr)
        return deserialize_payload(self.serializer, self.payload_bytes, of=of)

    @property
    def metadata(self) -> dict[str, object] | None:
        """The decoded metadata object, or None when the event had none."""
        return deserialize_metadata(self.metadata_json, of=(self.persistence_id, self.sequence_nr))

    @property
    def timestamp(self) -> datetime:
        """When the event was appended, by the writer's clock (UTC)."""
        return self.timeuuid.datetime

    def to_json_dict(self) -> dict[str, object]:
        """A JSON-ready view, used by the command line's --json output."""
        payload = self.payload
        return {
            "persistence_id": self.persistence_id,
            "sequence_nr": self.sequence_nr,
            "offset": str(self.timeuuid),
            "timestamp": self.timestamp.isoformat(),
            "writer_uuid": self.writer_uuid,
            "manifest": self.manifest,
            "payload": payload.hex() if isinstance(payload, bytes) else payload,
            "payload_encoding": self.serializer,
            "metadata": self.metadata,
            "tags": dict(sorted(self.tags.items())),
        }


def persisted_event(
    persistence_id: PersistenceId,
    sequence_nr: SequenceNr,
    timeuuid: TimeUUID,
    writer_uuid: str,
    serializer: str,
    manifest: str,
    payload_bytes: bytes,
    metadata_json: str | None,
    tags: Mapping[Tag, TagPidSequenceNr],
) -> PersistedEvent:
    """`PersistedEvent(...)` by position, for the journal, which builds one per appended event.

    The frozen dataclass's `__init__` parses nine keywords and looks up `object.__setattr__`
    for each field: about half of this cost again. Every field is set, as there (a test checks
    the two against each other).
    """
    event = object.__new__(PersistedEvent)
    set_field = object.__setattr__
    set_field(event, "persistence_id", persistence_id)
    set_field(event, "sequence_nr", sequence_nr)
    set_field(event, "timeuuid", timeuuid)
    set_field(event, "writer_uuid", writer_uuid)
    set_field(event, "serializer", serializer)
    set_field(event, "manifest", manifest)
    set_field(event, "payload_bytes", payload_bytes)
    set_field(event, "metadata_json", metadata_json)
    set_field(event, "tags", tags)
    return event


def encode_tags(tags: Mapping[Tag, TagPidSequenceNr]) -> str:
    """The stored form of an event's tags: a JSON object tag -> tag pid sequence nr.

    Called once per appended event, so the quoted tag names are cached rather than encoded
    again each time (an application has few distinct tags; the cache is bounded anyway).
    """
    parts = []
    for tag in sorted(tags):
        quoted = _QUOTED_TAGS.get(tag)
        if quoted is None:
            if len(_QUOTED_TAGS) >= _QUOTED_TAGS_LIMIT:
                _QUOTED_TAGS.clear()
            quoted = _QUOTED_TAGS[tag] = json.dumps(tag, ensure_ascii=False)
        parts.append(f"{quoted}:{tags[tag]}")
    return "{" + ",".join(parts) + "}"


def decode_tags(text: str, *, of: EventKey) -> dict[Tag, TagPidSequenceNr]:
    """Invert encode_tags() for the tags of event `of`."""
    decoded: dict[Tag, TagPidSequenceNr] = stored_json(text, what="tags", of=of)
    return decoded


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendReceipt:
    """What one append wrote: sequence nrs `first..last` (inclusive) and their offsets."""

    persistence_id: PersistenceId
    first_sequence_nr: SequenceNr
    last_sequence_nr: SequenceNr
    offsets: tuple[TimeUUID, ...]
