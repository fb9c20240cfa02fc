"""Captured PostgreSQL tables: their catalog schema as a TableSchema, and values as logical types.

The capture (`change_source.py`) reads each table's columns and primary key from pg_catalog, so
the schema registry learns what the database says rather than what a user typed. The same module
turns a column's text (a snapshot read) or wal2json value into the JSON value of its logical
type, so a snapshot row and a captured change of the same row carry identical values.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import psycopg

from ordo.cdc.column_type import ColumnType
from ordo.cdc.json_text import parse_application_json
from ordo.cdc.mutation import JsonValue
from ordo.cdc.schema import Column, TableSchema, require_captured_key, require_scalar_key
from ordo.errors import CaptureError, UnmappableColumnTypeError
from ordo.storage.captured_tables import refuse_names_of_one_table
from ordo.storage.postgres.table_name import join_table_name

Connection = psycopg.Connection[tuple[object, ...]]

COLUMN_TYPES: dict[str, ColumnType] = {
    **dict.fromkeys(("int2", "int4", "int8"), ColumnType.LONG),
    **dict.fromkeys(("float4", "float8"), ColumnType.DOUBLE),
    "numeric": ColumnType.DECIMAL,
    **dict.fromkeys(("text", "varchar", "bpchar", "uuid", "citext", "name"), ColumnType.STRING),
    "bool": ColumnType.BOOLEAN,
    **dict.fromkeys(("timestamp", "timestamptz"), ColumnType.TIMESTAMP),
    "date": ColumnType.DATE,
    "bytea": ColumnType.BYTES,
    **dict.fromkeys(("json", "jsonb"), ColumnType.JSON),
}
"""PostgreSQL type names (pg_type.typname; serials are int4/int8) and their logical types.

Every enum type is a string too (`logical_type`), and a domain is its base type's.
"""
_BASE, _ENUM = "b", "e"
"""pg_type.typtype of a base type (every COLUMN_TYPES type, citext too) and of an enum."""

# A type's base type through any depth of domains (a domain over a domain over text is text):
# its name, the key of COLUMN_TYPES, and its kind (pg_type.typtype, 'e' for an enum). Formatted
# with the expression of the type's oid: a column's, or a parameter's.
_BASE_TYPE = (
    "WITH RECURSIVE chain AS ("
    "SELECT typname, typtype, typbasetype FROM pg_type WHERE oid = {oid} "
    "UNION ALL SELECT t.typname, t.typtype, t.typbasetype FROM chain "
    "JOIN pg_type t ON t.oid = chain.typbasetype WHERE chain.typtype = 'd'"
    ") SELECT typname, typtype FROM chain WHERE typtype <> 'd'"
)
# Columns in ordinal order with the base type their type stands for.
_COLUMNS = (
    "SELECT a.attname, a.attnotnull, base.typname, base.typtype, "
    "format_type(a.atttypid, a.atttypmod) "
    f"FROM pg_attribute a CROSS JOIN LATERAL ({_BASE_TYPE.format(oid='a.atttypid')}) base "
    "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)
_TYPE = _BASE_TYPE.format(oid="%s")
_PRIMARY_KEY = (
    "SELECT a.attname FROM pg_index i "
    "CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) "
    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
    "WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.ord"
)
# The table's oid, its name as SQL spells it, whether it is UNLOGGED and its replica identity.
_RELATION = (
    "SELECT c.oid, format('%%I.%%I', n.nspname, c.relname), c.relpersistence, c.relreplident "
    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'r'"
)
# The columns of the index REPLICA IDENTITY USING INDEX names (none once it was dropped).
_IDENTITY_COLUMNS = (
    "SELECT a.attname FROM pg_index i "
    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[]) "
    "WHERE i.indrelid = %s AND i.indisreplident"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableRef:
    """A captured table: the name the user gave (messages use it) and where it lives."""

    given: str
    schema: str
    name: str

    @property
    def wal2json_filter(self) -> str:
        """The table as wal2json's `add-tables` option spells it (special characters escaped)."""
        return f"{_escape(self.schema)}.{_escape(self.name)}"


def _escape(identifier: str) -> str:
    return "".join(f"\\{char}" if char in "\\ ',.*" else char for char in identifier)


