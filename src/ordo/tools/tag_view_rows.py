"""What a fresh tag write produces for journal events: the pure core of every rebuild.

The journal assigns tag pid sequence nrs at append time, counting per (persistence id, tag)
from 1, and the tag writer puts each tagged event in the time bucket of its TimeUUID. A rebuild
recomputes both from the events alone: numbers count on from the first event still in the
journal (events deleted with delete_to keep their rows and their numbers), buckets come from
the TimeUUID. Events before their tag's expiry horizon get no row (the expiry deleted it on
purpose) but are counted all the same, so the later ones keep the tag writer's numbers. The Spark
rebuild does the same with window functions (ordo.spark.rebuild).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ordo.journal import PersistedEvent
from ordo.tagging import TagProgress
from ordo.time import BucketSize
from ordo.tools.ports import ExpiryHorizons, TagViewRow
from ordo.types import Tag, TagPidSequenceNr


@dataclass(slots=True)
class RebuiltTagViews:
    """The rows and last progress per tag of one persistence id's events (built in order)."""

    rows: dict[Tag, list[TagViewRow]] = field(default_factory=dict)
    progress: dict[Tag, TagProgress] = field(default_factory=dict)
    highest: int = 0
    """The last sequence nr seen."""

    def all_rows(self) -> list[TagViewRow]:
        """Every row, tag by tag."""
        return [row for rows in self.rows.values() for row in rows]


def rebuild_tag_views(
    events: Iterable[PersistedEvent],
    bucket_size: BucketSize,
    *,
    horizons: ExpiryHorizons,
    tags: Sequence[Tag] | None = None,
) -> RebuiltTagViews:
    """The tag_views rows and progress of one persistence id's events (ascending sequence nr).

    Only `tags` are built when given. The first event of a tag sets the base number (its
    stored tag pid sequence nr: 1 unless earlier events were deleted); every later one counts
    on by one, as the journal did when it appended them. Events `horizons` says expired are
    numbered and set the progress (recovery goes on from it) but get no row.
    """
    wanted = None if tags is None else frozenset(tags)
    built = RebuiltTagViews()
    counters: dict[Tag, int] = {}
    for event in events:
        built.highest = event.sequence_nr
        for tag, stored in event.tags.items():
            if wanted is not None and tag not in wanted:
                continue
            number = TagPidSequenceNr(counters[tag] + 1 if tag in counters else stored)
            counters[tag] = number
            rows = built.rows.setdefault(tag, [])
            if not horizons.is_expired(tag, event.timeuuid):
                rows.append(
                    TagViewRow(
                        tag=tag,
                        time_bucket=bucket_size.key_of(event.timeuuid),
                        persistence_id=event.persistence_id,
                        sequence_nr=event.sequence_nr,
                        tag_pid_sequence_nr=number,
                    )
                )
            built.progress[tag] = TagProgress(
                persistence_id=event.persistence_id,
                tag=tag,
                sequence_nr=event.sequence_nr,
                tag_pid_sequence_nr=number,
                timeuuid=event.timeuuid,
            )
    return built
