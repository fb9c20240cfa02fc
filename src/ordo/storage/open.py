"""Opening storage from a URL: the stores of one backend (`ordo.storage.stores`), a Journal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Literal

from ordo.clock import Clock, clock_or_system
from ordo.errors import BucketSizeMismatchError, ConfigurationError
from ordo.journal import Journal, check_bucket_size
from ordo.settings import EventsByTagSettings, QuerySettings
from ordo.settings.loading import enum_value
from ordo.storage.block import OneBlockAtATime
from ordo.storage.cdc_stores import postgres_cdc_stores, sqlite_cdc_stores
from ordo.storage.deferred_stores import (
    postgres_all_events,
    postgres_operations,
    postgres_tokens,
    sqlite_all_events,
    sqlite_operations,
    sqlite_tokens,
)
from ordo.storage.location import (
    PostgresLocation,
    SQLiteLocation,
    create_folders,
    existing_location,
    parse_location,
    redacted_url,
)
from ordo.storage.migration import MigrationReceipt
from ordo.storage.stores import Stores, assembled
from ordo.tagging.notification import IN_PROCESS
from ordo.time import BucketSize

if TYPE_CHECKING:
    from ordo.query import EventsByTag

OpenMode = Literal["migrate", "write", "read"]
"""How `open_stores` opens a journal.

- `migrate` (the default): create the schema, or upgrade it, then read and write.
- `write`: read and write without looking at the schema: Spark executors and sinks open their
  share so, after the driver opened it (and `init_storage`, which migrates explicitly).
- `read`: only read; nothing is created or upgraded and an SQLite file keeps its journal mode
  (`SQLiteDatastore(read_only=True)`), so a backup in rollback mode is not rewritten.
  PostgreSQL connections are the same either way (opening one changes nothing).
