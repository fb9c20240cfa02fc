"""The CDC schema registry's store on Postgres."""

from __future__ import annotations

from ordo.storage.sql_schema_store import SqlSchemaStore


class PostgresSchemaStore(SqlSchemaStore):
    """SchemaStore on Postgres."""

    PARAM = "%s"
