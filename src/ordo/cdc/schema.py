"""Table schemas: the columns and keys a change message must conform to, and how versions evolve.

Every message names the schema version it conforms to (seed 003: data cannot be published without
a schema). A new version is compatible when every reader of the old one can read it: adding a
nullable column is fine; dropping, retyping, adding a NOT NULL column or changing the key is not,
and stops the pipeline until an operator accepts the new version.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import blake2b

from ordo.cdc.column_type import ColumnType, misfit
from ordo.cdc.mutation import JsonValue
from ordo.documents import decode_json, reject_unknown_keys
from ordo.errors import InvalidSchemaError, JsonKeyColumnError, NoPrimaryKeyError
from ordo.journal.validation import check_storable

_NOT_JSON = " (not JSON)"
_NOT_UTF8 = ("CAST(x'", "' AS TEXT)")
INFINITIES = ("Infinity", "-Infinity")
"""The strings a capture records an infinite REAL as (JSON has no infinities): valid JSON that
no numeric column accepts; in a string column, where they would fit, under `not_json_cell`."""


def not_json_cell(column: str) -> str:
    """The cell name a capture records a value under when JSON cannot carry it as the column's.

    Who calls it: the SQLite capture's triggers, for text an application wrote to a JSON column
    that does not parse, for a BLOB in a column of any type but bytes (SQLite lets any column
    hold one; json_object() refuses it), for an infinite REAL in a string column and for text
    that is not UTF-8 (`not_utf8_text`, set aside by `ordo.storage.sqlite.change_text`); both
    captures for JSON holding a number beyond a double's range (`1e999`, which Python reads as
    an infinity and no reader after the change log can read) or one a double would round
    (`0.10000000000000000001`, read as 0.1). The change must still be
    captured (a trigger that failed would fail the application's write; a capture that refused
    it would stop) and must not be folded, but no value under the column's own name could say
    so: a JSON column accepts every JSON value, a text column every string. Under this name,
    which is no column, the value (kept as a string) fails every schema, and `not_json_column`
    lets the materializer's reason name the column.
    """
    return column + _NOT_JSON


def not_json_column(cell: str, schema: TableSchema) -> Column | None:
    """The column of `schema` whose `not_json_cell` is `cell`; None for any other name."""
    return schema.by_name.get(cell.removesuffix(_NOT_JSON)) if cell.endswith(_NOT_JSON) else None


def is_not_json_cell(cell: str) -> bool:
    """Whether `cell` is a name `not_json_cell` gives: its value was set aside already."""
    return cell.endswith(_NOT_JSON)


def not_utf8_text(data: bytes) -> str:
    """How a capture records text that is not UTF-8 (SQLite stores any bytes as text).

    Under `not_json_cell`, as SQL that makes those very bytes: no string can hold them, and a
    BLOB's `x'<hex>'` would name another value.
    """
    return f"{_NOT_UTF8[0]}{data.hex()}{_NOT_UTF8[1]}"


def is_not_utf8_text(value: JsonValue) -> bool:
    """Whether `value` is `not_utf8_text` of bytes that are not UTF-8 (not merely text like it)."""
    opening, closing = _NOT_UTF8
    if not (isinstance(value, str) and value.startswith(opening) and value.endswith(closing)):
        return False
    try:
        bytes.fromhex(value.removeprefix(opening).removesuffix(closing)).decode()
    except UnicodeDecodeError:
        return True
    except ValueError:  # not hex: text that only looks like it
        return False
    return False


_KEYED = "CDC keys its change log and rows by it"


def require_captured_key(table: str, key: Sequence[str], *, how: str) -> None:
    """NoPrimaryKeyError for a captured table without a primary key; `how` says how to add one.

    A captured table's schema comes from the source's catalog, so the only remedy is in the
    source database (a declared schema names its key columns instead: see TableSchema).
    """
    if not key:
        msg = f"table {table!r} has no primary key: {_KEYED}; {how} to capture it"
        raise NoPrimaryKeyError(msg)


def require_scalar_key(schema: TableSchema, *, how: str) -> None:
    """JsonKeyColumnError for a captured table keyed by a JSON column; `how` says what instead.

    Keys are scalars (`Key`) compared and hashed as JSON text: routing, the fold's state and
    the materialized table's key. A JSON key's value is not such a text: SQLite's json() wrote
    the two rows `{"a": 1}` and `{"a":1}` as one key, so the materialized table held one row
    for both (and deleting either deleted it), and PostgreSQL's jsonb, which tells numbers
    apart beyond a double's precision, keyed rows a Python float cannot, while an object or
    array key stopped the capture at its first change. Refused before anything is installed.
    """
    by_name = schema.by_name
    for name in schema.primary_key:
        if by_name[name].type is ColumnType.JSON:
            msg = (
                f"table {schema.table!r}: key column {name!r} holds JSON, which cannot key "
                "captured rows (CDC keys rows by the JSON text of scalar key values: JSON the "
                "source holds as two rows could be one key, and an object or array is no "
                f"scalar); {how} to capture it"
            )
            raise JsonKeyColumnError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One column: its name, logical type and whether it may be null."""

    name: str
    type: ColumnType
    nullable: bool = True

    def __post_init__(self) -> None:
        """InvalidSchemaError for a field of the wrong type, before any registry stores it.

        A name of 1 or a nullable of "no" was registered, and every later lookup of the table
        then failed reading it back; a type given as text was an AttributeError.
        """
        _name(self.name, "a column name")
        if not isinstance(self.type, ColumnType):
            msg = f"column {self.name!r}: type {self.type!r} is not a ColumnType"
            raise InvalidSchemaError(msg)
        if not isinstance(self.nullable, bool):
            msg = f"column {self.name!r}: nullable must be True or False, got {self.nullable!r}"
            raise InvalidSchemaError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSchema:
    """The columns of a table in order, and which of them form the partition and clustering keys."""

    table: str
    columns: tuple[Column, ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...] = ()
    by_name: Mapping[str, Column] = field(init=False, repr=False, compare=False)
    """The columns by name. Derived, as are `names` and `key_names`: the materializer looks
    them up for every cell it checks and every row it builds."""
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    key_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _name(self.table, "a schema's table name")
        if not isinstance(self.columns, tuple) or not all(
            isinstance(column, Column) for column in self.columns
        ):
            msg = f"table {self.table!r}: columns must be a tuple of Columns, got {self.columns!r}"
            raise InvalidSchemaError(msg)
        for key in (self.partition_key, self.clustering_key):
            if not isinstance(key, tuple) or not all(isinstance(name, str) for name in key):
                msg = f"table {self.table!r}: a key must be a tuple of column names, got {key!r}"
                raise InvalidSchemaError(msg)
        names = [column.name for column in self.columns]
        object.__setattr__(self, "by_name", {column.name: column for column in self.columns})
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "key_names", frozenset(self.primary_key))
        if len(set(names)) != len(names):
            msg = f"table {self.table!r} repeats a column name: {names}"
            raise InvalidSchemaError(msg)
        if not self.partition_key:  # a captured table is refused earlier (`require_captured_key`)
            msg = (
                f"table {self.table!r} has no primary key: {_KEYED}; name its key columns in the "
                "schema's 'partition_key'"
            )
            raise NoPrimaryKeyError(msg)
        repeated = sorted({k for k in self.primary_key if self.primary_key.count(k) > 1})
        if repeated:
            msg = f"table {self.table!r}: key columns {repeated} appear more than once in the key"
            raise InvalidSchemaError(msg)
        unknown = [k for k in self.primary_key if k not in names]
        if unknown:
            msg = f"table {self.table!r}: key columns {unknown} are not columns"
            raise InvalidSchemaError(msg)

    @property
    def primary_key(self) -> tuple[str, ...]:
        """Partition key columns followed by clustering key columns."""
        return self.partition_key + self.clustering_key

    def is_keyed_as(self, other: TableSchema) -> bool:
        """Whether `other` keys rows as this schema does: the same key columns, typed alike.

        The same partition and clustering key columns, in order: a message's key is the values
        of its version's key columns in that order, and the fold keeps a row's state under its
        partition key. A version keyed otherwise (other columns, another order or split, or a
        key column retyped, which changes the key values) names rows that a table keyed by this
        schema does not have.
        """
        return (
            self.partition_key == other.partition_key
            and self.clustering_key == other.clustering_key
            and all(self.by_name[k].type is other.by_name[k].type for k in self.primary_key)
        )

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """The columns that are not part of the primary key."""
        return tuple(column for column in self.columns if column.name not in self.key_names)

    def problems(self, row: Mapping[str, JsonValue]) -> list[str]:
        """Why `row` (a full row: every column) does not conform to this schema; [] if it does."""
        found: list[str] = []
        by_name = self.by_name
        found.extend(f"unknown column {name!r}" for name in row if name not in by_name)
        for column in self.columns:
            value = row.get(column.name)
            if value is None:
                if not column.nullable or column.name in self.primary_key:
                    found.append(f"column {column.name!r} is null")
            elif (why := misfit(column.type, value)) is not None:
                found.append(f"column {column.name!r}: {value!r} {why}")
        return found

    def incompatibilities(self, newer: TableSchema) -> list[str]:
        """Why readers of this version could not read `newer`; [] when the change is compatible."""
        found: list[str] = []
        if newer.primary_key != self.primary_key:
            found.append(f"primary key changed from {self.primary_key} to {newer.primary_key}")
        elif newer.partition_key != self.partition_key:
            # The same key columns split otherwise: the fold keeps a row's state under its
            # partition key, so every row's next message would start from empty state.
            found.append(
                f"partition key changed from {self.partition_key} to {newer.partition_key}"
            )
        mine = {column.name: column for column in self.columns}
        theirs = {column.name: column for column in newer.columns}
        found.extend(f"column {name!r} dropped" for name in mine if name not in theirs)
        for name, column in theirs.items():
            old = mine.get(name)
            if old is None:
                if not column.nullable:
                    found.append(f"column {name!r} added as NOT NULL")
            elif old.type != column.type:
                found.append(f"column {name!r} retyped {old.type.value} -> {column.type.value}")
            elif old.nullable and not column.nullable:
                found.append(f"column {name!r} became NOT NULL")
        return found

    def to_json(self) -> str:
        """The canonical JSON document of this schema (what the registry stores)."""
        document = {
            "table": self.table,
            "columns": [
                {"name": c.name, "type": c.type.value, "nullable": c.nullable} for c in self.columns
            ],
            "partition_key": list(self.partition_key),
            "clustering_key": list(self.clustering_key),
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":"))

    @property
    def fingerprint(self) -> str:
        """A short hash of the canonical JSON: equal schemas register once."""
        return blake2b(self.to_json().encode("utf-8"), digest_size=8).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> TableSchema:
        """Read a schema document written by `to_json` (or by hand); InvalidSchemaError if bad.

        Hand-written documents are checked strictly (no unknown keys, no value coerced to another
        JSON type) because what is accepted becomes a registered version that stays.
        """
        try:
            document = decode_json(text)
        except ValueError as exc:  # an integer longer than Python reads too
            msg = f"not a JSON document: {exc}"
            raise InvalidSchemaError(msg) from exc
        fields = _object(
            document,
            "the schema document",
            ("table", "columns", "partition_key"),
            ("clustering_key",),
        )
        columns = fields["columns"]
        if not isinstance(columns, list) or not columns:
            msg = (
                f"'columns' must be a non-empty list of column objects, got {reprlib.repr(columns)}"
            )
            raise InvalidSchemaError(msg)
        return cls(
            table=_name(fields["table"], "'table'"),
            columns=tuple(_column(column, number) for number, column in enumerate(columns, 1)),
            partition_key=_names(fields, "partition_key"),
            clustering_key=_names(fields, "clustering_key"),
        )


