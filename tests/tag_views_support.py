"""What the tag views contract tests share: settings and a clock reading of minute buckets,
the rows a tag holds, the rows the journal's events call for, an id's progress in a tag, and a
store whose writes fail.

The settings that flush at once or batch, the still clock and the tag names are the journal
contract tests', in journal_support. Its still clock reads 12:30:00 where these tests' own read
MINUTE_START_NS (12:00:10): the same hour bucket, and no test that uses it reads its time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from ordo import BucketSize, EventsByTagSettings, Journal, PersistedEvent
from ordo.errors import StorageUnavailableError
from ordo.storage.stores import Stores
from ordo.tagging import TaggedEvent, TagProgress, TagViewStore, TagWrite
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


class FailingTagViews:
    """A TagViewStore whose next `failures` tag_views writes (or, with `progress`, progress
    writes) fail like a lost connection."""

    def __init__(self, inner: TagViewStore, failures: int, *, progress: bool = False) -> None:
        self._inner = inner
        self.failures = failures
        self._is_progress = progress

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        self._fail_if(is_progress=False)
        self._inner.write_tag_views(writes)

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        self._fail_if(is_progress=True)
        self._inner.write_progress(progress)

    def _fail_if(self, *, is_progress: bool) -> None:
        if self.failures > 0 and is_progress == self._is_progress:
            self.failures -= 1
            msg = "injected: the write failed"
            raise StorageUnavailableError(msg)  # an outage: retried (a StorageError is not)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)
