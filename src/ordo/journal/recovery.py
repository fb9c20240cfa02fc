"""Recovery of a persistence id: rebuild its in-memory state and complete its tag views.

Seed 000, "Recovery/Restart scenarios": tag_write_progress is written after the tag_views rows,
so after a crash it may lag. Events past the progress are sent to the tag writer again with the
tag pid sequence nrs they were given at append time (stored with the event), and upserted.
Events that were only buffered in a killed writer are found the same way: their progress was
never written. `tag_scanning` records up to where all tagged events are known to be written, so
the next recovery reads only the events after it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ordo.journal.event import PersistedEvent
from ordo.journal.ports import JournalStore
from ordo.settings import EventsByTagSettings
from ordo.tagging import TaggedEvent, TagViewStore, TagWriters
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class PidState:
    """What a journal must know to append to a persistence id. Guarded by the id's lock."""

    highest: SequenceNr
    tag_pid_sequence_nrs: dict[Tag, TagPidSequenceNr] = field(default_factory=dict)


def tagged_events(event: PersistedEvent, settings: EventsByTagSettings) -> list[TaggedEvent]:
    """The tag_views rows of one journal event, one per tag."""
    bucket = settings.bucket_size.key(event.timeuuid.epoch_ms)
    return [
        TaggedEvent(
            tag=tag,
            time_bucket=bucket,
            timeuuid=event.timeuuid,
            persistence_id=event.persistence_id,
            sequence_nr=event.sequence_nr,
            tag_pid_sequence_nr=number,
        )
        for tag, number in event.tags.items()
    ]


def recover_persistence_id(
    persistence_id: PersistenceId,
    store: JournalStore,
    tag_store: TagViewStore,
    tag_writers: TagWriters,
    settings: EventsByTagSettings,
) -> PidState:
    """Complete the tag views of a persistence id and return its state (caller holds its lock)."""
    highest = store.highest_sequence_nr(persistence_id)
    progress = tag_store.read_progress(persistence_id)
    scanned = tag_store.read_tag_scanning(persistence_id)
    counters = {tag: p.tag_pid_sequence_nr for tag, p in progress.items()}
    missing: list[TaggedEvent] = []
    if scanned < highest:
        for event in store.read_events(
            persistence_id, from_sequence_nr=SequenceNr(scanned + 1), to_sequence_nr=highest
        ):
            for tagged in tagged_events(event, settings):
                counters[tagged.tag] = max(
                    counters.get(tagged.tag, TagPidSequenceNr(0)), tagged.tag_pid_sequence_nr
                )
                written = progress.get(tagged.tag)
                if written is None or tagged.tag_pid_sequence_nr > written.tag_pid_sequence_nr:
                    missing.append(tagged)
        if missing:
            logger.info(
                "recovery rewrites tag views: persistence_id=%s events=%d",
                persistence_id,
                len(missing),
            )
            tag_writers.write(missing)
            tag_writers.flush()
        tag_store.write_tag_scanning(persistence_id, highest)
    return PidState(highest=highest, tag_pid_sequence_nrs=counters)