def _object(
    value: object, what: str, required: Sequence[str], optional: Sequence[str] = ()
) -> Mapping[str, object]:
    """`value` as a JSON object with every `required` key and no key but those and `optional`."""
    if not isinstance(value, dict):
        msg = f"{what} must be a JSON object, got {reprlib.repr(value)}"
        raise InvalidSchemaError(msg)
    reject_unknown_keys(value, (*required, *optional), where=what, error=InvalidSchemaError)
    missing = [key for key in required if key not in value]
    if missing:
        keys = ", ".join(map(repr, missing))
        msg = f"{what} is missing key{'s' if len(missing) > 1 else ''} {keys}"
        raise InvalidSchemaError(msg)
    return value


def _name(value: object, what: str) -> str:
    """A table or column name: a non-empty string, never a number or list turned into text.

    A lone surrogate (half of a UTF-16 pair, left by a JSON escape) is refused too:
    registering the schema failed with UnicodeEncodeError from the store, and no change log or
    sink can name it.
    """
    if not isinstance(value, str) or not value:
        msg = f"{what} must be a non-empty string, got {reprlib.repr(value)}"
        raise InvalidSchemaError(msg)
    if "\x00" in value:  # no database takes it; the fold's re-added cells are named with it
        msg = f"{what} must not contain a NUL character, got {reprlib.repr(value)}"
        raise InvalidSchemaError(msg)
    check_storable(what, value, InvalidSchemaError)
    return value


