"""A database's CDC stores, which `Stores` builds on first use.

Built, and ordo.cdc imported, only when asked for: a process that only reads events (Spark's
source process, started afresh for every streaming query) does not load ordo.cdc.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ordo.cdc.ports import SchemaStore
    from ordo.storage.postgres.datastore import PostgresDatastore
    from ordo.storage.sql_change_sink import SqlChangeSink
    from ordo.storage.sqlite.datastore import SQLiteDatastore


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcStores:
    """The CDC schema registry's versions and the materializers' sink, on one datastore."""

    schemas: SchemaStore
    change_sink: SqlChangeSink


def sqlite_cdc_stores(sqlite: SQLiteDatastore) -> CdcStores:
    """The CDC stores on an SQLite datastore."""
    from ordo.storage.sqlite.change_sink import SQLiteChangeSink
    from ordo.storage.sqlite.schema_store import SQLiteSchemaStore

    return CdcStores(schemas=SQLiteSchemaStore(sqlite), change_sink=SQLiteChangeSink(sqlite))


def postgres_cdc_stores(postgres: PostgresDatastore) -> CdcStores:
    """The CDC stores on a PostgreSQL datastore."""
    from ordo.storage.postgres.change_sink import PostgresChangeSink
    from ordo.storage.postgres.schema_store import PostgresSchemaStore

    return CdcStores(
        schemas=PostgresSchemaStore(postgres), change_sink=PostgresChangeSink(postgres)
    )