def resolve_tables(
    conn: Connection, names: Mapping[str, tuple[str | None, str]]
) -> tuple[TableRef, ...]:
    """The tables `names` maps given names to (`split_table_name`), in its order.

    A name without a schema is in the connection's current_schema().

    Raises:
        CaptureError: a name is unqualified and the search_path has no usable schema, or two
            names are one table (`orders` and `public.orders`): changes of it would be
            published under one name only, each row of it snapshotted under both.

    """
    row = conn.execute("SELECT current_schema()").fetchone()
    default = None if row is None or row[0] is None else str(row[0])
    refs: list[TableRef] = []
    for given, (schema, name) in names.items():
        if schema is None:
            if default is None:
                msg = (  # current_schema() skips schemas the role may not use
                    f"table {given!r} is unqualified but the search_path names no schema "
                    "that exists and that the role has USAGE on: qualify it as schema.table"
                )
                raise CaptureError(msg)
            schema = default
        refs.append(TableRef(given=given, schema=schema, name=name))
    refuse_names_of_one_table((ref.given, (ref.schema, ref.name)) for ref in refs)
    return tuple(refs)


def read_schema(conn: Connection, ref: TableRef) -> TableSchema:
    """The table's columns (ordinal order) and primary key (key order) as a TableSchema.

    Raises:
        NoPrimaryKeyError: the table has no primary key (checked before the types, as on
            SQLite, where adding one means creating the table again).
        CaptureError: the table does not exist, or logical decoding would not deliver all of
            its changes with their keys (see `_undecoded_changes`).
        UnmappableColumnTypeError: a column's type has no logical type (see COLUMN_TYPES).
        JsonKeyColumnError: a key column is jsonb (see `require_scalar_key`).

    """
    found = conn.execute(_RELATION, (ref.schema, ref.name)).fetchone()
    if found is None:
        msg = (
            f"captured table {ref.given!r} ({join_table_name(ref.schema, ref.name)}) does not "
            "exist or is not a plain table (wal2json names a partitioned table's changes by "
            "its partitions)"
        )
        raise CaptureError(msg)
    oid, qualified, persistence, identity = found
    key = tuple(str(name) for (name,) in conn.execute(_PRIMARY_KEY, (oid,)).fetchall())
    require_captured_key(
        ref.given, key, how=f"add one (ALTER TABLE {qualified} ADD PRIMARY KEY (...))"
    )
    if undecoded := _undecoded_changes(conn, oid, key, str(persistence), str(identity)):
        why, fix = undecoded
        msg = f"table {ref.given!r} {why}; run ALTER TABLE {qualified} {fix} to capture it"
        raise CaptureError(msg)
    columns = []
    for name, not_null, type_name, kind, declared in conn.execute(_COLUMNS, (oid,)).fetchall():
        column_type = logical_type(str(type_name), str(kind))
        if column_type is None:
            msg = (
                f"table {ref.given!r} column {name!r} has type {declared!r}, which has no "
                f"logical type (supported: {', '.join(sorted(COLUMN_TYPES))}, enums, and "
                "domains over them)"
            )
            raise UnmappableColumnTypeError(msg)
        columns.append(Column(name=str(name), type=column_type, nullable=not not_null))
    schema = TableSchema(table=ref.given, columns=tuple(columns), partition_key=key)
    require_scalar_key(schema, how="key the table by columns of other types")
    return schema


def logical_type(type_name: str, kind: str) -> ColumnType | None:
    """The logical type of a type that is no domain (pg_type's typname and typtype), or None.

    An enum's values are its labels, which the snapshot reads and wal2json writes as text: a
    string. A label added to the enum (ALTER TYPE ... ADD VALUE) is one more string, so the
    schema stays as it is. Equal enum values have one label, so an enum keys rows as text does.
    Only a base type is looked up by its name: a composite or range type a schema names `date`
    is no date.
    """
    if kind == _ENUM:
        return ColumnType.STRING
    return COLUMN_TYPES.get(type_name) if kind == _BASE else None