def _names(fields: Mapping[str, object], key: str) -> tuple[str, ...]:
    """A key's column names (absent: none)."""
    value = fields.get(key, [])
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        msg = f"{key!r} must be a list of column names (strings), got {reprlib.repr(value)}"
        raise InvalidSchemaError(msg)
    return tuple(value)


def _column(value: object, number: int) -> Column:
    """One entry of `columns`; errors call it by its name when it has one, else by its number."""
    name = value.get("name") if isinstance(value, dict) else None
    what = f"column {name!r}" if isinstance(name, str) and name else f"column {number}"
    fields = _object(value, what, ("name", "type"), ("nullable",))
    type_name = fields["type"]
    if not isinstance(type_name, str) or type_name not in {t.value for t in ColumnType}:
        msg = f"{what}: type {reprlib.repr(type_name)} is not one of {', '.join(ColumnType)}"
        raise InvalidSchemaError(msg)
    nullable = fields.get("nullable", True)
    if not isinstance(nullable, bool):
        msg = f"{what}: 'nullable' must be true or false, got {reprlib.repr(nullable)}"
        raise InvalidSchemaError(msg)
    return Column(
        name=_name(fields["name"], f"{what}: 'name'"),
        type=ColumnType(type_name),
        nullable=nullable,
    )


def full_row(
    schema: TableSchema, key: Sequence[JsonValue], values: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    """Every column of the schema, in order: key values, then values, None where missing."""
    keys: dict[str, JsonValue] = dict(zip(schema.primary_key, key, strict=True))
    return {name: keys[name] if name in keys else values.get(name) for name in schema.names}
