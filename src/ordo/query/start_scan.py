"""What a query that starts inside the current bucket learns first: where each id stands.

A query from an offset in the current bucket cannot tell a persistence id's first event from
one whose earlier events it has not seen yet. Before its forward scan, `TagQuery` reads the
bucket around its offset once, so that it knows which events count as delivered and which tag
pid sequence nr each id starts at.
"""

from __future__ import annotations

from collections.abc import Set
from datetime import timedelta

from ordo.query.ports import R, TagViewPage, TagViewReader
from ordo.query.tag_view_pages import key_at, key_ms
from ordo.types import PersistenceId, Tag, TimeBucket

Delivered = dict[PersistenceId, tuple[int, bytes]]
"""Per persistence id: the last tag pid sequence nr at or before the start, and its key."""


def scan_start(
    reader: TagViewReader[R],
    tag: Tag,
    bucket: TimeBucket,
    *,
    positions: Delivered,
    known: Set[PersistenceId],
    start: bytes,
    scanning_period: timedelta,
    up_to: bytes,
    page: int,
) -> None:
    """Read the bucket from `scanning_period` before `start`, and record where ids stand.

    An id's last event at or before `start` (the query's offset) counts as delivered, unless
    the id is in `known` (its position is what the caller processed: an event after it that
    lies before the offset is late and not delivered yet); for ids seen only after `start`,
    the lowest tag pid sequence nr is the first. `positions` changes only once every page was
    read, so a scan whose read failed can run again.

    The read goes to `up_to` (inclusive), by pages, and at least to `start` even when the
    query's bound `up_to` lies before it (an offset younger than the eventual-consistency
    delay): an id whose events just before the offset were not read would be met after it
    as a new one, its next event taken for its first although one before it is missing.
    """
    before: Delivered = {}
    lowest: dict[PersistenceId, int] = {}
    up_to = max(up_to, start)
    cursor = key_at((key_ms(start) - scanning_period // timedelta(milliseconds=1)) * 1_000_000)
    while cursor < up_to:
        rows = reader.read_tag_view(
            TagViewPage(tag=tag, time_bucket=bucket, after=cursor, up_to=up_to, limit=page)
        )
        for row in rows:
            pid, nr = row.persistence_id, row.tag_pid_sequence_nr
            if row.offset_key <= start:
                if nr > before.get(pid, (0, b""))[0]:
                    before[pid] = (nr, row.offset_key)
            elif nr < lowest.get(pid, nr + 1):
                lowest[pid] = nr
        if len(rows) < page:
            break
        cursor = rows[-1].offset_key  # unique within the tag: the next page misses no row
    for pid, last in before.items():
        if pid not in known and last[0] > positions.get(pid, (0, b""))[0]:
            positions[pid] = last
    for pid, first in lowest.items():
        positions.setdefault(pid, (first - 1, start))
