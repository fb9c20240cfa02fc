"""Cleanup and TTL (seed 000, "Cleanup of tag_views table"): delete ids, old rows, expire.

By default tag_views keep tagged events forever. `events_by_tag.time_to_live` bounds that:
the expiry job deletes rows whose TimeUUID is older than now - TTL, tag by tag, in bounded
batches (one short transaction each), so it can run next to live writers and readers. Rows are
deleted, their progress is not (it is moved up to the newest row deleted, where a crash left it
behind them): recovery must not write expired events again. Nor must a rebuild or
`verify --repair`, and verify must not call them missing: each deletion records its cutoff as the
tag's horizon first (ordo.tools.ports.ExpiryHorizons).

"The TTL must be greater than any expected delay in using the tagged events": a tracking
processor whose token is older than the newest row the job would delete has not read events
the job would delete. The token store does not record which tag a processor reads, so every
processor counts; one that has processed nothing yet reads from the start and counts whenever
a row would be deleted. Such a cutoff is refused (TimeToLiveTooShortError) unless forced; a
forced run logs the processors at WARNING. A processor that is idle because no event came
after its token is not behind, however old the token: nothing it has not read is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ordo.errors import (
    ConfigurationError,
    InvalidInputError,
    TimeToLiveTooShortError,
    UnknownProcessorError,
)
from ordo.journal import validation
from ordo.processing.ports import TokenStore
from ordo.settings.durations import shown
from ordo.time import GREGORIAN_OFFSET_100NS, TimeUUID, format_epoch_ms
from ordo.tools.operations_tool import OperationsTool, check_flags
from ordo.tools.ports import DeletedCounts
from ordo.tools.receipts import OperationReceipt
from ordo.types import PersistenceId, SequenceNr, Tag, TimeBucket

logger = logging.getLogger(__name__)

_NS_PER_MS = 1_000_000
_EARLIEST_MS = -GREGORIAN_OFFSET_100NS // 10_000
"""1582-10-15 in epoch milliseconds: the first instant a TimeUUID holds, so no row is older."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpiryReceipt:
    """What deleting the rows before `cutoff_ms` did (or would do, in a dry run)."""

    cutoff_ms: int
    deleted_per_tag: Mapping[Tag, int]
    is_dry_run: bool
    lagging: Mapping[str, int | None] = field(default_factory=dict)
    """Processors behind the cutoff (lag in ms; None: nothing read yet) that force overrode."""

    @property
    def deleted(self) -> int:
        """Rows over every tag."""
        return sum(self.deleted_per_tag.values())

    def describe(self) -> str:
        """One human line."""
        cutoff = format_epoch_ms(self.cutoff_ms)
        verb = "would delete" if self.is_dry_run else "deleted"
        text = f"{verb} {self.deleted} tag_views rows older than {cutoff}"
        if self.deleted == 0:
            text = f"nothing to do: no tag_views rows older than {cutoff}"
        if self.lagging:
            text += f" (forced past lagging processors {', '.join(sorted(self.lagging))})"
        return text

    def to_json_dict(self) -> dict[str, Any]:
        """The receipt as one JSON object."""
        return {
            "cutoff": format_epoch_ms(self.cutoff_ms),
            "dry_run": self.is_dry_run,
            "deleted": self.deleted,
            "deleted_per_tag": dict(self.deleted_per_tag),
            "lagging_processors_ms": dict(self.lagging),
        }


def lagging_processors(
    tokens: TokenStore, newest: TimeUUID | None, *, now_ms: int
) -> dict[str, int | None]:
    """The processors that have not read `newest`, with their lag in ms (None: no token).

    `newest` is the newest row a deletion takes (None: it takes none, so nobody lags). A token
    is the offset of the last processed event (inclusive), so a processor whose oldest segment
    token is before `newest` has not read some of what would be deleted; its lag is now minus
    the time of that token. Judged by the rows rather than by the cutoff: a processor idle at
    an old token because nothing was written since has read every row there is.
    """
    if newest is None:
        return {}
    lags: dict[str, int | None] = {}
    for name in tokens.processors():
        try:
            entries = tokens.entries(name)
        except UnknownProcessorError:
            continue
        offsets = [entry.token.offset for entry in entries]
        if any(offset is None for offset in offsets):
            lags[name] = None
            continue
        oldest = min(o for o in offsets if o is not None)
        if oldest < newest:
            lags[name] = now_ms - oldest.epoch_ms
    return lags


