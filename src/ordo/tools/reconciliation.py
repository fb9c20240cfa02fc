"""Events by tag reconciliation (seed 000): delete, rebuild, list and truncate tag views.

Per persistence id operations run while the application is up, as long as no live writer uses
the id (the writer guard); truncate and rebuilding everything need every writer stopped.
After `delete_tag_views` the views are rebuilt the next time the id is started (its progress
and tag_scanning are deleted with them, so recovery writes every event again with the same
numbers), or at once with `rebuild_tag_views`. Every operation accepts dry_run=True, which
reads what would change and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ordo.clock import Clock
from ordo.journal.ports import JournalStore
from ordo.settings import OperationsSettings
from ordo.tagging import TagProgress, TagSummary, TagViewStore
from ordo.time import BucketSize
from ordo.tools.guard import WriterGuard
from ordo.tools.ports import DeletedCounts, OperationsStore, TagViewRow
from ordo.tools.receipts import OperationReceipt
from ordo.tools.tag_view_rows import rebuild_tag_views
from ordo.types import PersistenceId, SequenceNr, Tag

if TYPE_CHECKING:  # a runtime import would be circular: storage imports tools.ports
    from ordo.storage.operations import OperationsStores

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]
"""Receives a line of progress for long operations (the CLI prints it on stderr)."""


class Reconciliation:
    """The reconciliation operations on one database. Thread-safe; methods are independent.

    `bucket_size` must be the journal's (rows are bucketed by it); the caller reads it from
    the journal (`recorded_bucket_size()`).
    """

    def __init__(
        self,
        *,
        journal: JournalStore,
        tag_views: TagViewStore,
        operations: OperationsStore,
        bucket_size: BucketSize,
        settings: OperationsSettings | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._journal = journal
        self._tag_views = tag_views
        self._operations = operations
        self._bucket_size = bucket_size
        self._settings = settings or OperationsSettings()
        self._guard = WriterGuard(operations, settings=self._settings, clock=clock)

    @classmethod
    def of(
        cls,
        stores: OperationsStores,
        *,
        settings: OperationsSettings | None = None,
        clock: Clock | None = None,
    ) -> Reconciliation:
        """The reconciliation of the database `stores` is open on, with its bucket size."""
        return cls(
            journal=stores.journal,
            tag_views=stores.tag_views,
            operations=stores.operations,
            bucket_size=recorded_bucket_size(stores.journal),
            settings=settings,
            clock=clock,
        )

    def tags(self) -> Sequence[TagSummary]:
        """Every tag with tag_views rows, with counts: a full scan of tag_views (seed 000)."""
        return self._tag_views.tags()

    def tags_of(self, persistence_id: PersistenceId) -> Sequence[Tag]:
        """The tags of the id's events and tag write progress (cheap: the id's rows only)."""
        return self._operations.tags_of(persistence_id)

    def delete_tag_views(
        self,
        persistence_id: PersistenceId,
        *,
        tag: Tag | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> OperationReceipt:
        """Delete the id's rows of `tag` (every tag when None), their progress and tag_scanning.

        Raises ActiveWriterError when a live writer uses the id, unless `force`.
        """
        operation = "delete tag views"
        tags = self._tags(persistence_id, tag)
        if not tags:
            return _nothing(operation, persistence_id, tag, dry_run)
        forced = self._guard.check(operation, [persistence_id], force=force)
        if dry_run:
            rows = sum(
                self._operations.count_tag_view_rows(
                    persistence_id, t, after_sequence_nr=SequenceNr(0)
                )
                for t in tags
            )
            deleted = self._operations.count_metadata(persistence_id, tags) + DeletedCounts(
                tag_view_rows=rows
            )
        else:
            deleted = self._operations.delete_tag_views(persistence_id, tags)
            logger.info(
                "tag views deleted: persistence_id=%s tags=%s rows=%d",
                persistence_id,
                ",".join(tags),
                deleted.tag_view_rows,
            )
        return OperationReceipt(
            operation=operation,
            persistence_ids=(persistence_id,),
            tags=tuple(tags),
            deleted=deleted,
            is_dry_run=dry_run,
            forced_past=forced,
        )

    def rebuild_tag_views(
        self,
        persistence_id: PersistenceId,
        *,
        tag: Tag | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> OperationReceipt:
        """Replace the id's rows of `tag` (every tag when None) with what a fresh write gives.

        Same tag pid sequence nrs, time buckets and TimeUUIDs as the tag writer; the rows of
        each tag are replaced in one transaction with their progress. Rows of events deleted
        from the journal are kept. Raises ActiveWriterError when a live writer uses the id,
        unless `force`.
        """
        operation = "rebuild tag views"
        tags = self._tags(persistence_id, tag)
        if not tags:
            return _nothing(operation, persistence_id, tag, dry_run)
        forced = self._guard.check(operation, [persistence_id], force=force)
        replaced, written = self._rebuild(
            persistence_id, tags, is_every_tag=tag is None, dry_run=dry_run
        )
        return OperationReceipt(
            operation=operation,
            persistence_ids=(persistence_id,),
            tags=tuple(tags),
            deleted=DeletedCounts(tag_view_rows=replaced),
            written_rows=written,
            is_dry_run=dry_run,
            forced_past=forced,
        )

    def rebuild_pairs(
        self,
        pairs: Sequence[tuple[Tag, PersistenceId]],
        *,
        force: bool = False,
        dry_run: bool = False,
        on_progress: Progress | None = None,
    ) -> OperationReceipt:
        """Rebuild the tag views of each (tag, persistence id): what `ordo verify --repair` runs.

        The writer guard checks every id first and refuses them all (nothing changed) when a
        live writer uses any, unless `force`.
        """
        operation = "repair tag views"
        by_pid: dict[PersistenceId, list[Tag]] = {}
        for tag, pid in pairs:
            by_pid.setdefault(pid, []).append(tag)
        if not by_pid:
            return OperationReceipt(operation=operation, is_dry_run=dry_run)
        forced = self._guard.check(operation, sorted(by_pid), force=force)
        replaced = written = 0
        for done, (pid, tags) in enumerate(sorted(by_pid.items()), 1):
            deleted, rows = self._rebuild(pid, sorted(tags), is_every_tag=False, dry_run=dry_run)
            replaced, written = replaced + deleted, written + rows
            if on_progress is not None and done % 100 == 0:
                on_progress(f"{done}/{len(by_pid)} persistence ids rebuilt")
        return OperationReceipt(
            operation=operation,
            persistence_ids=tuple(sorted(by_pid)),
            tags=tuple(sorted({tag for tag, _ in pairs})),
            deleted=DeletedCounts(tag_view_rows=replaced),
            written_rows=written,
            is_dry_run=dry_run,
            forced_past=forced,
        )

    def truncate(self, *, force: bool = False, dry_run: bool = False) -> OperationReceipt:
        """Delete every tag_views, tag_write_progress and tag_scanning row.

        Afterwards each persistence id's views are rebuilt when it is next started, or all at
        once by a rebuild (`rebuild_all_locally`, or ordo.spark.rebuild on Spark). Refused
        (ActiveWriterError) while any writer is live, unless `force`.
        """
        operation = "truncate tag views"
        forced = self._guard.check(operation, None, force=force)
        deleted = self._operations.truncate_tag_views(dry_run=dry_run)
        if not dry_run:
            logger.info("tag views truncated: rows=%d", deleted.tag_view_rows)
        return OperationReceipt(
            operation=operation, deleted=deleted, is_dry_run=dry_run, forced_past=forced
        )

    def rebuild_all_locally(
        self,
        *,
        force: bool = False,
        dry_run: bool = False,
        on_progress: Progress | None = None,
    ) -> OperationReceipt:
        """Upsert the rows of every journal event in this process (no Spark), id by id.

        The single-process form of `ordo reconcile rebuild --all`: for small journals and as
        the baseline of bench/rebuild.py. Rows are upserted in batches of the settings'
        rows_per_batch; progress is set exactly and tag_scanning moved to each id's highest.
        Existing rows are not deleted: truncate first for a clean rebuild.
        """
        operation = "rebuild all tag views"
        forced = self._guard.check(operation, None, force=force)
        batch: list[TagViewRow] = []
        progress: list[TagProgress] = []
        scanned: dict[PersistenceId, SequenceNr] = {}
        written = ids = 0
        for pid in self._journal.persistence_ids():
            keep_up_to = self._operations.deleted_to(pid)
            highest = self._journal.highest_sequence_nr(pid)
            built = rebuild_tag_views(
                self._journal.read_events(
                    pid, from_sequence_nr=SequenceNr(keep_up_to + 1), to_sequence_nr=highest
                ),
                self._bucket_size,
            )
            rows = built.all_rows()
            written, ids = written + len(rows), ids + 1
            if not dry_run:
                batch.extend(rows)
                progress.extend(built.progress.values())
                scanned[pid] = highest
                if len(batch) >= self._settings.rows_per_batch:
                    self._write(batch, progress, scanned)
                    batch, progress, scanned = [], [], {}
            if on_progress is not None and ids % 1000 == 0:
                on_progress(f"{ids} persistence ids, {written} rows")
        self._write(batch, progress, scanned)
        return OperationReceipt(
            operation=operation,
            written_rows=written,
            is_dry_run=dry_run,
            forced_past=forced,
            note=f"{ids} persistence ids",
        )

    def _rebuild(
        self,
        persistence_id: PersistenceId,
        tags: Sequence[Tag],
        *,
        is_every_tag: bool,
        dry_run: bool,
    ) -> tuple[int, int]:
        """Replace the rows of each tag (one transaction per tag); (rows deleted, rows written).

        Rows of events deleted from the journal are kept; tag_scanning is set to the highest
        sequence nr only when every tag of the id was rebuilt.
        """
        keep_up_to = self._operations.deleted_to(persistence_id)
        highest = self._journal.highest_sequence_nr(persistence_id)
        events = self._journal.read_events(
            persistence_id,
            from_sequence_nr=SequenceNr(keep_up_to + 1),
            to_sequence_nr=highest,
        )
        built = rebuild_tag_views(events, self._bucket_size, tags=tags)
        replaced = 0
        for t in tags:
            if dry_run:
                replaced += self._operations.count_tag_view_rows(
                    persistence_id, t, after_sequence_nr=keep_up_to
                )
                continue
            replaced += self._operations.replace_tag_view(
                persistence_id,
                t,
                built.rows.get(t, []),
                built.progress.get(t),
                keep_up_to=keep_up_to,
            )
        if is_every_tag and not dry_run:
            self._operations.set_tag_scanning(persistence_id, highest)
        if not dry_run:
            logger.info(
                "tag views rebuilt: persistence_id=%s tags=%s rows=%d",
                persistence_id,
                ",".join(tags),
                len(built.all_rows()),
            )
        return replaced, len(built.all_rows())

    def _write(
        self,
        rows: Sequence[TagViewRow],
        progress: Sequence[TagProgress],
        scanned: dict[PersistenceId, SequenceNr],
    ) -> None:
        """Rows first, then their progress, as the tag writer orders them (crash-safe)."""
        self._operations.upsert_tag_view_rows(rows)
        self._operations.write_exact_progress(progress)
        self._operations.write_tag_scanning(scanned)

    def _tags(self, persistence_id: PersistenceId, tag: Tag | None) -> list[Tag]:
        """The tags an operation touches: `tag` if the id has it, else all of the id's tags.

        A tag that only has rows (no event and no progress names it) is still touched when
        given explicitly and rows exist.
        """
        known = list(self._operations.tags_of(persistence_id))
        if tag is None:
            return known
        if tag in known:
            return [tag]
        rows = self._operations.count_tag_view_rows(
            persistence_id, tag, after_sequence_nr=SequenceNr(0)
        )
        return [tag] if rows else []


def recorded_bucket_size(journal: JournalStore) -> BucketSize:
    """The bucket size the journal was written with (hour, the default, when it is empty)."""
    recorded = journal.recorded_bucket_size()
    return BucketSize.HOUR if recorded is None else BucketSize.parse(recorded)


def _nothing(
    operation: str, persistence_id: PersistenceId, tag: Tag | None, dry_run: bool
) -> OperationReceipt:
    what = f"persistence_id={persistence_id!r}" + (f" tag={tag!r}" if tag else "")
    return OperationReceipt(
        operation=operation,
        persistence_ids=(persistence_id,),
        tags=(tag,) if tag else (),
        is_dry_run=dry_run,
        note=f"{what} has no events and no tag views",
    )