def read_logical_type(conn: Connection, type_oid: int) -> ColumnType | None:
    """The logical type of the type `type_oid` names (a domain's base type's), or None."""
    row = conn.execute(_TYPE, (type_oid,)).fetchone()
    return None if row is None else logical_type(str(row[0]), str(row[1]))


def _undecoded_changes(
    conn: Connection, oid: object, key: tuple[str, ...], persistence: str, identity: str
) -> tuple[str, str] | None:
    """Why logical decoding would not deliver every change of the table with its key, and the fix.

    An UNLOGGED table writes no WAL, so the slot never sees its changes; under REPLICA IDENTITY
    NOTHING wal2json skips its updates and deletes; an identity index without every key column
    logs a delete (or a key update) without the row's key. Captured, the first two lost those
    changes without a word (the snapshot had the rows, the materialized table kept them as
    they were), and the third stopped the capture for good at its first delete: the change
    stays logged without its key, whatever identity the table is given after. So they are
    refused before a slot is created, and again at every window (`read_schema`).
    """
    if persistence == "u":
        return "is UNLOGGED: its writes reach no WAL, so no change of it is decoded", "SET LOGGED"
    if identity == "n":
        why = "has REPLICA IDENTITY NOTHING: wal2json skips its updates and deletes"
        return why, "REPLICA IDENTITY DEFAULT"
    if identity == "i":
        logged = {str(name) for (name,) in conn.execute(_IDENTITY_COLUMNS, (oid,)).fetchall()}
        if missing := [name for name in key if name not in logged]:
            why = (
                f"has a REPLICA IDENTITY index without key columns {missing}: its deletes and "
                "key updates would not name their rows"
            )
            return why, "REPLICA IDENTITY DEFAULT"
    return None


def to_logical(column_type: ColumnType, raw: object) -> JsonValue:
    r"""A column value as its logical type's JSON value; `raw` is output text or wal2json JSON.

    NaN and infinities become None, as wal2json writes them (JSON has no such numbers). bytea is
    lowercase hex without PostgreSQL's `\x` (`key_value_form`'s bytes, as the SQLite capture
    and `ordo cdc ingest` write them): kept, a captured key was another fold key than the same
    row's ingested one, while a sink held both as one row.

    Raises:
        NumberOutOfRangeError: json or jsonb holding a number ordo cannot carry: `json` keeps
            `1e999` as written, which Python reads as an infinity (`jsonb` writes it out as an
            integer, carried exactly, unless longer than Python converts: 1e5000).
        ValueError: `raw` is not a value of the type (the caller names table and column).

    """
    if raw is None:
        return None
    text = str(raw)
    match column_type:
        case ColumnType.LONG:
            return int(text)
        case ColumnType.DOUBLE:
            number = float(text)
            return number if math.isfinite(number) else None
        case ColumnType.DECIMAL:
            return _decimal(text)
        case ColumnType.BOOLEAN:
            return raw if isinstance(raw, bool) else _boolean(text)
        case ColumnType.TIMESTAMP:
            return _timestamp(text)
        case ColumnType.BYTES:
            return bytes.fromhex(text.removeprefix("\\x")).hex()
        case ColumnType.JSON:
            parsed: JsonValue = parse_application_json(text)
            return parsed
        case ColumnType.STRING | ColumnType.DATE:
            return text


def _boolean(text: str) -> bool:
    """PostgreSQL's output text of a boolean ("t"; "true" from a cast to text)."""
    if text not in ("t", "f", "true", "false"):
        msg = f"not a boolean: {text!r}"
        raise ValueError(msg)
    return text in ("t", "true")


def _decimal(text: str) -> str | None:
    """The number's own text (no float rounding); NaN and infinities become None."""
    try:
        number = Decimal(text)
    except InvalidOperation as exc:
        msg = f"not a number: {text!r}"
        raise ValueError(msg) from exc
    return text if number.is_finite() else None


def _timestamp(text: str) -> str:
    """ISO 8601 (`T` separator, `+00:00` offsets); kept as is when Python cannot parse it.

    PostgreSQL's `infinity`, BC dates and years past 9999 have no Python datetime.
    """
    try:
        return dt.datetime.fromisoformat(text).isoformat()
    except ValueError:
        return text
