"""Compare the tag views with the journal: every tagged event exactly once, numbered right."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ordo.journal.ports import JournalStore
from ordo.tagging import TagViewStore
from ordo.time import BucketSize
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr

TagViewKey = tuple[Tag, PersistenceId, TagPidSequenceNr]


@dataclass(frozen=True, slots=True, kw_only=True)
class TagViewReport:
    """The differences between the journal's tagged events and the tag_views rows."""

    tagged_events: int
    tag_view_rows: int
    missing: tuple[TagViewKey, ...]
    """Tagged journal events without a tag_views row of their own; a number the journal gave
    to two events of one persistence id is one (its one row cannot be both events')."""
    unexpected: tuple[TagViewKey, ...]
    """tag_views rows that no journal event explains (or that disagree with it)."""
    duplicated: tuple[TagViewKey, ...]
    """(tag, persistence id, tag pid sequence nr) present more than once."""

    @property
    def is_clean(self) -> bool:
        """Whether the tag views hold every tagged event exactly once."""
        return not (self.missing or self.unexpected or self.duplicated)


def check_tag_views(
    journal: JournalStore, tag_views: TagViewStore, bucket_size: BucketSize
) -> TagViewReport:
    """Read both sides in full and compare them (for demos, tests and small journals).

    A row matches its event when the tag pid sequence nr, sequence nr, offset and time bucket
    all agree. Events deleted from the journal are not known here, so their rows would count as
    unexpected: run this on journals without deletes.
    """
    expected: dict[TagViewKey, tuple[int, bytes, int]] = {}
    numbered_alike: set[TagViewKey] = set()
    events = 0
    for pid in journal.persistence_ids():
        highest = journal.highest_sequence_nr(pid)
        for event in journal.read_events(
            pid, from_sequence_nr=SequenceNr(1), to_sequence_nr=highest
        ):
            bucket = bucket_size.key_of(event.timeuuid)
            for tag, number in event.tags.items():
                events += 1
                key = (tag, pid, number)
                if key in expected:
                    numbered_alike.add(key)  # a later event replacing it hid a missing row
                    continue
                expected[key] = (event.sequence_nr, event.timeuuid.to_bytes(), bucket)
    seen: Counter[TagViewKey] = Counter()
    unexpected: list[TagViewKey] = []
    for summary in tag_views.tags():
        for row in tag_views.tag_view_entries(summary.tag):
            key = (row.tag, row.persistence_id, row.tag_pid_sequence_nr)
            seen[key] += 1
            wanted = (row.sequence_nr, row.timeuuid.to_bytes(), row.time_bucket)
            if expected.get(key) != wanted:
                unexpected.append(key)
    return TagViewReport(
        tagged_events=events,
        tag_view_rows=sum(seen.values()),
        missing=tuple(sorted(key for key in expected if key not in seen or key in numbered_alike)),
        unexpected=tuple(sorted(unexpected)),
        duplicated=tuple(sorted(key for key, count in seen.items() if count > 1)),
    )
