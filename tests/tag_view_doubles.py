"""An in-memory tag view for unit tests of the query's state machine (no database needed).

It implements the TagViewReader port over a list of rows, so tests can make rows appear late,
out of offset order or never, and drive the TagQuery with explicit clock readings.
`OutageAtReads` makes chosen reads of any reader (this one or a real store's) fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Generic, NamedTuple, TypeVar

from ordo.errors import StorageUnavailableError
from ordo.hashing import stable_hash
from ordo.query import NO_OFFSET, KeyRun, Offset, RowKey, TagQuery, TagViewPage, TagViewReader
from ordo.settings import QuerySettings
from ordo.time import BucketSize, TimeUUID
from ordo.types import PersistenceId, Tag, TagPidSequenceNr, TimeBucket

BUCKET_SIZE = BucketSize.MINUTE
EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00Z, a bucket start
TAG = Tag("t")


class Row(NamedTuple):
    offset_key: bytes
    persistence_id: PersistenceId
    tag_pid_sequence_nr: TagPidSequenceNr


def at(ms: float) -> int:
    """Epoch ns of `ms` milliseconds after EPOCH_MS."""
    return int((EPOCH_MS + ms) * 1_000_000)


def offset_at(ms: float, *, node: int = 1) -> TimeUUID:
    timestamp = at(ms) // 100 + 0x01B21DD213814000
    return TimeUUID.from_fields(timestamp_100ns=timestamp, clock_seq=0, node=node)


def row(pid: str, nr: int, ms: float) -> Row:
    """A row of `pid`; each id has its own node, as if written by its own writer."""
    node = stable_hash(pid) | 1
    return Row(offset_at(ms, node=node).to_bytes(), PersistenceId(pid), TagPidSequenceNr(nr))


class InMemoryTagView:
    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.reads = 0

    def add(self, *rows: Row) -> None:
        self.rows.extend(rows)

    def read_tag_view(self, page: TagViewPage) -> Sequence[Row]:
        self.reads += 1
        assert page.tag == TAG
        assert page.hash_mask is None
        selected = sorted(
            r
            for r in self.rows
            if page.after < r.offset_key <= page.up_to
            and BUCKET_SIZE.key(TimeUUID.from_bytes(r.offset_key).epoch_ms) == page.time_bucket
            and (page.persistence_id is None or r.persistence_id == page.persistence_id)
        )
        return selected[: page.limit]

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        buckets = [BUCKET_SIZE.key(TimeUUID.from_bytes(r.offset_key).epoch_ms) for r in self.rows]
        return min((b for b in buckets if after < b <= up_to), default=None)


K = TypeVar("K", bound=RowKey)


class OutageAtReads(Generic[K]):
    """Another reader's reads, but the page reads numbered in `failing` (from 1) fail.

    They raise StorageUnavailableError, as a read does whose session the server ends while it
    runs (or a SQLite lock held past the busy timeout): the one failure no check before the
    read can save, timed here at a chosen page of a poll.
    """

    def __init__(self, reader: TagViewReader[K], *, failing: set[int]) -> None:
        self._reader = reader
        self._failing = failing
        self.reads = 0

    def read_tag_view(self, page: TagViewPage) -> Sequence[K]:
        self.reads += 1
        if self.reads in self._failing:
            msg = f"the journal is down (read {self.reads})"
            raise StorageUnavailableError(msg)
        return self._reader.read_tag_view(page)

    def next_bucket(self, tag: Tag, *, after: TimeBucket, up_to: TimeBucket) -> TimeBucket | None:
        return self._reader.next_bucket(tag, after=after, up_to=up_to)


def settings(**overrides: object) -> QuerySettings:
    values: dict[str, object] = {
        "eventual_consistency_delay": timedelta(0),
        "refresh_interval": timedelta(milliseconds=100),
        "gap_timeout": timedelta(seconds=2),
        "back_track_interval": timedelta(seconds=1),
        "back_track_period": timedelta(seconds=5),
        "back_track_long_interval": timedelta(seconds=30),
        "page_size": 3,
    }
    values.update(overrides)
    return QuerySettings(**values)  # type: ignore[arg-type]


def tag_query(
    view: TagViewReader[Row],
    *,
    now_ms: float,
    offset: Offset = NO_OFFSET,
    is_live: bool = True,
    known: Mapping[PersistenceId, int] | None = None,
    **overrides: object,
) -> TagQuery[Row]:
    return TagQuery(
        view,
        tag=TAG,
        offset=offset,
        settings=settings(**overrides),
        bucket_size=BUCKET_SIZE,
        first_time_bucket_ms=EPOCH_MS,
        now_ns=at(now_ms),
        is_live=is_live,
        known=known,
    )


def drain(query: TagQuery[Row], *, now_ms: float, polls: int = 20) -> list[tuple[str, int]]:
    """Poll at one instant until nothing more comes; the delivered (pid, nr) in order."""
    delivered: list[tuple[str, int]] = []
    for _ in range(polls):
        step = query.poll(at(now_ms))
        delivered.extend((r.persistence_id, r.tag_pid_sequence_nr) for r in step.rows)
        if not step.rows and step.wait_ns > 0:
            break
        if step.is_complete:
            break
    return delivered


def reference_runs(rows: Sequence[RowKey]) -> list[KeyRun] | None:
    """A page's runs per persistence id, by plain Python: what a RunReader must summarise.

    In order of each id's first row; None when some id's tag pid sequence nrs in the page do
    not step by one in offset order.
    """
    by_id: dict[str, list[RowKey]] = {}
    for key in rows:
        by_id.setdefault(key.persistence_id, []).append(key)
    runs = []
    for own in by_id.values():
        nrs = [key.tag_pid_sequence_nr for key in own]
        if nrs != list(range(nrs[0], nrs[0] + len(nrs))):
            return None
        first, last = own[0], own[-1]
        runs.append(
            KeyRun(
                first.offset_key,
                nrs[0],
                last.offset_key,
                last.persistence_id,
                last.tag_pid_sequence_nr,
            )
        )
    return runs
