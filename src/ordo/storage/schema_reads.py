"""What both datastores read of their database without changing it: the schema and its tables."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from ordo.storage.migration import require_latest


class _Datastore(Protocol):
    """What SchemaReads uses of the datastore it is part of."""

    @property
    def MIGRATIONS(self) -> str: ...

    @property
    def TABLE_NAMES(self) -> str: ...

    def connection(self) -> AbstractContextManager[Any]: ...

    def schema_version(self) -> int: ...

    def _schema_version(self, conn: Any) -> int: ...


class SchemaReads:
    """The schema reads of a datastore, the same on both backends but for two class attributes.

    `MIGRATIONS` is the package of the backend's migrations; `TABLE_NAMES` the catalog query
    listing the tables and views ordo would share the database with (one column of names, in
    order). The datastore lends `connection()` and reads the version with `_schema_version`.
    `open.py` asks these before it lets a command write a journal into a database. Thread-safe
    as the datastore's connections are.
    """

    __slots__ = ()

    def check_schema(self: _Datastore, *, upgradable: bool = False) -> None:
        """Refuse a schema other than the latest, changing nothing (`require_latest`)."""
        require_latest(self.MIGRATIONS, self.schema_version(), upgradable=upgradable)

    def schema_version(self: _Datastore) -> int:
        """The schema version found (0: no ordo schema yet), read without changing anything."""
        with self.connection() as conn:
            return self._schema_version(conn)

    def table_names(self: _Datastore) -> list[str]:
        """The tables and views `TABLE_NAMES` lists, ordo's or not, by name."""
        with self.connection() as conn:
            return listed_tables(conn, self.TABLE_NAMES)


def listed_tables(conn: Any, query: str) -> list[str]:
    """The names `query` (a datastore's `TABLE_NAMES`) lists on `conn`, in its transaction.

    A migration asks it in its own transaction (`migration.refuse_foreign_tables`), a
    `table_names()` on a connection of its own.
    """
    return [str(name) for (name,) in conn.execute(query).fetchall()]
