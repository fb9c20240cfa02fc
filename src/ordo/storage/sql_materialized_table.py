"""The sink's materialized tables: created from a table's current accepted schema, following it.

The sink (`SqlChangeSink`) calls `_ensure_table` in the transaction that applies a batch, so a
table changes with the batch or not at all: it gets the columns the schema adds, loses those an
accepted version drops, takes a column's new type after an accepted retype (its rows' values
converted, or the batch refused) and, while it holds no row, a new primary key. A key column of
a type with several text forms of one value is stored as its text on every backend
(`TEXT_KEY_TYPES`). The backends add their column types, how they list a table's columns and how
they change a column's type or the primary key (PostgreSQL alters the table; SQLite, which
cannot, rebuilds it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, ClassVar, cast

from ordo.cdc.column_type import ColumnType
from ordo.cdc.json_text import compact_json
from ordo.cdc.mutation import JsonValue, Key, Scalar
from ordo.cdc.retype import retyped_value
from ordo.cdc.schema import Column, TableSchema
from ordo.errors import CdcError, MaterializedKeyChangeError, MaterializedRetypeError
from ordo.journal.serialization import stored_json
from ordo.processing.connection import SqlConnection
from ordo.storage.sql_store import SqlStore


def quote_identifier(name: str) -> str:
    """`name` as a quoted SQL identifier (the same rule on SQLite and PostgreSQL)."""
    if not name or "\x00" in name:
        msg = f"not a usable table or column name: {name!r}"
        raise CdcError(msg)
    return '"' + name.replace('"', '""') + '"'


TEXT_KEY_TYPES = frozenset({ColumnType.DECIMAL, ColumnType.TIMESTAMP})
"""The types with several text forms of one value that a key column stores as its text.

The fold keys a row by the JSON text of its key, so `"1"` and `"1.0"`, or
`"2026-01-01 00:00:00"`, `"2026-01-01T00:00:00"` and `"2026-01-01T01:00:00+01:00"`, are rows of
their own, as they are in an SQLite source (which compares them as text) or an ingested log. A
PostgreSQL NUMERIC or TIMESTAMP WITH TIME ZONE key would make them one row, which a delete of
any of them would empty: the table would no longer be the fold of the messages (G6). A date has
one text form (`YYYY-MM-DD`), so a DATE key keeps its type; so do value columns of every type."""


def _row_name(table: str, key: Sequence[Any]) -> str:
    """How a damaged value names its row: by its key as the table holds it."""
    return f"the row keyed {tuple(key)!r} of table {table!r}"


def _json_value(column: Column, value: Any, *, of: str) -> JsonValue:
    """A value read from row `of` (`_row_name`) of a materialized table in its JSON form.

    SQLite holds a JSON column as text, which a hand edit can leave no JSON: StorageIntegrityError
    naming the row and column (`stored_json`), where json's bare error named neither.
    """
    if value is None:
        return None
    match column.type:
        case ColumnType.BOOLEAN:
            return bool(value)
        case ColumnType.BYTES:
            return bytes(value).hex()
        case ColumnType.JSON:
            if isinstance(value, str):
                return cast(
                    JsonValue, stored_json(value, what=f"value of column {column.name!r}", of=of)
                )
            return cast(JsonValue, value)
        case ColumnType.DECIMAL | ColumnType.TIMESTAMP | ColumnType.DATE:
            return value if isinstance(value, str) else str(value)
        case _:
            return cast(JsonValue, value)


ValueConverter = Callable[[Any], object]
"""A function from a non-null message value to what a backend's driver takes."""


def _converted_value(convert: ValueConverter | None, value: JsonValue) -> object:
    """`value` through `convert` (None: as it is); null stays null."""
    return value if convert is None or value is None else convert(value)


def _bytes_value(value: JsonValue) -> bytes:
    r"""A bytes column's message value (hex, possibly with PostgreSQL's `\x`) as bytes."""
    return bytes.fromhex(str(value).removeprefix("\\x"))


def _double_value(value: JsonValue) -> object:
    """A double column's long value as the double it reads as (SQLite binds no int past 64 bits)."""
    return float(value) if isinstance(value, int) else value


