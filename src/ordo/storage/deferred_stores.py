"""A database's token and operations stores and all-events reader, which `Stores` builds lazily.

Built, and their modules imported, only when asked for: the token store's SQL (segments,
requests, resets) with ordo.processing's control, and the operations store's (reconciliation,
cleanup, expiry), which a command that only appends or reads events (`ordo append`, `ordo
events`, `ordo info`) never uses; importing them cost each such command about 30 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ordo.processing.ports import TokenStore
    from ordo.query import EventEnvelope, TagViewReader
    from ordo.storage.postgres.datastore import PostgresDatastore
    from ordo.storage.sqlite.datastore import SQLiteDatastore
    from ordo.time import BucketSize
    from ordo.tools.ports import OperationsStore


def sqlite_tokens(sqlite: SQLiteDatastore) -> TokenStore:
    """The tracking processors' token store on an SQLite datastore."""
    from ordo.storage.sqlite.token_store import SQLiteTokenStore

    return SQLiteTokenStore(sqlite)


def sqlite_operations(sqlite: SQLiteDatastore) -> OperationsStore:
    """The operations store on an SQLite datastore."""
    from ordo.storage.sqlite.operations_store import SQLiteOperationsStore

    return SQLiteOperationsStore(sqlite)


def sqlite_all_events(
    sqlite: SQLiteDatastore, bucket_size: BucketSize
) -> TagViewReader[EventEnvelope]:
    """Every journal event of an SQLite datastore as a TagViewReader."""
    from ordo.storage.sqlite.token_store import SQLiteAllEventsReader

    return SQLiteAllEventsReader(sqlite, bucket_size)


def postgres_tokens(postgres: PostgresDatastore) -> TokenStore:
    """The tracking processors' token store on a PostgreSQL datastore."""
    from ordo.storage.postgres.token_store import PostgresTokenStore

    return PostgresTokenStore(postgres)


def postgres_operations(postgres: PostgresDatastore) -> OperationsStore:
    """The operations store on a PostgreSQL datastore."""
    from ordo.storage.postgres.operations_store import PostgresOperationsStore

    return PostgresOperationsStore(postgres)


def postgres_all_events(
    postgres: PostgresDatastore, bucket_size: BucketSize
) -> TagViewReader[EventEnvelope]:
    """Every journal event of a PostgreSQL datastore as a TagViewReader."""
    from ordo.storage.postgres.token_store import PostgresAllEventsReader

    return PostgresAllEventsReader(postgres, bucket_size)