"""


def open_stores(url: str, *, mode: OpenMode = "migrate") -> Stores:
    """Connect to the journal at `url`, as `mode` says (`OpenMode`); close the stores after use.

    A missing SQLite file is created (except in `read` mode), never its folder: a missing
    folder is MissingFolderError in every mode, and nothing is created (only `init_storage`
    creates folders). A database written by a newer ordo raises SchemaVersionError when
    migrated. Commands that only read use `existing_stores_at`, which checks the schema
    without changing it.
    """
    if mode not in ("migrate", "write", "read"):
        msg = f"mode must be one of migrate, write, read; got {mode!r}"
        raise ConfigurationError(msg)
    location = parse_location(url)
    stores: Stores
    if isinstance(location, SQLiteLocation):
        from ordo.storage.sqlite.datastore import SQLiteDatastore
        from ordo.storage.sqlite.journal_store import SQLiteJournalStore
        from ordo.storage.sqlite.tag_view_store import SQLiteTagViewStore

        sqlite = SQLiteDatastore(location.path, read_only=mode == "read")
        stores = assembled(
            location,
            sqlite,
            journal=SQLiteJournalStore,
            tag_views=SQLiteTagViewStore,
            tokens=sqlite_tokens,
            operations=sqlite_operations,
            all_events=sqlite_all_events,
            cdc=sqlite_cdc_stores,
        )
    else:
        stores = _open_postgres(location)
    try:
        if mode == "migrate":
            stores.migrate()
    except BaseException:
        stores.close()
        raise
    return stores


def stores_at(url: str, *, mode: OpenMode = "migrate") -> AbstractContextManager[Stores]:
    """open_stores() as a context manager that closes them."""
    return closing(open_stores(url, mode=mode))


def open_existing_stores(
    url: str, *, mode: Literal["write", "read"] = "read", what: str = "journal"
) -> Stores:
    """The stores of a journal that is only read: it must exist and have the latest schema.

    Nothing is created or upgraded: a missing journal is StorageUnavailableError
    (`existing_location`: a misspelt path would otherwise become an empty journal), an older
    schema SchemaVersionError telling to run `ordo init` (an upgrade takes the write lock and
    alters tables under the writers of the older ordo, which a status, a query, a verify or a
    Spark read must not do). An SQLite file is opened in `read` mode (`OpenMode`) unless the
    caller writes to the tables it has. `what` names the database in errors (`--sink`'s is a
    "sink database"). Close the stores after use.
    """
    existing_location(url, what=what)
    stores = open_stores(url, mode=mode)
    try:
        stores.check_schema()
    except BaseException:
        stores.close()
        raise
    return stores


def existing_stores_at(url: str) -> AbstractContextManager[Stores]:
    """open_existing_stores() as a context manager that closes them."""
    return closing(open_existing_stores(url))


def require_empty_journal(url: str, *, run: str, bucket_size: BucketSize | None = None) -> None:
    """Refuse a journal `run` cannot fill and check, creating and changing nothing.

    A journal that holds events: `run` checks what it wrote against all of them. A database
    that is no ordo journal but holds tables (an application's): `run` would add ordo's
    tables, thousands of events and, in the demo, change triggers to it. A newer schema is
    refused too (`check_schema`). A missing SQLite file is a new journal, empty by definition.
    With `bucket_size`, the one `run` writes and cannot be told another, an empty journal that
    records another (`ordo init` with ORDO_BUCKET_SIZE) is BucketSizeMismatchError: the demo's
    writers and source failed on it only once Spark had started and its tables were added.
    """
    location = parse_location(url)
    if isinstance(location, SQLiteLocation) and not location.path.exists():
        return
    shown_url = redacted_url(url)  # a message must not show the URL's password
    with stores_at(url, mode="read") as stores:
        stores.check_schema(upgradable=True)
        if stores.schema_version() == 0:
            if tables := stores.table_names():
                shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
                msg = (
                    f"{run} writes a journal of its own, and {shown_url} is no ordo journal but "
                    f"holds tables ({shown}): name a new file or an empty database"
                )
                raise ConfigurationError(msg)
        elif next(iter(stores.journal.persistence_ids()), None) is not None:
            msg = (
                f"{run} needs an empty journal, and {shown_url} holds events (its checker "
                "compares every event of the journal with what was delivered): name a new one"
            )
            raise ConfigurationError(msg)
        elif bucket_size is not None:
            try:
                check_bucket_size(stores.journal.recorded_bucket_size(), bucket_size)
            except BucketSizeMismatchError as exc:
                advice = f"{run} writes {bucket_size} buckets: name a new journal"
                raise exc.advised(advice) from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class InitReceipt(MigrationReceipt):
    """What `init_storage` did: the schema's migration and the journal's bucket size.

    The bucket sizes are the recorded one before and after, None while none is: the first
    write records it unless an init was given one.
    """

    previous_bucket_size: str | None
    bucket_size: str | None

    @property
    def is_bucket_size_recorded(self) -> bool:
        """Whether this init recorded the bucket size (the journal had none)."""
        return self.previous_bucket_size != self.bucket_size

    @property
    def is_changed(self) -> bool:
        """Whether a migration ran or the bucket size was recorded."""
        return self.previous_version != self.version or self.is_bucket_size_recorded


def init_storage(url: str, *, bucket_size: BucketSize | None = None) -> InitReceipt:
    """Create or upgrade the schema at `url` (what `ordo init` runs); idempotent.

    An SQLite file's missing folders are created first (`create_folders`): this is the one
    opening of storage that creates folders, `open_stores` and `open_journal` refuse them.
    With `bucket_size`, also record it, so that a writer with another one is refused from the
    start rather than recording its own at the first write; a journal that recorded another
    one raises BucketSizeMismatchError and keeps it. Without, the bucket size is left to the
    first write: an empty journal must not be fixed to a size nobody chose. A `bucket_size`
    that is no BucketSize (nor its name) is a ConfigurationError before the journal is opened
    (or its folder created): it was recorded as given, and no writer or query could open the
    journal afterwards.
    """
    if bucket_size is not None:
        bucket_size = enum_value("bucket_size", bucket_size, BucketSize)
    create_folders(url)
    stores = open_stores(url, mode="write")
    try:
        # Read before an upgrade (every schema version has the metadata table), and refused
        # then: a rejected init must leave the journal as it was.
        previous = stores.journal.recorded_bucket_size() if stores.schema_version() else None
        if bucket_size is not None:
            check_bucket_size(previous, bucket_size)
        migration = stores.migrate()
        recorded = previous
        if bucket_size is not None and previous is None:
            # Another writer may record first: record_bucket_size returns the size that won.
            recorded = stores.journal.record_bucket_size(bucket_size)
            check_bucket_size(recorded, bucket_size)
        return InitReceipt(
            previous_version=migration.previous_version,
            version=migration.version,
            previous_bucket_size=previous,
            bucket_size=recorded,
        )
    finally:
        stores.close()


def open_journal(
    url: str,
    *,
    settings: EventsByTagSettings | None = None,
    clock: Clock | None = None,
) -> Journal:
    """A Journal on the database at `url`, creating its schema when needed; close it after use.

    A missing SQLite file is created, but not its folder (MissingFolderError, as for
    `open_stores`): call `init_storage(url)` first to create the folders, as `ordo init` does.
    """
    settings = EventsByTagSettings.or_default(settings)  # before anything is created
    clock = clock_or_system(clock)
    stores = open_stores(url)
    try:
        return Journal(
            stores.journal,
            stores.tag_views,
            settings=settings,
            clock=clock,
            on_close=stores.close,
        )
    except BaseException:
        stores.close()
        raise


def events_by_tag_at(
    url: str,
    *,
    settings: QuerySettings | None = None,
    events_by_tag: EventsByTagSettings | None = None,
    clock: Clock | None = None,
) -> AbstractContextManager[EventsByTag]:
    """Events-by-tag queries on the journal at `url`; its connections close with the block.

    The journal must exist with the latest schema (`existing_stores_at`): a query only reads,
    so it neither creates nor upgrades one. With
    pubsub_notification on a PostgreSQL journal, a listener thread forwards tag writes of other
    processes to this process's live queries. Entered again after its block, it connects
    again; entered while its block is open, AlreadyRunningError (`OneBlockAtATime`).
    """
    return OneBlockAtATime(
        partial(
            _events_by_tag_block, url, settings=settings, events_by_tag=events_by_tag, clock=clock
        ),
        what="events_by_tag_at",
    )


@contextmanager
def _events_by_tag_block(
    url: str,
    *,
    settings: QuerySettings | None,
    events_by_tag: EventsByTagSettings | None,
    clock: Clock | None,
) -> Iterator[EventsByTag]:
    """One block of `events_by_tag_at`: its stores, bucket size check and listener."""
    # Imported here: the query's modules are needed by the commands that query, not by every
    # command that opens a journal (tests/cli/test_command_imports.py).
    from ordo.query import EventsByTag

    events_by_tag = EventsByTagSettings.or_default(events_by_tag, name="events_by_tag")
    settings = QuerySettings.or_default(settings)
    clock = clock_or_system(clock)
    with existing_stores_at(url) as stores:
        check_bucket_size(stores.journal.recorded_bucket_size(), events_by_tag.bucket_size)
        listener = None
        if events_by_tag.pubsub_notification and isinstance(stores.location, PostgresLocation):
            from ordo.storage.postgres.notification import PostgresTagListener

            listener = PostgresTagListener(stores.location.dsn, IN_PROCESS)
        try:
            yield EventsByTag(
                stores.tag_view_reader,
                settings=settings,
                events_by_tag=events_by_tag,
                clock=clock,
            )
        finally:
            if listener is not None:
                listener.close()


def _open_postgres(location: PostgresLocation) -> Stores:
    from ordo.storage.postgres.datastore import PostgresDatastore
    from ordo.storage.postgres.journal_store import PostgresJournalStore
    from ordo.storage.postgres.tag_view_store import PostgresTagViewStore

    return assembled(
        location,
        PostgresDatastore(location.dsn),
        journal=PostgresJournalStore,
        tag_views=PostgresTagViewStore,
        tokens=postgres_tokens,
        operations=postgres_operations,
        all_events=postgres_all_events,
        cdc=postgres_cdc_stores,
    )
