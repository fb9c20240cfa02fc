"""The stores of one database, and how both backends assemble them from their datastore.

`ordo.storage.open` picks the backend from the URL and hands its datastore and store classes to
`assembled`, so the two backends cannot wire their stores differently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Protocol, TypeVar

from ordo.journal.ports import JournalStore
from ordo.query import EventEnvelope, KeyRun, TagViewReader
from ordo.storage.cdc_stores import CdcStores
from ordo.storage.location import Location, SQLiteLocation
from ordo.storage.migration import MigrationReceipt
from ordo.storage.packed_reads import PackedPageReader
from ordo.storage.sql_tag_view_store import SqlTagViewStore, TagViewKeyReader
from ordo.tagging import TagViewStore
from ordo.time import BucketSize

if TYPE_CHECKING:
    from ordo.cdc.ports import SchemaStore
    from ordo.processing.ports import TokenStore
    from ordo.storage.sql_change_sink import SqlChangeSink
    from ordo.tools.ports import OperationsStore


class SchemaCheck(Protocol):
    """A datastore's `check_schema` (see `ordo.storage.migration.require_latest`)."""

    def __call__(self, *, upgradable: bool = False) -> None:
        """SchemaVersionError for a newer schema, and for an older one unless `upgradable`."""


@dataclass(frozen=True, kw_only=True)
class Stores:
    """The stores of one database, sharing its connections; close() releases them.

    The token and operations stores and the CDC stores (`schemas`, `change_sink`) are built on
    first use (see deferred_stores.py and cdc_stores.py); they hold no state but the
    datastore, so two threads racing to build one build equal ones.
    """

    backend: str
    location: Location
    journal: JournalStore
    tag_views: TagViewStore
    tag_view_reader: TagViewReader[EventEnvelope]
    """The same tag view store, as the query's port."""
    tag_view_key_reader: TagViewReader[KeyRun]
    """Its keys-only reads, each row a KeyRun of one, for Spark's planner."""
    packed_pages: PackedPageReader
    """Its pages packed column by column, for Spark's bulk reads (driver and executors)."""
    make_tokens: Callable[[], TokenStore]
    """What builds `tokens`, on its first use."""
    cdc: Callable[[], CdcStores]
    """What builds `schemas` and `change_sink`: they call it once, on the first use of either."""
    make_operations: Callable[[], OperationsStore]
    """What builds `operations`, on its first use."""
    all_events: Callable[[BucketSize], TagViewReader[EventEnvelope]]
    """Every journal event as a TagViewReader (for processors over the whole journal)."""
    migrate: Callable[[], MigrationReceipt]
    check_schema: SchemaCheck
    """SchemaVersionError unless the schema is the latest (what `existing_stores_at` checks)."""
    schema_version: Callable[[], int]
    """The schema version found, 0 before any: read without creating or upgrading anything."""
    table_names: Callable[[], Sequence[str]]
    """The database's tables and views, ordo's or not (in the schema ordo writes to)."""
    close: Callable[[], None]

    @cached_property
    def tokens(self) -> TokenStore:
        """The tracking processors' tokens and segment requests."""
        return self.make_tokens()

    @cached_property
    def operations(self) -> OperationsStore:
        """Reconciliation, cleanup and expiry (ordo.tools), and the Spark operations jobs' reads."""
        return self.make_operations()

    @cached_property
    def _cdc_stores(self) -> CdcStores:
        return self.cdc()

    @property
    def schemas(self) -> SchemaStore:
        """The CDC schema registry's versions."""
        return self._cdc_stores.schemas

    @property
    def change_sink(self) -> SqlChangeSink:
        """Where CDC materializers apply their micro-batches (messages, tables, progress)."""
        return self._cdc_stores.change_sink


class Datastore(Protocol):
    """What `Stores` takes from a backend's datastore besides the stores built on it."""

    def migrate(self) -> MigrationReceipt:
        """Create or upgrade the schema."""
        ...

    def check_schema(self, *, upgradable: bool = False) -> None:
        """SchemaVersionError unless the schema is the latest."""
        ...

    def schema_version(self) -> int:
        """The schema version found, 0 before any."""
        ...

    def table_names(self) -> list[str]:
        """The database's tables and views."""
        ...

    def close(self) -> None:
        """Release the connections."""
        ...


D = TypeVar("D", bound=Datastore)


def assembled(
    location: Location,
    datastore: D,
    *,
    journal: Callable[[D], JournalStore],
    tag_views: Callable[[D], SqlTagViewStore],
    tokens: Callable[[D], TokenStore],
    operations: Callable[[D], OperationsStore],
    all_events: Callable[[D, BucketSize], TagViewReader[EventEnvelope]],
    cdc: Callable[[D], CdcStores],
) -> Stores:
    """The `Stores` of `datastore`, built with its backend's store classes.

    One tag view store serves the journal's tag writes, the query, Spark's planner (keys only)
    and Spark's packed reads; the CDC stores are built on first use.
    """
    views = tag_views(datastore)
    return Stores(
        backend="sqlite" if isinstance(location, SQLiteLocation) else "postgres",
        location=location,
        journal=journal(datastore),
        tag_views=views,
        tag_view_reader=views,
        tag_view_key_reader=TagViewKeyReader(views),
        packed_pages=views,
        make_tokens=partial(tokens, datastore),
        cdc=partial(cdc, datastore),
        make_operations=partial(operations, datastore),
        all_events=partial(all_events, datastore),
        migrate=datastore.migrate,
        check_schema=datastore.check_schema,
        schema_version=datastore.schema_version,
        table_names=datastore.table_names,
        close=datastore.close,
    )
