"""The materializer's sink (messages, materialized table, progress) on SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import ClassVar, cast

from ordo.cdc.schema import ColumnType
from ordo.storage.sql_change_sink import SqlChangeSink
from ordo.storage.sql_store import SqlConnection


class SQLiteChangeSink(SqlChangeSink):
    """SqlChangeSink on SQLite: decimals, timestamps and dates are kept as their text."""

    PARAM = "?"
    COLUMN_TYPES: ClassVar[Mapping[ColumnType, str]] = {
        ColumnType.STRING: "TEXT",
        ColumnType.LONG: "INTEGER",
        ColumnType.DOUBLE: "REAL",
        ColumnType.BOOLEAN: "INTEGER",
        ColumnType.DECIMAL: "TEXT",  # NUMERIC affinity would round "0.10000000000000000001"
        ColumnType.TIMESTAMP: "TEXT",
        ColumnType.DATE: "TEXT",
        ColumnType.BYTES: "BLOB",
        ColumnType.JSON: "TEXT",
    }
    TABLE_COLUMNS = "SELECT name FROM pragma_table_info({p})"

    def _executemany(self, conn: SqlConnection, sql: str, rows: Sequence[Sequence[object]]) -> None:
        cast(sqlite3.Connection, conn).executemany(sql, rows)
