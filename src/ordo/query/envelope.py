"""What an events-by-tag query delivers: one envelope per tag_views row, decoded lazily."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from ordo.journal.event import decode_tags
from ordo.journal.serialization import deserialize_metadata, deserialize_payload
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr


class KeyRun(NamedTuple):
    """One persistence id's rows in a page of keys: consecutive tag pid sequence nrs in order.

    What Spark's planner decides on, without the payload: a page of 50,000 keys from 1,000
    persistence ids is 1,000 runs, and a single row is a run whose first and last agree. The
    last row's fields carry the RowKey names, so a run is a RowKey of its last row.
    """

    first_key: bytes
    first_nr: TagPidSequenceNr
    offset_key: bytes
    """The last row's offset (sortable encoding)."""
    persistence_id: PersistenceId
    tag_pid_sequence_nr: TagPidSequenceNr
    """The last row's tag pid sequence nr."""


class EventEnvelope(NamedTuple):
    """One delivered event. Fields are the stored columns; everything else is decoded on use.

    A NamedTuple rather than a dataclass because a query builds one per row and reads
    hundreds of thousands of rows a second: the database row becomes the envelope as is, and
    the payload, tags and offset are only decoded when asked for. Immutable, thread-safe.
    """

    offset_key: bytes
    """The offset's sortable encoding (`TimeUUID.to_bytes()`); `offset` decodes it."""
    persistence_id: PersistenceId
    tag_pid_sequence_nr: TagPidSequenceNr
    sequence_nr: SequenceNr
    serializer: str
    manifest: str
    payload_bytes: bytes
    metadata_json: str | None
    tags_json: str

    @property
    def offset(self) -> TimeUUID:
        """The event's offset: store it (inclusive) to resume a query after this event."""
        return TimeUUID.from_bytes(self.offset_key)

    @property
    def timestamp(self) -> datetime:
        """When the event was appended, by its writer's clock (UTC)."""
        return self.offset.datetime

    @property
    def payload(self) -> object:
        """The payload as the application gave it (bytes, or the decoded JSON value)."""
        of = (self.persistence_id, self.sequence_nr)
        return deserialize_payload(self.serializer, self.payload_bytes, of=of)

    @property
    def metadata(self) -> dict[str, object] | None:
        """The decoded metadata object, or None."""
        return deserialize_metadata(self.metadata_json, of=(self.persistence_id, self.sequence_nr))

    @property
    def tags(self) -> dict[Tag, TagPidSequenceNr]:
        """Every tag of the event with its tag pid sequence nr."""
        return decode_tags(self.tags_json, of=(self.persistence_id, self.sequence_nr))

    def to_json_dict(self) -> dict[str, object]:
        """A JSON-ready view, used by `ordo query --json`."""
        payload = self.payload
        return {
            "offset": str(self.offset),
            "timestamp": self.timestamp.isoformat(),
            "persistence_id": self.persistence_id,
            "sequence_nr": self.sequence_nr,
            "tag_pid_sequence_nr": self.tag_pid_sequence_nr,
            "manifest": self.manifest,
            "payload": payload.hex() if isinstance(payload, bytes) else payload,
            "payload_encoding": self.serializer,
            "metadata": self.metadata,
            "tags": dict(sorted(self.tags.items())),
        }
