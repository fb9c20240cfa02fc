"""What Reconciliation and Cleanup share: one database's stores, the settings, the writer guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Self

from ordo.clock import Clock, clock_or_system
from ordo.journal.ports import JournalStore
from ordo.processing.ports import TokenStore
from ordo.settings import OperationsSettings
from ordo.settings.loading import flag
from ordo.tagging import TagViewStore
from ordo.time import BucketSize
from ordo.tools.guard import WriterGuard
from ordo.tools.ports import DeletedCounts, OperationsStore
from ordo.types import PersistenceId, SequenceNr, Tag

if TYPE_CHECKING:  # a runtime import would be circular: storage imports tools.ports
    from ordo.storage.stores import Stores


class OperationsTool:
    """The base of the tools that change stored data. Thread-safe; methods are independent.

    `bucket_size` must be the journal's (rows are bucketed by it); `of()` reads it from the
    journal (`recorded_bucket_size()`).
    """

    def __init__(
        self,
        *,
        journal: JournalStore,
        tag_views: TagViewStore,
        operations: OperationsStore,
        tokens: TokenStore,
        bucket_size: BucketSize,
        settings: OperationsSettings | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._journal = journal
        self._tag_views = tag_views
        self._operations = operations
        self._tokens = tokens
        self._bucket_size = bucket_size
        self._settings = OperationsSettings.or_default(settings)
        self._clock = clock_or_system(clock)
        self._guard = WriterGuard(operations, settings=self._settings, clock=self._clock)

    @classmethod
    def of(
        cls,
        stores: Stores,
        *,
        settings: OperationsSettings | None = None,
        clock: Clock | None = None,
    ) -> Self:
        """The tool on the database `stores` is open on (`ordo.storage.open.stores_at`)."""
        return cls(
            journal=stores.journal,
            tag_views=stores.tag_views,
            operations=stores.operations,
            tokens=stores.tokens,
            bucket_size=recorded_bucket_size(stores.journal),
            settings=settings,
            clock=clock,
        )

    def _tag_views_to_delete(
        self, persistence_id: PersistenceId, tags: Sequence[Tag], *, keep_progress_up_to: SequenceNr
    ) -> DeletedCounts:
        """What deleting the id's tag views of `tags` would delete: rows, progress, scanning.

        Progress rows of events up to `keep_progress_up_to` are kept (not counted).
        """
        rows = sum(
            self._operations.count_tag_view_rows(
                persistence_id, tag, after_sequence_nr=SequenceNr(0)
            )
            for tag in tags
        )
        progress = self._operations.count_metadata(
            persistence_id, tags, after_sequence_nr=keep_progress_up_to
        )
        return progress + DeletedCounts(tag_view_rows=rows)


def check_flags(*, force: object, dry_run: object) -> None:
    """ConfigurationError unless `force` and `dry_run` are bools (`flag`), before anything runs.

    Any object has a truth value: force="false" overrode the writer leases and the processors'
    lags, and dry_run=None changed what a dry run would only have counted.
    """
    flag("force", force)  # type: ignore[arg-type]
    flag("dry_run", dry_run)  # type: ignore[arg-type]


def recorded_bucket_size(journal: JournalStore) -> BucketSize:
    """The bucket size the journal records (hour, the default, when it records none yet)."""
    recorded = journal.recorded_bucket_size()
    return BucketSize.HOUR if recorded is None else BucketSize.parse(recorded)
