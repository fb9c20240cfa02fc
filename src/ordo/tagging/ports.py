"""What the tag writer needs from storage, and the rows it hands over."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket


@dataclass(frozen=True, slots=True, kw_only=True)
class TaggedEvent:
    """The key of one tag_views row: which journal event goes where in a tag's view.

    The payload is not carried: the store copies it from `messages`, where it already is.
    """

    tag: Tag
    time_bucket: TimeBucket
    timeuuid: TimeUUID
    persistence_id: PersistenceId
    sequence_nr: SequenceNr
    tag_pid_sequence_nr: TagPidSequenceNr


@dataclass(frozen=True, slots=True, kw_only=True)
class TagProgress:
    """How far the tag views of one (persistence id, tag) are written (inclusive)."""

    persistence_id: PersistenceId
    tag: Tag
    sequence_nr: SequenceNr
    tag_pid_sequence_nr: TagPidSequenceNr
    timeuuid: TimeUUID


@dataclass(frozen=True, slots=True, kw_only=True)
class TagSummary:
    """What one tag's views hold (for `ordo tags`)."""

    tag: Tag
    events: int
    persistence_ids: int
    buckets: int
    first_bucket: TimeBucket
    last_bucket: TimeBucket


class TagViewStore(Protocol):
    """The tables `tag_views`, `tag_write_progress` and `tag_scanning`. Thread-safe."""

    def write_tag_views(self, events: Sequence[TaggedEvent]) -> None:
        """Upsert tag_views rows in one transaction; writing a row again changes nothing."""
        ...

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        """Record progress; a row only ever moves forward (older progress is ignored)."""
        ...

    def read_progress(self, persistence_id: PersistenceId) -> Mapping[Tag, TagProgress]:
        """The recorded progress of every tag of the persistence id."""
        ...

    def read_tag_scanning(self, persistence_id: PersistenceId) -> SequenceNr:
        """Up to which sequence nr (inclusive) all tagged events are known written; 0 if none."""
        ...

    def write_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Record that every tagged event up to `sequence_nr` (inclusive) is in tag_views."""
        ...

    def tags(self) -> Sequence[TagSummary]:
        """Every tag that has tag_views rows, with counts (a full scan: for tools)."""
        ...

    def tag_view_entries(self, tag: Tag) -> Iterator[TaggedEvent]:
        """Every row key of one tag's views in (bucket, timeuuid) order (for checks and tools)."""
        ...
