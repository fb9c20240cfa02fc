"""Conversions between the stored rows and ordo's values, shared by every SQL backend."""

from __future__ import annotations

from collections.abc import Sequence

from ordo.journal.event import PersistedEvent, decode_tags, encode_tags
from ordo.journal.ports import JournalSummary
from ordo.tagging import TaggedEvent, TagProgress, TagSummary
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket

MESSAGE_COLUMNS = (
    "persistence_id, sequence_nr, timeuuid, writer_uuid, serializer, manifest, payload, "
    "metadata, tags"
)
TAG_VIEW_KEY_COLUMNS = "tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, sequence_nr"
PROGRESS_COLUMNS = "persistence_id, tag, sequence_nr, tag_pid_sequence_nr, timeuuid"

TAG_SUMMARY_QUERY = (
    "SELECT tag, count(*), count(DISTINCT persistence_id), count(DISTINCT timebucket), "
    "min(timebucket), max(timebucket) FROM tag_views GROUP BY tag ORDER BY tag"
)

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
    persistence_id, sequence_nr = PersistenceId(str(pid)), SequenceNr(int(str(seq)))
    return PersistedEvent(
        persistence_id=persistence_id,
        sequence_nr=sequence_nr,
        timeuuid=TimeUUID.from_bytes(_bytes(uuid_bytes)),
        writer_uuid=str(writer),
        serializer=str(serializer),
        manifest=str(manifest),
        payload_bytes=_bytes(payload),
        metadata_json=None if metadata is None else str(metadata),
        tags=decode_tags(str(tags), of=(persistence_id, sequence_nr)),
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


def tag_summary_from_row(row: Sequence[object]) -> TagSummary:
    """A TagSummary from the columns of TAG_SUMMARY_QUERY."""
    tag, events, pids, buckets, first, last = row
    return TagSummary(
        tag=Tag(str(tag)),
        events=int(str(events)),
        persistence_ids=int(str(pids)),
        buckets=int(str(buckets)),
        first_bucket=TimeBucket(int(str(first))),
        last_bucket=TimeBucket(int(str(last))),
    )


def summary_from_row(row: Sequence[object] | None) -> JournalSummary:
    """A JournalSummary from the row of `SqlJournalStore.summary`'s query (None: all empty).

    Its columns: events, persistence ids, then the bucket size, schema version and journal id
    the metadata table records (each None when not recorded).
    """
    empty = (0, 0, None, 0, None)
    events, pids, bucket_size, version, journal_id = row if row is not None else empty
    return JournalSummary(
        events=int(str(events)),
        persistence_ids=int(str(pids)),
        bucket_size=None if bucket_size is None else str(bucket_size),
        schema_version=int(str(version or 0)),
        journal_id=None if journal_id is None else str(journal_id),
    )


def latest_progress(progress: Sequence[TagProgress]) -> list[TagProgress]:
    """One progress per (persistence id, tag), the furthest, in (persistence id, tag) order.

    An upsert may touch a row once; and two writers' upserts that touch the same rows must lock
    them in one order, or PostgreSQL stops one of them as a deadlock (two journals writing the
    same ids, or one recovering an id while another writes it).
    """
    latest: dict[tuple[str, str], TagProgress] = {}
    for p in progress:
        key = (p.persistence_id, p.tag)
        if key not in latest or latest[key].tag_pid_sequence_nr < p.tag_pid_sequence_nr:
            latest[key] = p
    return [latest[key] for key in sorted(latest)]


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    msg = f"expected bytes from the database, got {type(value).__name__}"
    raise TypeError(msg)
