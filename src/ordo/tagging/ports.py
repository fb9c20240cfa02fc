"""What the tag writer needs from storage, and the rows it hands over."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket


@dataclass(frozen=True, slots=True, kw_only=True)
class TaggedEvent:
    """The key of one tag_views row: which journal event is where in a tag's view."""

    tag: Tag
    time_bucket: TimeBucket
    timeuuid: TimeUUID
    persistence_id: PersistenceId
    sequence_nr: SequenceNr
    tag_pid_sequence_nr: TagPidSequenceNr


@dataclass(frozen=True, slots=True, kw_only=True)
class TagWrite:
    """Journal events of one persistence id, one tag and one time bucket, to write as rows.

    The tag writer buffers these instead of single rows: one append of many events is one
    TagWrite, and the store expands it to tag_views rows inside the database, from the events'
    stored tag pid sequence nrs and payloads, so no per-row work happens in Python. The range
    `from_sequence_nr..to_sequence_nr` is inclusive; events in it without the tag are skipped.
    """

    tag: Tag
    time_bucket: TimeBucket
    persistence_id: PersistenceId
    from_sequence_nr: SequenceNr
    to_sequence_nr: SequenceNr
    events: int
    """How many events of the range carry the tag (what batch sizes count)."""
    last_tag_pid_sequence_nr: TagPidSequenceNr
    last_timeuuid: TimeUUID

    def progress(self) -> TagProgress:
        """The progress recorded once this write is stored."""
        return TagProgress(
            persistence_id=self.persistence_id,
            tag=self.tag,
            sequence_nr=self.to_sequence_nr,
            tag_pid_sequence_nr=self.last_tag_pid_sequence_nr,
            timeuuid=self.last_timeuuid,
        )


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


class TagViewWriter(Protocol):
    """What the tag writer needs: the two writes, rows first, then their progress."""

    BACKGROUND_WRITES: ClassVar[bool]
    """Whether full batches are better written by a background thread than by the appender.

    True where the database does a write's work in its own process (PostgreSQL): the next
    append then runs while the previous batch is written. False for SQLite, whose writes are
    serialized in this process, so a second writing thread only adds contention (measured:
    bench/append.py, docs/benchmarks.md).
    """

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        """Upsert the rows of the writes in one transaction; writing a row again changes nothing."""
        ...

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        """Record progress; a row only ever moves forward (older progress is ignored)."""
        ...


class TagViewStore(TagViewWriter, Protocol):
    """The tables `tag_views`, `tag_write_progress` and `tag_scanning`. Thread-safe."""

    def read_progress(self, persistence_id: PersistenceId) -> Mapping[Tag, TagProgress]:
        """The recorded progress of every tag of the persistence id."""
        ...

    def read_tag_scanning(self, persistence_id: PersistenceId) -> SequenceNr:
        """Up to which sequence nr (inclusive) all tagged events are known written; 0 if none."""
        ...

    def write_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Record that every tagged event up to `sequence_nr` (inclusive) is in tag_views."""
        ...

    def announce(self, tag: Tag) -> None:
        """Tell queries in other processes that `tag` was written.

        A no-op where the backend has no cross-process notification: SQLite notifies within
        the process only.
        """
        ...

    def tags(self) -> Sequence[TagSummary]:
        """Every tag that has tag_views rows, with counts (a full scan: for tools)."""
        ...

    def heads(self, tag: Tag) -> Mapping[PersistenceId, int]:
        """The highest tag pid sequence nr of every persistence id in a tag's views (a scan)."""
        ...

    def tag_view_entries(self, tag: Tag) -> Iterator[TaggedEvent]:
        """Every row key of one tag's views in (bucket, timeuuid) order (for checks and tools)."""
        ...
