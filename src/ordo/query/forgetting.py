"""Forgetting persistence ids a query has not seen for `cleanup_old_persistence_ids` (seed 000).

A query keeps the last delivered tag pid sequence nr of every persistence id, to drop
duplicates and detect gaps; it forgets ids whose last event lies a cleanup window behind its
position, so that this memory does not grow with every id the tag ever had. A forgotten id's
delivered events are no longer known as delivered: a read that reached back past the window
would take them for new ones and deliver them again (seed 000: "Back tracks can not be longer
than the cleanup-old-persistence-ids otherwise old events will be redelivered"). So the
query's reads for ids it does not know (back-tracks, the look-back for a first encounter)
start no earlier than `floor`.
"""

from __future__ import annotations

from datetime import timedelta

from ordo.query.tag_view_pages import key_at, key_ms
from ordo.settings import QuerySettings
from ordo.time import BucketSize
from ordo.types import PersistenceId

Positions = dict[PersistenceId, tuple[int, bytes]]
"""Per persistence id: the last delivered tag pid sequence nr and its offset key."""


def cleanup_window(settings: QuerySettings, bucket_size: BucketSize) -> timedelta:
    """How far behind its position a query forgets ids: the setting, or twice the bucket size.

    The simulation's checker needs it too: a query from the first time bucket takes a first
    event above tag pid sequence nr 1 as the first only once it may have forgotten ids.
    """
    return settings.cleanup_old_persistence_ids or timedelta(milliseconds=2 * bucket_size.millis)


class Forgetting:
    """When and what a query forgets, and how far back its reads may go since. Not thread-safe."""

    def __init__(self, cleanup: timedelta, *, position: bytes) -> None:
        self._cleanup_ms = cleanup // timedelta(milliseconds=1)
        self._cleaned_at_ms = key_ms(position)
        self.floor = b""
        """Reads for ids the query does not know go after this key: the greatest key before
        the window of the last cleanup, which every forgotten id's last event is at or before."""
        self.has_forgotten = False
        """Whether an id was forgotten: a returning id then looks like a new one."""

    def clean(self, positions: Positions, *, position: bytes) -> None:
        """Forget the ids of `positions` last seen a window behind `position`.

        Runs once the position moved half a window since the last cleanup.
        """
        position_ms = key_ms(position)
        if position_ms - self._cleaned_at_ms < self._cleanup_ms // 2:
            return
        self._cleaned_at_ms = position_ms
        self.floor = key_at((position_ms - self._cleanup_ms) * 1_000_000 - 100)
        for pid in [pid for pid, (_, key) in positions.items() if key <= self.floor]:
            del positions[pid]
            self.has_forgotten = True
