"""Recovery of a persistence id: rebuild its in-memory state and complete its tag views.

Seed 000, "Recovery/Restart scenarios": tag_write_progress is written after the tag_views rows,
so after a crash it may lag. Events past the progress are sent to the tag writer again with the
tag pid sequence nrs they were given at append time (stored with the event), and upserted.
Events that were only buffered in a killed writer are found the same way: their progress was
never written. `tag_scanning` records up to where all tagged events are known to be written, so
the next recovery reads only the events after it (and the newest, which the next offset follows).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ordo.journal.event import PersistedEvent
from ordo.journal.ports import JournalStore
from ordo.settings import EventsByTagSettings
from ordo.tagging import TagViewStore, TagWrite, TagWriters
from ordo.time import BucketSize, TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class PidState:
    """What a journal must know to append to a persistence id. Guarded by the id's lock."""

    highest: SequenceNr
    tag_pid_sequence_nrs: dict[Tag, TagPidSequenceNr] = field(default_factory=dict)
    last_offset: TimeUUID | None = None
    """The greatest offset known of the id's events (its tagged ones at least): its next events
    get greater ones, even from a writer whose clock is behind the one that wrote it last (a
    query delivers an id's events in offset order, so one numbered higher but stamped earlier
    would be a gap)."""


TaggedEntry = tuple[PersistedEvent, Tag, TagPidSequenceNr]


def tag_writes(
    entries: Iterable[TaggedEntry], bucket_size: BucketSize, *, bucket: TimeBucket | None = None
) -> list[TagWrite]:
    """Group (event, tag, tag pid sequence nr) entries, in sequence nr order, into TagWrites.

    Consecutive entries of one tag in one time bucket become one write, so an append of a
    hundred events costs the tag writer one buffered item per tag, not a hundred. `bucket`,
    when the caller knows that every entry is in that one bucket (an append whose first and
    last offsets share it), spares working out each entry's.
    """
    closed: list[_Run] = []
    runs: dict[Tag, _Run] = {}
    for event, tag, number in entries:
        event_bucket = bucket_size.key_of(event.timeuuid) if bucket is None else bucket
        run = runs.get(tag)
        if run is not None and run.bucket == event_bucket:
            run.last, run.events, run.number = event, run.events + 1, number
            continue
        if run is not None:
            closed.append(run)
        runs[tag] = _Run(tag, event_bucket, event, event, 1, number)
    return [run.write() for run in (*closed, *runs.values())]


def shared_bucket(offsets: Sequence[TimeUUID], bucket_size: BucketSize) -> TimeBucket | None:
    """The bucket of every one of the ascending `offsets` if they share one, else None.

    Between the first and the last there is no other bucket: an append's offsets (consecutive
    ticks of one clock reading) nearly always share one, so `tag_writes` is spared a bucket per
    event.
    """
    first = bucket_size.key_of(offsets[0])
    return first if first == bucket_size.key_of(offsets[-1]) else None


@dataclass(slots=True)
class _Run:
    """A TagWrite being grouped (mutable while the entries of one append are walked)."""

    tag: Tag
    bucket: TimeBucket
    first: PersistedEvent
    last: PersistedEvent
    events: int
    number: TagPidSequenceNr

    def write(self) -> TagWrite:
        return TagWrite(
            tag=self.tag,
            time_bucket=self.bucket,
            persistence_id=self.first.persistence_id,
            from_sequence_nr=self.first.sequence_nr,
            to_sequence_nr=self.last.sequence_nr,
            events=self.events,
            last_tag_pid_sequence_nr=self.number,
            last_timeuuid=self.last.timeuuid,
        )


def recover_persistence_id(
    persistence_id: PersistenceId,
    store: JournalStore,
    tag_store: TagViewStore,
    tag_writers: TagWriters,
    settings: EventsByTagSettings,
    before_reading: Callable[[PersistenceId], None],
) -> PidState:
    """Complete the tag views of a persistence id and return its state (caller holds its lock).

    `before_reading(persistence_id)` runs once the id is known to have events, before anything
    else of it is read: the journal lists the id in its writer lease there, so that no tool
    changes what the state read next depends on.
    """
    highest = store.highest_sequence_nr(persistence_id)
    if highest == 0:
        return PidState(highest=highest)  # a new persistence id: nothing to recover
    before_reading(persistence_id)
    # tag_scanning first: whoever wrote it had written the progress of every event up to it,
    # so a progress read after it covers those events. Read the other way round, another
    # recovery could complete in between, and the events below its tag_scanning would be
    # numbered from a progress older than them.
    scanned = tag_store.read_tag_scanning(persistence_id)
    progress = tag_store.read_progress(persistence_id)
    counters = {tag: p.tag_pid_sequence_nr for tag, p in progress.items()}
    last_offset = max((p.timeuuid for p in progress.values()), default=None)
    missing: list[TaggedEntry] = []
    # The newest event at least, scanned or not: the next offset must follow it, and progress
    # knows only tagged events (a writer whose clock is behind went before an untagged one).
    first = SequenceNr(min(scanned + 1, highest))
    for event in store.read_events(persistence_id, from_sequence_nr=first, to_sequence_nr=highest):
        last_offset = event.timeuuid if last_offset is None else max(last_offset, event.timeuuid)
        for tag, number in event.tags.items():
            counters[tag] = max(counters.get(tag, TagPidSequenceNr(0)), number)
            written = progress.get(tag)
            if written is None or number > written.tag_pid_sequence_nr:
                missing.append((event, tag, number))
    if missing:
        logger.info(
            "recovery rewrites tag views: persistence_id=%s events=%d",
            persistence_id,
            len(missing),
        )
        tag_writers.write(tag_writes(missing, settings.bucket_size))
        tag_writers.flush()
    if scanned < highest:
        tag_store.write_tag_scanning(persistence_id, highest)
    return PidState(highest=highest, tag_pid_sequence_nrs=counters, last_offset=last_offset)
