"""The CDC schema registry's store on SQLite."""

from __future__ import annotations

from ordo.storage.sql_schema_store import SqlSchemaStore


class SQLiteSchemaStore(SqlSchemaStore):
    """SchemaStore on SQLite."""

    PARAM = "?"
