"""The materializer's sink (messages, materialized table, progress) on PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar, cast

import psycopg

from ordo.cdc.column_type import ColumnType
from ordo.cdc.mutation import JsonValue
from ordo.cdc.schema import Column, TableSchema
from ordo.errors import CdcError
from ordo.processing.connection import SqlConnection
from ordo.storage.sql_change_sink import SqlChangeSink
from ordo.storage.sql_materialized_table import ValueConverter

_TABLE = "to_regclass(quote_ident(current_schema()) || '.' || quote_ident({p}))"
"""The oid of the table named by the parameter, in the current schema (null if absent)."""
_NAME_BYTES = 63
"""The longest name PostgreSQL keeps (NAMEDATALEN - 1 bytes); it cuts a longer one short."""


def _timestamp_value(value: JsonValue) -> object:
    """A timestamp's text as a datetime with a zone (UTC when the text names none)."""
    if not isinstance(value, str):
        return value
    moment = dt.datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


class PostgresChangeSink(SqlChangeSink):
    """SqlChangeSink on PostgreSQL: native types; a timestamp without a zone is read as UTC.

    But for a decimal or timestamp key column, which holds its keys' text (`TEXT_KEY_TYPES`).
    """

    PARAM = "%s"
    COLUMN_TYPES: ClassVar[Mapping[ColumnType, str]] = {
        ColumnType.STRING: "TEXT",
        ColumnType.LONG: "BIGINT",
        ColumnType.DOUBLE: "DOUBLE PRECISION",
        ColumnType.BOOLEAN: "BOOLEAN",
        ColumnType.DECIMAL: "NUMERIC",
        ColumnType.TIMESTAMP: "TIMESTAMP WITH TIME ZONE",
        ColumnType.DATE: "DATE",
        ColumnType.BYTES: "BYTEA",
        ColumnType.JSON: "JSONB",
    }
    TABLE_COLUMNS = (
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), k.position "
        "FROM pg_attribute AS a LEFT JOIN pg_index AS i "
        "ON i.indrelid = a.attrelid AND i.indisprimary "
        "LEFT JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, position) "
        "ON k.attnum = a.attnum "
        f"WHERE a.attrelid = {_TABLE} AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum"
    )

    def _identifier(self, name: str) -> str:
        """`name` quoted; CdcError when PostgreSQL would cut it short (`_NAME_BYTES`).

        Cut, it named a column other than the schema's: the table was created with it, and the
        next batch's ADD COLUMN of the one it lacked failed, for good; two names that begin
        alike were one table or column. psycopg reads % as the start of a placeholder in
        statements that carry parameters, so it is doubled.
        """
        size = len(name.encode("utf-8", "surrogatepass"))
        if size > _NAME_BYTES:
            msg = (
                f"name {name!r} is {size} bytes long: PostgreSQL would cut it to {_NAME_BYTES} "
                "(a table or column name of the materialized table must be shorter)"
            )
            raise CdcError(msg)
        return super()._identifier(name).replace("%", "%%")

    def _retable(
        self,
        conn: SqlConnection,
        table: str,
        *,
        key: tuple[str, ...],
        schema: TableSchema,
        retyped: Collection[str],
    ) -> None:
        """One ALTER TABLE: the retyped columns' types, and a new primary key for the old one.

        USING NULL: the sink writes the converted values after. The old key columns that leave
        the key lose their NOT NULL (the sink set it for the key).
        """
        name = self._identifier
        actions = [
            f"ALTER COLUMN {name(c)} TYPE {self._sql_type(schema.by_name[c], schema)} USING NULL"
            for c in retyped
        ]
        if key != schema.primary_key:
            primary = conn.execute(
                self._sql(
                    f"SELECT conname FROM pg_constraint WHERE conrelid = {_TABLE} AND contype = 'p'"
                ),
                (table,),
            ).fetchone()
            if primary is not None:
                actions.append(f"DROP CONSTRAINT {name(primary[0])}")
            actions.extend(
                f"ALTER COLUMN {name(c)} DROP NOT NULL" for c in key if c not in schema.key_names
            )
            actions.append(f"ADD PRIMARY KEY ({', '.join(map(name, schema.primary_key))})")
        conn.execute(f"ALTER TABLE {name(table)} {', '.join(actions)}", ())

    def _value_converter(self, column: Column) -> ValueConverter | None:
        if column.type is ColumnType.TIMESTAMP:
            return _timestamp_value
        return super()._value_converter(column)

    def _executemany(self, conn: SqlConnection, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with cast(psycopg.Connection[Any], conn).cursor() as cursor:
            cursor.executemany(sql, rows)
