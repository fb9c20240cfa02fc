"""The materializer's sink (messages, materialized table, progress) on SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping, Sequence
from typing import ClassVar, cast

from ordo.cdc.column_type import ColumnType
from ordo.cdc.schema import TableSchema
from ordo.processing.connection import SqlConnection
from ordo.storage.sql_change_sink import SqlChangeSink


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
    TABLE_COLUMNS = "SELECT name, type, pk FROM pragma_table_info({p})"

    def _executemany(self, conn: SqlConnection, sql: str, rows: Sequence[Sequence[object]]) -> None:
        cast(sqlite3.Connection, conn).executemany(sql, rows)

    def _retable(
        self,
        conn: SqlConnection,
        table: str,
        *,
        key: tuple[str, ...],
        schema: TableSchema,
        retyped: Collection[str],
    ) -> None:
        """Rebuild the table: SQLite alters neither a column's type nor a primary key.

        As SQLite's documentation does it, in the caller's transaction: create the new table
        (every column as declared, defaults and NOT NULL kept, but the retyped columns' types,
        the new key columns NOT NULL and the old ones no longer), copy the rows, drop the old
        table, rename the new one and create the old one's indexes and triggers again. The
        rename runs with `legacy_alter_table` on, so a view that names the table does not make
        it fail while the table is gone.
        """
        name = self._identifier
        columns = conn.execute(
            'SELECT name, type, "notnull", dflt_value FROM pragma_table_info(?)', (table,)
        ).fetchall()
        extras = conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') "
            "AND sql IS NOT NULL",
            (table,),
        ).fetchall()
        definitions = [
            f"{name(column)} "
            + (self._sql_type(schema.by_name[column], schema) if column in retyped else declared)
            + (" NOT NULL" if column in schema.key_names or (notnull and column not in key) else "")
            + ("" if default is None else f" DEFAULT ({default})")  # listed without its ()
            for column, declared, notnull, default in columns
        ]
        rebuilt = name(f"{table} (rebuilt by ordo)")
        copied = ", ".join("NULL" if column in retyped else name(column) for column, *_ in columns)
        conn.execute(
            f"CREATE TABLE {rebuilt} ({', '.join(definitions)}, "
            f"PRIMARY KEY ({', '.join(map(name, schema.primary_key))}))"
        )
        conn.execute(f"INSERT INTO {rebuilt} SELECT {copied} FROM {name(table)}")
        conn.execute(f"DROP TABLE {name(table)}")
        conn.execute("PRAGMA legacy_alter_table = ON")
        try:
            conn.execute(f"ALTER TABLE {rebuilt} RENAME TO {name(table)}")
        finally:
            conn.execute("PRAGMA legacy_alter_table = OFF")
        for (sql,) in extras:
            conn.execute(sql)
