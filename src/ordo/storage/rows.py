"""Conversions between the stored rows and ordo's values, shared by every SQL backend."""

from __future__ import annotations

from collections.abc import Sequence

from ordo.journal.event import PersistedEvent, decode_tags, encode_tags
from ordo.tagging import TaggedEvent, TagProgress
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket

MESSAGE_COLUMNS = (
    "persistence_id, sequence_nr, timeuuid, writer_uuid, serializer, manifest, payload, "
    "metadata, tags"
)
TAG_VIEW_KEY_COLUMNS = "tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, sequence_nr"
PROGRESS_COLUMNS = "persistence_id, tag, sequence_nr, tag_pid_sequence_nr, timeuuid"

MessageRow = tuple[str, int, bytes, str, str, str, bytes, str | None, str]


def message_row(event: PersistedEvent) -> MessageRow:
    """The `messages` row of an event, in MESSAGE_COLUMNS order."""
    return (
        event.persistence_id,
        event.sequence_nr,
        event.timeuuid.to_bytes(),
        event.writer_uuid,
        event.serializer,
        event.manifest,
        event.payload_bytes,
        event.metadata_json,
        encode_tags(event.tags),
    )


def event_from_row(row: Sequence[object]) -> PersistedEvent:
    """Invert message_row() (drivers hand back bytes, memoryview or str)."""
    pid, seq, uuid_bytes, writer, serializer, manifest, payload, metadata, tags = row
    return PersistedEvent(
        persistence_id=PersistenceId(str(pid)),
        sequence_nr=SequenceNr(int(str(seq))),
        timeuuid=TimeUUID.from_bytes(_bytes(uuid_bytes)),
        writer_uuid=str(writer),
        serializer=str(serializer),
        manifest=str(manifest),
        payload_bytes=_bytes(payload),
        metadata_json=None if metadata is None else str(metadata),
        tags=decode_tags(str(tags)),
    )


def tag_view_key_from_row(row: Sequence[object]) -> TaggedEvent:
    """A TaggedEvent from the columns TAG_VIEW_KEY_COLUMNS."""
    tag, bucket, uuid_bytes, pid, tag_pid_nr, seq = row
    return TaggedEvent(
        tag=Tag(str(tag)),
        time_bucket=TimeBucket(int(str(bucket))),
        timeuuid=TimeUUID.from_bytes(_bytes(uuid_bytes)),
        persistence_id=PersistenceId(str(pid)),
        sequence_nr=SequenceNr(int(str(seq))),
        tag_pid_sequence_nr=TagPidSequenceNr(int(str(tag_pid_nr))),
    )


def progress_from_row(row: Sequence[object]) -> TagProgress:
    """A TagProgress from the columns PROGRESS_COLUMNS."""
    pid, tag, seq, tag_pid_nr, uuid_bytes = row
    return TagProgress(
        persistence_id=PersistenceId(str(pid)),
        tag=Tag(str(tag)),
        sequence_nr=SequenceNr(int(str(seq))),
        tag_pid_sequence_nr=TagPidSequenceNr(int(str(tag_pid_nr))),
        timeuuid=TimeUUID.from_bytes(_bytes(uuid_bytes)),
    )


def latest_progress(progress: Sequence[TagProgress]) -> list[TagProgress]:
    """One progress per (persistence id, tag), the furthest; an upsert may touch a row once."""
    latest: dict[tuple[str, str], TagProgress] = {}
    for p in progress:
        key = (p.persistence_id, p.tag)
        if key not in latest or latest[key].tag_pid_sequence_nr < p.tag_pid_sequence_nr:
            latest[key] = p
    return list(latest.values())


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    msg = f"expected bytes from the database, got {type(value).__name__}"
    raise TypeError(msg)
