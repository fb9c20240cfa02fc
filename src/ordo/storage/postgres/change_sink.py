"""The materializer's sink (messages, materialized table, progress) on PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import psycopg

from ordo.cdc.mutation import JsonValue
from ordo.cdc.schema import Column, ColumnType
from ordo.storage.sql_change_sink import SqlChangeSink
from ordo.storage.sql_store import SqlConnection


class PostgresChangeSink(SqlChangeSink):
    """SqlChangeSink on PostgreSQL: native types; a timestamp without a zone is read as UTC."""

    PARAM = "%s"
    COLUMN_TYPES: ClassVar[Mapping[ColumnType, str]] = {
        ColumnType.STRING: "TEXT",
        ColumnType.LONG: "BIGINT",
        ColumnType.DOUBLE: "DOUBLE PRECISION",
        ColumnType.BOOLEAN: "BOOLEAN",
        ColumnType.DECIMAL: "NUMERIC",
        ColumnType.TIMESTAMP: "TIMESTAMPTZ",
        ColumnType.DATE: "DATE",
        ColumnType.BYTES: "BYTEA",
        ColumnType.JSON: "JSONB",
    }
    TABLE_COLUMNS = (
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = {p}"
    )

    def _identifier(self, name: str) -> str:
        # psycopg reads % as the start of a placeholder in statements that carry parameters.
        return super()._identifier(name).replace("%", "%%")

    def _sql_value(self, column: Column, value: JsonValue) -> object:
        if column.type is ColumnType.TIMESTAMP and isinstance(value, str):
            moment = dt.datetime.fromisoformat(value)
            return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
        return super()._sql_value(column, value)

    def _executemany(self, conn: SqlConnection, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with cast(psycopg.Connection[Any], conn).cursor() as cursor:
            cursor.executemany(sql, rows)