class Cleanup(OperationsTool):
    """Deletes events, tag views and metadata. Thread-safe; methods are independent.

    Open it with `Cleanup.of(stores)`, which reads the journal's bucket size.
    """

    def delete_persistence_ids(
        self,
        persistence_ids: Sequence[PersistenceId],
        *,
        force: bool = False,
        dry_run: bool = False,
    ) -> OperationReceipt:
        """Delete the ids' events, tag views (every tag), progress, scanning and registration.

        The ids are forgotten: a later append starts again at sequence nr 1. Refused as a
        whole (ActiveWriterError, nothing deleted) when a live writer uses any of them,
        unless `force`.
        """
        check_flags(force=force, dry_run=dry_run)
        if isinstance(persistence_ids, str):  # its characters would be the ids deleted
            msg = f"persistence_ids must be a collection of ids, not the string {persistence_ids!r}"
            raise InvalidInputError(msg)
        # Once each: a dry run counted an id given twice twice; the deletion found it once.
        ids = list(dict.fromkeys(validation.persistence_id(pid) for pid in persistence_ids))
        operation = "delete persistence ids"
        forced = self._guard.check(operation, ids, force=force)
        deleted = DeletedCounts()
        for pid in ids:
            tags = self._operations.tags_of(pid)
            if dry_run:
                deleted += self._tag_views_to_delete(
                    pid, tags, keep_progress_up_to=SequenceNr(0)
                ) + DeletedCounts(events=self._operations.count_persistence_id_events(pid))
            else:
                deleted += self._operations.delete_persistence_id(pid, tags)
                logger.info("persistence id deleted: persistence_id=%s", pid)
        return OperationReceipt(
            operation=operation,
            persistence_ids=tuple(ids),
            deleted=deleted,
            is_dry_run=dry_run,
            forced_past=forced,
            note="" if deleted.total else "unknown persistence ids",
        )

    def delete_tag_views_before(
        self,
        cutoff_ms: int,
        *,
        tag: Tag | None = None,
        force: bool = False,
        dry_run: bool = False,
        on_progress: Callable[[str], None] | None = None,
    ) -> ExpiryReceipt:
        """Delete the rows (of `tag`, or every tag) whose TimeUUID is before `cutoff_ms`.

        Refused (TimeToLiveTooShortError) when a processor has not read the newest of those
        rows, unless `force`; a cutoff in the future is refused even then (InvalidInputError):
        it can only be a mistake that deletes every row. Deletes in batches of the settings'
        rows_per_batch, telling `on_progress` after each one (the caller throttles it). A cutoff
        before the first TimeUUID (a TIME of year 1, a TTL of 2**53 - 1 ms) deletes nothing:
        it is taken as that first instant, before which no row is (it was an OffsetFormatError
        about `epoch_ns`). Unless a dry run, the cutoff becomes the horizon of `tag` (or of every
        tag), which verify and the rebuilds respect: see ordo.tools.ports.ExpiryHorizons.
        """
        check_flags(force=force, dry_run=dry_run)
        if tag is not None:
            validation.tag(tag)
        now_ms = self._clock.now_ns() // _NS_PER_MS
        if cutoff_ms > now_ms:
            msg = (
                f"the cutoff {format_epoch_ms(cutoff_ms)} is in the future: every row is older "
                "than it; to delete them all, give the current time"
            )
            raise InvalidInputError(msg)
        cutoff_ms = max(cutoff_ms, _EARLIEST_MS)
        before = TimeUUID.min_for_epoch_ns(cutoff_ms * _NS_PER_MS).to_bytes()
        up_to = TimeBucket(self._bucket_size.key(cutoff_ms))
        tags = [tag] if tag is not None else [s.tag for s in self._tag_views.tags()]
        found = [
            self._operations.newest_tag_view_before(t, up_to_bucket=up_to, before=before)
            for t in tags
        ]
        newest = max((TimeUUID(key) for key in found if key is not None), default=None)
        lagging = lagging_processors(self._tokens, newest, now_ms=now_ms)
        if lagging:
            if not force:
                raise TimeToLiveTooShortError(retention_ms=now_ms - cutoff_ms, lags=lagging)
            logger.warning(
                "forced past processors that have not read what is deleted: "
                "cutoff_ms=%d processors=%s",
                cutoff_ms,
                ",".join(sorted(lagging)),
            )
        if not dry_run:
            # Before the first batch: once rows are going, they are gone on purpose, and verify
            # and the rebuilds must know, even if this run stops half way (ExpiryHorizons).
            self._operations.record_expiry(cutoff_ms, tag)
        per_tag: dict[Tag, int] = {}
        for t in tags:
            if dry_run:
                per_tag[t] = self._operations.count_tag_views_before(
                    t, up_to_bucket=up_to, before=before
                )
                continue
            per_tag[t] = 0
            while True:
                deleted = self._operations.delete_tag_views_before(
                    t, up_to_bucket=up_to, before=before, limit=self._settings.rows_per_batch
                )
                per_tag[t] += deleted
                if on_progress is not None and deleted:
                    # The running total too: a throttled display may show only the last line.
                    total = sum(per_tag.values())
                    on_progress(f"tag {t!r}: {per_tag[t]:,} rows deleted ({total:,} in all)")
                if deleted < self._settings.rows_per_batch:
                    break
            logger.info("tag views expired: tag=%s rows=%d", t, per_tag[t])
        return ExpiryReceipt(
            cutoff_ms=cutoff_ms,
            deleted_per_tag={t: n for t, n in per_tag.items() if n},
            is_dry_run=dry_run,
            lagging=lagging,
        )

    def expire(
        self,
        time_to_live: timedelta | None,
        *,
        tag: Tag | None = None,
        force: bool = False,
        dry_run: bool = False,
        on_progress: Callable[[str], None] | None = None,
    ) -> ExpiryReceipt:
        """The expiry job: delete rows older than now - `time_to_live` (events_by_tag's TTL).

        Raises ConfigurationError when no TTL is set, TimeToLiveTooShortError when a
        processor has not read the newest row it would delete (unless `force`).
        """
        check_flags(force=force, dry_run=dry_run)
        if time_to_live is None:
            msg = (
                "events_by_tag.time_to_live is not set (ORDO_TIME_TO_LIVE_MS or "
                "--time-to-live-ms): tag views are kept forever, nothing expires"
            )
            raise ConfigurationError(msg)
        if not isinstance(time_to_live, timedelta) or time_to_live <= timedelta(0):
            msg = f"time_to_live must be a positive duration, got {shown(time_to_live)}"
            raise ConfigurationError(msg)
        now_ms = self._clock.now_ns() // _NS_PER_MS
        cutoff_ms = now_ms - time_to_live // timedelta(milliseconds=1)
        return self.delete_tag_views_before(
            cutoff_ms, tag=tag, force=force, dry_run=dry_run, on_progress=on_progress
        )
