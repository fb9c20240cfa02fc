"""Opening storage for the operations tools: the stores they use, over one datastore.

`open_stores()` (open.py) gives applications their stores; the tools also need the
OperationsStore of the same database. They open it here, with the journal, tag view and token
stores built on the same connections, so a tool holds one pool (or one SQLite file) only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ordo.journal.ports import JournalStore
from ordo.processing.ports import TokenStore
from ordo.storage.location import SQLiteLocation, parse_location
from ordo.tagging import TagViewStore
from ordo.tools.ports import OperationsStore


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationsStores:
    """The stores of one database that the operations tools use; close() releases them."""

    backend: str
    journal: JournalStore
    tag_views: TagViewStore
    tokens: TokenStore
    operations: OperationsStore
    close: Callable[[], None]


def open_operations(url: str, *, create_schema: bool = True) -> OperationsStores:
    """Connect to the journal at `url` for the tools (schema created or upgraded unless told).

    Spark executors call this too (with create_schema=False) to read and write their share.
    """
    location = parse_location(url)
    stores: OperationsStores
    migrate: Callable[[], object]
    if isinstance(location, SQLiteLocation):
        from ordo.storage.sqlite.datastore import SQLiteDatastore
        from ordo.storage.sqlite.journal_store import SQLiteJournalStore
        from ordo.storage.sqlite.operations_store import SQLiteOperationsStore
        from ordo.storage.sqlite.tag_view_store import SQLiteTagViewStore
        from ordo.storage.sqlite.token_store import SQLiteTokenStore

        sqlite = SQLiteDatastore(location.path)
        migrate = sqlite.migrate
        stores = OperationsStores(
            backend="sqlite",
            journal=SQLiteJournalStore(sqlite),
            tag_views=SQLiteTagViewStore(sqlite),
            tokens=SQLiteTokenStore(sqlite),
            operations=SQLiteOperationsStore(sqlite),
            close=sqlite.close,
        )
    else:
        from ordo.storage.postgres.datastore import PostgresDatastore
        from ordo.storage.postgres.journal_store import PostgresJournalStore
        from ordo.storage.postgres.operations_store import PostgresOperationsStore
        from ordo.storage.postgres.tag_view_store import PostgresTagViewStore
        from ordo.storage.postgres.token_store import PostgresTokenStore

        postgres = PostgresDatastore(location.dsn, max_size=2)
        migrate = postgres.migrate
        stores = OperationsStores(
            backend="postgres",
            journal=PostgresJournalStore(postgres),
            tag_views=PostgresTagViewStore(postgres),
            tokens=PostgresTokenStore(postgres),
            operations=PostgresOperationsStore(postgres),
            close=postgres.close,
        )
    try:
        if create_schema:
            migrate()
    except BaseException:
        stores.close()
        raise
    return stores


@contextmanager
def operations_at(url: str, *, create_schema: bool = True) -> Iterator[OperationsStores]:
    """open_operations() as a context manager."""
    stores = open_operations(url, create_schema=create_schema)
    try:
        yield stores
    finally:
        stores.close()
