"""What a query that starts inside the current bucket learns first: where each id stands.

A query from an offset in the current bucket cannot tell a persistence id's first event from
one whose earlier events it has not seen yet. Before its forward scan, `TagQuery` reads the
bucket around its offset once, so that it knows which events count as delivered and which tag
pid sequence nr each id starts at.
"""

from __future__ import annotations

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
    start: bytes,
    scanning_period: timedelta,
    up_to: bytes,
    page: int,
) -> tuple[Delivered, dict[PersistenceId, int]]:
    """Read the bucket from `scanning_period` before `start` to `up_to` (inclusive), by pages.

    Returns, per persistence id, the last event at or before `start` (the query's offset: it
    counts as delivered) and the lowest tag pid sequence nr of its events after `start`.
    """
    before: Delivered = {}
    lowest: dict[PersistenceId, int] = {}
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
    return before, lowest
