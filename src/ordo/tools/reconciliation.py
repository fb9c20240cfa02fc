"""Events by tag reconciliation (seed 000): delete, rebuild, list and truncate tag views.

Per persistence id operations run while the application is up, as long as no live writer uses
the id (the writer guard); truncate and rebuilding everything need every writer stopped.
After `delete_tag_views` the views are rebuilt the next time the id is started (its progress
and tag_scanning are deleted with them, so recovery writes every event again with the same
numbers), or at once with `rebuild_tag_views`. Every operation accepts dry_run=True, which
reads what would change and changes nothing.

Events deleted from the journal (`delete_to`) cannot be written again: deleting or truncating
their rows loses them for good. Their progress is kept, though: where no event left in the
journal has a tag, it is the only record of the tag's numbering. Deleted with the rows, recovery
and a rebuild numbered the tag's next event 1 again, and a query or processor that had
delivered the old numbers dropped it as one it had seen. (Akka Persistence Cassandra's
reconciliation deletes that progress with the rows and rebuilds from the events left.) The
numbering could instead go on past any number a query may have seen (a tag pid sequence nr is
at most its event's sequence nr, so past deleted_to), but a query that had seen less would
then wait at the gap and fail with MissingTaggedEventError: keeping the exact number is simpler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ordo.journal import validation
from ordo.tagging import TagProgress, TagSummary
from ordo.tools.operations_tool import OperationsTool, check_flags
from ordo.tools.ports import DeletedCounts, ExpiryHorizons, TagViewRow
from ordo.tools.receipts import OperationReceipt
from ordo.tools.tag_view_rows import RebuiltTagViews, rebuild_tag_views
from ordo.types import PersistenceId, SequenceNr, Tag
from ordo.wording import counted

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]
"""Receives a line of progress for long operations (the CLI prints it on stderr)."""


class Reconciliation(OperationsTool):
    """The reconciliation operations on one database. Thread-safe; methods are independent.

    Open it with `Reconciliation.of(stores)`, which reads the journal's bucket size.
    """

    def tags(self) -> Sequence[TagSummary]:
        """Every tag with tag_views rows, with counts: a full scan of tag_views (seed 000)."""
        return self._tag_views.tags()

    def tags_of(self, persistence_id: PersistenceId) -> Sequence[Tag]:
        """The tags of the id's events and tag write progress (cheap: the id's rows only)."""
        return self._operations.tags_of(validation.persistence_id(persistence_id))

    def delete_tag_views(
        self,
        persistence_id: PersistenceId,
        *,
        tag: Tag | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> OperationReceipt:
        """Delete the id's rows of `tag` (every tag when None), their progress and tag_scanning.

        The progress of events deleted from the journal is kept (see the module docstring).
        Raises ActiveWriterError when a live writer uses the id, unless `force`.
        """
        check_flags(force=force, dry_run=dry_run)
        return self._on_tags(
            "delete tag views",
            persistence_id,
            tag,
            force=force,
            dry_run=dry_run,
            change=lambda tags: (self._delete(persistence_id, tags, dry_run=dry_run), 0),
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
        from the journal are kept; events the expiry took the rows of (before their tag's
        horizon, ordo.tools.ports.ExpiryHorizons) get none, but keep their numbers. Raises
        ActiveWriterError when a live writer uses the id, unless `force`.
        """
        check_flags(force=force, dry_run=dry_run)
        return self._on_tags(
            "rebuild tag views",
            persistence_id,
            tag,
            force=force,
            dry_run=dry_run,
            change=lambda tags: self._rebuild(
                persistence_id,
                tags,
                self._operations.expiry_horizons(),
                is_every_tag=tag is None,
                dry_run=dry_run,
            ),
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
        check_flags(force=force, dry_run=dry_run)
        operation = "repair tag views"
        by_pid: dict[PersistenceId, set[Tag]] = {}  # a pair given twice is rebuilt once
        for tag, pid in pairs:
            by_pid.setdefault(pid, set()).add(tag)
        if not by_pid:
            return OperationReceipt(operation=operation, is_dry_run=dry_run)
        forced = self._guard.check(operation, sorted(by_pid), force=force)
        deleted, written = DeletedCounts(), 0
        horizons = self._operations.expiry_horizons()
        for done, (pid, tags) in enumerate(sorted(by_pid.items()), 1):
            replaced, rows = self._rebuild(
                pid, sorted(tags), horizons, is_every_tag=False, dry_run=dry_run
            )
            deleted, written = deleted + replaced, written + rows
            if on_progress is not None and done % 100 == 0:
                on_progress(f"{done:,}/{counted(len(by_pid), 'persistence id')} rebuilt")
        return OperationReceipt(
            operation=operation,
            persistence_ids=tuple(sorted(by_pid)),
            tags=tuple(sorted({tag for tag, _ in pairs})),
            deleted=deleted,
            written_rows=written,
            is_dry_run=dry_run,
            forced_past=forced,
        )

    def truncate(self, *, force: bool = False, dry_run: bool = False) -> OperationReceipt:
        """Delete every tag_views, tag_write_progress and tag_scanning row.

        Except the progress of events deleted from the journal (see the module docstring).
        Afterwards each persistence id's views are rebuilt when it is next started, or all at
        once by a rebuild (`rebuild_all_locally`, or ordo.spark.rebuild on Spark). Refused
        (ActiveWriterError) while any writer is live, unless `force`.
        """
        check_flags(force=force, dry_run=dry_run)
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
        Expired events get no row (see `rebuild_tag_views`). Existing rows are not deleted:
        truncate first for a clean rebuild.
        """
        check_flags(force=force, dry_run=dry_run)
        operation = "rebuild all tag views"
        forced = self._guard.check(operation, None, force=force)
        batch: list[TagViewRow] = []
        progress: list[TagProgress] = []
        scanned: dict[PersistenceId, SequenceNr] = {}
        written = ids = 0
        horizons = self._operations.expiry_horizons()
        for pid in self._journal.persistence_ids():
            _, highest, built = self._rebuilt(pid, None, horizons)
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
                on_progress(f"{counted(ids, 'persistence id')}, {counted(written, 'row')}")
        self._write(batch, progress, scanned)
        if on_progress is not None and ids % 1000:  # the total, which no line above gave
            on_progress(f"{counted(ids, 'persistence id')}, {counted(written, 'row')}")
        return OperationReceipt(
            operation=operation,
            written_rows=written,
            is_dry_run=dry_run,
            forced_past=forced,
            note=counted(ids, "persistence id"),
        )

    def _on_tags(
        self,
        operation: str,
        persistence_id: PersistenceId,
        tag: Tag | None,
        *,
        force: bool,
        dry_run: bool,
        change: Callable[[Sequence[Tag]], tuple[DeletedCounts, int]],
    ) -> OperationReceipt:
        """Run `change` on the id's tags (see `_tags`) once the writer guard lets it.

        `change` returns (rows deleted, tag_views rows written), or would in a dry run. An
        empty or unusable id or tag is refused (InvalidIdentifierError), not "nothing to do".
        """
        validation.persistence_id(persistence_id)
        if tag is not None:
            validation.tag(tag)
        tags = self._tags(persistence_id, tag)
        if not tags:
            return _nothing(operation, persistence_id, tag, dry_run)
        forced = self._guard.check(operation, [persistence_id], force=force)
        deleted, written = change(tags)
        return OperationReceipt(
            operation=operation,
            persistence_ids=(persistence_id,),
            tags=tuple(tags),
            deleted=deleted,
            written_rows=written,
            is_dry_run=dry_run,
            forced_past=forced,
        )

    def _delete(
        self, persistence_id: PersistenceId, tags: Sequence[Tag], *, dry_run: bool
    ) -> DeletedCounts:
        """Delete the id's rows and progress of the tags and its tag_scanning (or count them)."""
        if dry_run:
            return self._tag_views_to_delete(
                persistence_id,
                tags,
                keep_progress_up_to=self._operations.deleted_to(persistence_id),
            )
        deleted = self._operations.delete_tag_views(persistence_id, tags)
        logger.info(
            "tag views deleted: persistence_id=%s tags=%s rows=%d",
            persistence_id,
            ",".join(tags),
            deleted.tag_view_rows,
        )
        return deleted

    def _rebuilt(
        self, persistence_id: PersistenceId, tags: Sequence[Tag] | None, horizons: ExpiryHorizons
    ) -> tuple[SequenceNr, SequenceNr, RebuiltTagViews]:
        """(deleted_to, highest sequence nr, the rows of `tags` or all) from the id's events.

        Events up to deleted_to (inclusive) were deleted from the journal: their rows are kept.
        Events before their tag's horizon get no row: the expiry deleted it on purpose.
        """
        keep_up_to = self._operations.deleted_to(persistence_id)
        highest = self._journal.highest_sequence_nr(persistence_id)
        events = self._journal.read_events(
            persistence_id,
            from_sequence_nr=SequenceNr(keep_up_to + 1),
            to_sequence_nr=highest,
        )
        built = rebuild_tag_views(events, self._bucket_size, horizons=horizons, tags=tags)
        return keep_up_to, highest, built

    def _rebuild(
        self,
        persistence_id: PersistenceId,
        tags: Sequence[Tag],
        horizons: ExpiryHorizons,
        *,
        is_every_tag: bool,
        dry_run: bool,
    ) -> tuple[DeletedCounts, int]:
        """Replace the rows of each tag (one transaction per tag); (rows deleted, rows written).

        Rows of events deleted from the journal are kept, expired events get none; tag_scanning
        is set to the highest sequence nr only when every tag of the id was rebuilt.
        """
        keep_up_to, highest, built = self._rebuilt(persistence_id, tags, horizons)
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
        return DeletedCounts(tag_view_rows=replaced), len(built.all_rows())

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
