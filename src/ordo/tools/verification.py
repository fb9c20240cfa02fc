"""Compare the tag views with the journal: every tagged event exactly once, numbered right."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ordo.journal.ports import JournalStore
from ordo.tagging import TagViewStore
from ordo.time import BucketSize
from ordo.tools.ports import ExpiryHorizons
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr

if TYPE_CHECKING:  # a runtime import would be circular: storage imports tools.ports
    from ordo.storage.stores import Stores

TagViewKey = tuple[Tag, PersistenceId, TagPidSequenceNr]


@dataclass(frozen=True, slots=True, kw_only=True)
class TagViewReport:
    """The differences between the journal's tagged events and the tag_views rows."""

    tagged_events: int
    """Tagged journal events that should have a row: those before their tag's expiry horizon
    do not (ordo.tools.ports.ExpiryHorizons)."""
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
    journal: JournalStore,
    tag_views: TagViewStore,
    bucket_size: BucketSize,
    *,
    horizons: ExpiryHorizons,
) -> TagViewReport:
    """Read both sides in full and compare them (for demos, tests and small journals).

    A row matches its event when the tag pid sequence nr, sequence nr, offset and time bucket
    all agree. Events deleted from the journal are not known here, so their rows would count as
    unexpected: run this on journals without deletes. Events before their tag's expiry horizon
    (`horizons`: the operations store's `expiry_horizons()`, what `ordo verify` reads) had
    their rows deleted on purpose: they are not missing, and a row of one that is still there
    (an expiry that stopped half way) still matches. They are required: left out, every event a
    TTL expired would be reported missing.
    """
    expected: dict[TagViewKey, tuple[int, bytes, int]] = {}
    due: set[TagViewKey] = set()  # keys whose row should be there (events not expired)
    numbered_alike: set[TagViewKey] = set()
    events = 0
    for pid in journal.persistence_ids():
        highest = journal.highest_sequence_nr(pid)
        for event in journal.read_events(
            pid, from_sequence_nr=SequenceNr(1), to_sequence_nr=highest
        ):
            bucket = bucket_size.key_of(event.timeuuid)
            for tag, number in event.tags.items():
                key = (tag, pid, number)
                if not horizons.is_expired(tag, event.timeuuid):
                    events += 1
                    due.add(key)
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
        missing=tuple(sorted(key for key in due if key not in seen or key in numbered_alike)),
        unexpected=tuple(sorted(unexpected)),
        duplicated=tuple(sorted(key for key, count in seen.items() if count > 1)),
    )


def check_tag_views_of(stores: Stores, bucket_size: BucketSize) -> TagViewReport:
    """`check_tag_views` of the database `stores` is open on, with its expiry horizons.

    The horizons are those its operations store reads, as `ordo verify` does: the demo's
    verdict and the tests' check of a journal take the same ones.
    """
    return check_tag_views(
        stores.journal,
        stores.tag_views,
        bucket_size,
        horizons=stores.operations.expiry_horizons(),
    )
