"""What a query that starts from a recent offset learns first: where each id stands.

A query from an offset in the current bucket, or one a back-track still reaches, cannot tell a
persistence id's first event from one whose earlier events it has not seen yet. Before its
forward scan, `TagQuery` reads around its offset once, so that it knows which events count as
delivered and which tag pid sequence nr each id starts at.
"""

from __future__ import annotations

from collections.abc import Set
from datetime import timedelta

from ordo.query.backtracking import BackTrack, BackTrackSchedule
from ordo.query.ports import R, TagViewReader
from ordo.query.tag_view_pages import key_at, key_ms, read_pages
from ordo.time import BucketSize
from ordo.types import PersistenceId, Tag

Delivered = dict[PersistenceId, tuple[int, bytes]]
"""Per persistence id: the last tag pid sequence nr at or before the start, and its key."""


def needs_start_scan(
    start: bytes, schedule: BackTrackSchedule, *, now_ns: int, bound_ns: int
) -> bool:
    """Whether a query from the offset `start` scans around it first (`scan_start`).

    It does from the current bucket, as Akka does, and from an offset that a short
    back-track from the query's bound (`bound_ns`, now less the eventual-consistency delay)
    reaches: rows around it may still show up late. Such a young offset lies in the bucket
    before right after a bucket change (with minute buckets, a restart from a 5 s old offset
    one time in 12); not scanned, an id's event after it was taken for its first while an
    earlier one was late, which was then dropped as a duplicate: lost. An older offset of a
    past bucket is not scanned: its ids' first events are taken as they come, as Akka does
    (a projection reset goes on past a gap so).
    """
    sizes, start_ms = schedule.bucket_size, key_ms(start)
    if sizes.key(start_ms) == sizes.key(now_ns // 1_000_000):
        return True
    return start_ms >= schedule.reach_ms(BackTrack.SHORT, position_ms=bound_ns // 1_000_000)


def scan_start(
    reader: TagViewReader[R],
    tag: Tag,
    *,
    bucket_size: BucketSize,
    positions: Delivered,
    known: Set[PersistenceId],
    after_reset: bool,
    start: bytes,
    scanning_period: timedelta,
    up_to: bytes,
    page: int,
) -> None:
    """Read from `scanning_period` before `start`, and record where ids stand.

    An id's last event at or before `start` (the query's offset) counts as delivered, unless
    the id is in `known` (its position is what the caller processed: an event after it that
    lies before the offset is late and not delivered yet); for ids seen only after `start`,
    the lowest tag pid sequence nr is the first. After a reset of the caller (`after_reset`)
    that holds for every id it does not know, as in Akka's start scan: the reset cleared what
    it handled, so that each id goes on with its next event after the offset (past a gap that
    stopped it); counted as delivered, the event just before the offset made the restart
    stop at the same gap again. `positions` changes only once every page was
    read, so a scan whose read failed can run again.

    The read goes to `up_to` (inclusive), by pages, and at least to `start` even when the
    query's bound `up_to` lies before it (an offset younger than the eventual-consistency
    delay): an id whose events just before the offset were not read would be met after it
    as a new one, its next event taken for its first although one before it is missing.
    For the same reason it reads every bucket the window spans, not only the offset's: from
    an offset just after a bucket starts, the ids' events just before it lie in the bucket
    before (with minute buckets, one restart in 300 came within the default 200 ms of one).
    """
    before: Delivered = {}
    lowest: dict[PersistenceId, int] = {}
    up_to = max(up_to, start)
    after = key_at((key_ms(start) - scanning_period // timedelta(milliseconds=1)) * 1_000_000)
    rows = (
        row
        for bucket in bucket_size.buckets(start_ms=key_ms(after), up_to_ms=key_ms(up_to))
        for page_rows in read_pages(reader, tag, bucket, after=after, up_to=up_to, page=page)
        for row in page_rows
    )
    for row in rows:
        pid, nr = row.persistence_id, row.tag_pid_sequence_nr
        if row.offset_key <= start:
            if nr > before.get(pid, (0, b""))[0]:
                before[pid] = (nr, row.offset_key)
        elif nr < lowest.get(pid, nr + 1):
            lowest[pid] = nr
    for pid, last in () if after_reset else before.items():
        if pid not in known and last[0] > positions.get(pid, (0, b""))[0]:
            positions[pid] = last
    for pid, first in lowest.items():
        positions.setdefault(pid, (first - 1, start))