def _key_retype(column: str, old: ColumnType, new: ColumnType) -> str:
    """How a key column's values changed, for MaterializedKeyChangeError."""
    if old is new:
        return f"column {column!r} stored as {new.value} values, not as the text of its keys"
    return f"column {column!r} retyped {old.value} -> {new.value}"


@dataclass(frozen=True, slots=True)
class _TableColumn:
    """One column of a materialized table as the database lists it."""

    name: str
    sql_type: str
    key_position: int
    """Its place in the primary key from 1; 0 when it is not a key column."""


class SqlMaterializedTable(SqlStore):
    """Creates, reads and reshapes materialized tables (thread-safe as its datastore is)."""

    COLUMN_TYPES: ClassVar[Mapping[ColumnType, str]]
    """The SQL type of each logical column type on this backend, spelt as the database lists
    a column's type (compared case-insensitively)."""
    TABLE_COLUMNS: ClassVar[str]
    """A query with one `{p}` (the table name) listing the table's columns in order, each as
    (name, SQL type, place in the primary key from 1 or 0); no row if the table is absent."""

    def _executemany(self, conn: SqlConnection, sql: str, rows: Sequence[Sequence[object]]) -> None:
        raise NotImplementedError

    def _retable(
        self,
        conn: SqlConnection,
        table: str,
        *,
        key: tuple[str, ...],
        schema: TableSchema,
        retyped: Collection[str],
    ) -> None:
        """Retype the `retyped` columns (values all null) and make `schema`'s key the table's.

        `key` is the table's primary key now. Every other column stays as it is.
        """
        raise NotImplementedError

    def has_table(self, table: str) -> bool:
        """Whether `table` exists: a materialized table is created with its first messages."""
        return self._fetchone(self.TABLE_COLUMNS, (table,)) is not None

    def read_table(self, table: str, schema: TableSchema) -> dict[Key, dict[str, JsonValue]]:
        """A materialized table's rows by primary key, values in their JSON form.

        Exact for string, long, double, boolean, bytes and json columns and for the text of
        decimal and timestamp keys; other decimals, timestamps and dates come back as the
        database renders them.
        """
        name = self._identifier
        rows = self._fetchall(f"SELECT {', '.join(map(name, schema.names))} FROM {name(table)}", ())
        found: dict[Key, dict[str, JsonValue]] = {}
        for row in rows:
            held = dict(zip(schema.names, row, strict=True))
            of = _row_name(table, [held[k] for k in schema.primary_key])
            values = {c.name: _json_value(c, held[c.name], of=of) for c in schema.columns}
            found[tuple(cast(Scalar, values[k]) for k in schema.primary_key)] = values
        return found

    def _ensure_table(
        self,
        conn: SqlConnection,
        table: str,
        schema: TableSchema,
        retired: Collection[str],
        former_types: Mapping[str, Sequence[ColumnType]],
    ) -> bool:
        """Create the table from `schema`, or make it follow `schema` (one read of its columns).

        Returns whether it created the table, which the sink refuses where earlier batches
        stored messages for it (see `SqlChangeSink.apply_batch`).

        Only columns ordo made from a version change: a retired column is dropped, and a column
        is retyped when the table holds it in the SQL type of one of its `former_types` (newest
        first: SQLite stores several logical types as one SQL type) or of its type as a key or
        value column when it becomes one or the other (`_retyped`), so a column added or altered
        by hand stays as it is.
        """
        found = [
            _TableColumn(str(column), str(sql_type), int(position or 0))
            for column, sql_type, position in conn.execute(
                self._sql(self.TABLE_COLUMNS), (table,)
            ).fetchall()
        ]
        if not found:
            self._create(conn, table, schema)
            return True
        existing = {c.name for c in found}
        name = self._identifier
        for column in schema.columns:  # first: a new key may name a column the version adds
            if column.name not in existing:
                conn.execute(
                    f"ALTER TABLE {name(table)} ADD COLUMN "
                    f"{name(column.name)} {self._sql_type(column, schema)}",
                    (),
                )
        retyped = self._retyped(found, schema, former_types)
        keyed = sorted((c for c in found if c.key_position), key=attrgetter("key_position"))
        key = tuple(c.name for c in keyed)
        if key != schema.primary_key or not schema.key_names.isdisjoint(retyped):
            self._rekey(conn, table, key, schema, retyped)
        elif retyped:
            self._retype(conn, table, schema, retyped)
        for dropped in sorted(existing.intersection(retired) - set(schema.names)):
            conn.execute(f"ALTER TABLE {name(table)} DROP COLUMN {name(dropped)}", ())
        return False

    def _create(self, conn: SqlConnection, table: str, schema: TableSchema) -> None:
        name = self._identifier
        definitions = [
            f"{name(c.name)} {self._sql_type(c, schema)}"
            + (" NOT NULL" if c.name in schema.key_names else "")
            for c in schema.columns
        ]
        conn.execute(
            f"CREATE TABLE {name(table)} ({', '.join(definitions)}, "
            f"PRIMARY KEY ({', '.join(map(name, schema.primary_key))}))",
            (),
        )

    def _retyped(
        self,
        found: Sequence[_TableColumn],
        schema: TableSchema,
        former_types: Mapping[str, Sequence[ColumnType]],
    ) -> dict[str, Column]:
        """The columns of `schema` the table holds in another SQL type than `_sql_type`'s.

        Each with its logical type there: a former type (a retype), its own as a value column
        when it becomes a key column or is a key column an older ordo stored so (see `_rekey`),
        or its own as a key's text (`TEXT_KEY_TYPES`) when it leaves the table's key. Any other
        SQL type was given by hand, and stays.
        """
        text = self.COLUMN_TYPES[ColumnType.STRING].casefold()
        held = {c.name: c for c in found}
        retyped: dict[str, Column] = {}
        for column in schema.columns:
            found_column = held.get(column.name)
            if found_column is None:
                continue
            sql_type = found_column.sql_type.casefold()
            if sql_type == self._sql_type(column, schema).casefold():
                continue
            for former in (*former_types.get(column.name, ()), column.type):
                if sql_type == self.COLUMN_TYPES[former].casefold() or (
                    found_column.key_position and former in TEXT_KEY_TYPES and sql_type == text
                ):
                    retyped[column.name] = Column(name=column.name, type=former)
                    break
        return retyped

    def _rekey(
        self,
        conn: SqlConnection,
        table: str,
        key: tuple[str, ...],
        schema: TableSchema,
        retyped: Mapping[str, Column],
    ) -> None:
        """Give an empty table `schema`'s primary key; refuse a table with rows.

        After an accepted key change (or a key column's retype, which changes the key values)
        the materializer's fold state and every message it emits are keyed by the new key, so
        no later message names a row written under the old one: re-keying such rows, even where
        their values would allow it, would leave rows that no update or delete reaches, and a
        row's first message under its new key (from empty state) would not carry what the
        table holds. So a table with rows is refused (MaterializedKeyChangeError; the batch
        changes nothing) and the operator materializes the table afresh from a change log that
        starts with the new key. An empty table holds nothing of the old key: it takes the new.

        So does a key column that an older ordo stored as a value (NUMERIC, TIMESTAMP WITH TIME
        ZONE) rather than as its text (`TEXT_KEY_TYPES`): such a table may hold one row for
        keys the fold tells apart, and a value's text is not the key it was written with
        (`2026-01-01 00:00:00+00` for `2026-01-01T00:00:00`), so its rows are refused alike.
        """
        if conn.execute(f"SELECT 1 FROM {self._identifier(table)} LIMIT 1", ()).fetchone():
            raise MaterializedKeyChangeError(
                table=table,
                key=key,
                new_key=schema.primary_key,
                retyped=tuple(
                    _key_retype(n, old.type, schema.by_name[n].type)
                    for n, old in retyped.items()
                    if n in schema.key_names
                    and (n in key or old.type is not schema.by_name[n].type)
                ),
            )
        self._retable(conn, table, key=key, schema=schema, retyped=retyped)

    def _retype(
        self, conn: SqlConnection, table: str, schema: TableSchema, retyped: Mapping[str, Column]
    ) -> None:
        """Give the `retyped` (value) columns their types in `schema`, converting each row's value.

        The values are converted in their message form (`retyped_value`), so alike on every
        backend (a database's casts are not: SQLite turns 'abc' into 0): all are converted
        before the table changes, and one the new type cannot hold is MaterializedRetypeError.
        Then the columns change type (their values null) and the converted values are written
        back by key. It reads and rewrites every row holding a value in one of the columns.
        """
        name, key = self._identifier, schema.primary_key
        columns = list(retyped)
        rows = conn.execute(
            f"SELECT {', '.join(map(name, [*key, *columns]))} FROM {name(table)} "
            f"WHERE {' OR '.join(f'{name(c)} IS NOT NULL' for c in columns)}",
            (),
        ).fetchall()
        updates = [self._converted(table, schema, retyped, row) for row in rows]
        self._retable(conn, table, key=key, schema=schema, retyped=retyped)
        if updates:
            p = self.PARAM
            self._executemany(
                conn,
                f"UPDATE {name(table)} SET {', '.join(f'{name(c)} = {p}' for c in columns)} "
                f"WHERE {' AND '.join(f'{name(k)} = {p}' for k in key)}",
                updates,
            )

    def _converted(
        self,
        table: str,
        schema: TableSchema,
        retyped: Mapping[str, Column],
        row: Sequence[Any],
    ) -> list[object]:
        """An UPDATE's parameters for a row `_retype` read: the converted values, then the key."""
        width = len(schema.primary_key)
        of = _row_name(table, row[:width])
        key = [
            _json_value(schema.by_name[k], v, of=of)
            for k, v in zip(schema.primary_key, row[:width], strict=True)
        ]
        values: list[object] = []
        for (column, old), held in zip(retyped.items(), row[width:], strict=True):
            new, value = schema.by_name[column], _json_value(old, held, of=of)
            try:
                converted = retyped_value(value, new.type)
            except ValueError as exc:
                raise MaterializedRetypeError(
                    table=table,
                    column=column,
                    old=old.type.value,
                    new=new.type.value,
                    key=tuple(key),
                    value=value,
                ) from exc
            values.append(self._sql_value(new, converted))
        return [
            *values,
            *(
                self._key_value(schema.by_name[k], v)
                for k, v in zip(schema.primary_key, key, strict=True)
            ),
        ]

    def _identifier(self, name: str) -> str:
        """`name` quoted for statements that also carry parameters."""
        return quote_identifier(name)

    def _sql_type(self, column: Column, schema: TableSchema) -> str:
        """The SQL type of `column` in a table of `schema`: a `TEXT_KEY_TYPES` key's is text."""
        if column.type in TEXT_KEY_TYPES and column.name in schema.key_names:
            return self.COLUMN_TYPES[ColumnType.STRING]
        return self.COLUMN_TYPES[column.type]

    def _key_value(self, column: Column, value: JsonValue) -> object:
        """A key column's message value as the driver takes it: as text where `_sql_type` is."""
        return _converted_value(self._key_converter(column), value)

    def _sql_value(self, column: Column, value: JsonValue) -> object:
        """A message value as this backend's driver takes it for the column's SQL type."""
        return _converted_value(self._value_converter(column), value)

    def _key_converter(self, column: Column) -> ValueConverter | None:
        """`_value_converter` for a key column: text where `_sql_type` is."""
        return str if column.type in TEXT_KEY_TYPES else self._value_converter(column)

    def _value_converter(self, column: Column) -> ValueConverter | None:
        """How this backend's driver takes the column's non-null message values; None: as they are.

        Chosen once per column, so a batch's rows call a function only for the values that need
        one.
        """
        match column.type:
            case ColumnType.JSON:
                return compact_json
            case ColumnType.BYTES:
                return _bytes_value
            case ColumnType.DECIMAL:
                return str
            case ColumnType.DOUBLE:
                return _double_value
            case _:
                return None
