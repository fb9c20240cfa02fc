"""What the tag views contract tests share: settings and a clock reading of minute buckets,
the rows a tag holds, the rows the journal's events call for, and an id's progress in a tag.

The settings that flush at once or batch, the still clock and the tag names are the journal
contract tests', in journal_support. Its still clock reads 12:30:00 where these tests' own read
MINUTE_START_NS (12:00:10): the same hour bucket, and no test that uses it reads its time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from ordo import BucketSize, EventsByTagSettings, Journal, PersistedEvent
from ordo.storage.stores import Stores
from ordo.tagging import TaggedEvent, TagProgress
from ordo.types import PersistenceId, Tag

MINUTE_BUCKETS = EventsByTagSettings(
    bucket_size=BucketSize.MINUTE, flush_interval=timedelta(hours=1), max_message_batch_size=100
)
MINUTE_START_NS = int(datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC).timestamp()) * 10**9
MINUTE_NS = 60 * 10**9


def entries(stores: Stores, tag: str) -> list[TaggedEvent]:
    return list(stores.tag_views.tag_view_entries(Tag(tag)))


def progress_of(stores: Stores, persistence_id: str, tag: str) -> TagProgress:
    """The recorded progress of the id in the tag; KeyError if it has none."""
    return stores.tag_views.read_progress(PersistenceId(persistence_id))[Tag(tag)]


def expected_entries(
    events: Sequence[PersistedEvent], tag: str, bucket_size: BucketSize
) -> list[TaggedEvent]:
    """The tag_views rows the journal events call for, in (bucket, timeuuid) order."""
    tag = Tag(tag)
    rows = [
        TaggedEvent(
            tag=tag,
            time_bucket=bucket_size.key(e.timeuuid.epoch_ms),
            timeuuid=e.timeuuid,
            persistence_id=e.persistence_id,
            sequence_nr=e.sequence_nr,
            tag_pid_sequence_nr=e.tags[tag],
        )
        for e in events
        if tag in e.tags
    ]
    return sorted(rows, key=lambda r: (r.time_bucket, r.timeuuid))


def all_events(journal: Journal) -> list[PersistedEvent]:
    return [e for pid in journal.persistence_ids() for e in journal.replay(pid)]
