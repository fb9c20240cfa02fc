"""Table schemas: the columns and keys a change message must conform to, and how versions evolve.

Every message names the schema version it conforms to (seed 003: data cannot be published without
a schema). A new version is compatible when every reader of the old one can read it: adding a
nullable column is fine; dropping, retyping, adding a NOT NULL column or changing the key is not,
and stops the pipeline until an operator accepts the new version.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from hashlib import blake2b

from ordo.cdc.mutation import JsonValue
from ordo.errors import InvalidSchemaError, NoPrimaryKeyError


class ColumnType(StrEnum):
    """The logical column types messages carry (values are JSON; the type says how to read them)."""

    STRING = "string"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    DECIMAL = "decimal"
    """A decimal number as a string, so no precision is lost."""
    TIMESTAMP = "timestamp"
    """An ISO 8601 timestamp string (with or without a zone)."""
    DATE = "date"
    """An ISO 8601 date string."""
    BYTES = "bytes"
    """Hex-encoded bytes (PostgreSQL's `\\x…` form is accepted)."""
    JSON = "json"
    """Any JSON value."""


def _is_decimal(value: JsonValue) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    if not isinstance(value, str):
        return False
    try:
        Decimal(value)
    except InvalidOperation:
        return False
    return True


def _is_iso(value: JsonValue, parse: type[dt.datetime] | type[dt.date]) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parse.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_hex(value: JsonValue) -> bool:
    if not isinstance(value, str):
        return False
    try:
        bytes.fromhex(value.removeprefix("\\x"))
    except ValueError:
        return False
    return True


def fits(column_type: ColumnType, value: JsonValue) -> bool:
    """Whether a non-null `value` is a valid value of `column_type`."""
    match column_type:
        case ColumnType.STRING:
            return isinstance(value, str)
        case ColumnType.LONG:
            return isinstance(value, int) and not isinstance(value, bool)
        case ColumnType.DOUBLE:
            return isinstance(value, int | float) and not isinstance(value, bool)
        case ColumnType.BOOLEAN:
            return isinstance(value, bool)
        case ColumnType.DECIMAL:
            return _is_decimal(value)
        case ColumnType.TIMESTAMP:
            return _is_iso(value, dt.datetime)
        case ColumnType.DATE:
            return _is_iso(value, dt.date)
        case ColumnType.BYTES:
            return _is_hex(value)
        case ColumnType.JSON:
            return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One column: its name, logical type and whether it may be null."""

    name: str
    type: ColumnType
    nullable: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSchema:
    """The columns of a table in order, and which of them form the partition and clustering keys."""

    table: str
    columns: tuple[Column, ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = [column.name for column in self.columns]
        if not self.table:
            msg = "a schema needs a table name"
            raise InvalidSchemaError(msg)
        if len(set(names)) != len(names):
            msg = f"table {self.table!r} repeats a column name: {names}"
            raise InvalidSchemaError(msg)
        if not self.partition_key:
            msg = (
                f"table {self.table!r} has no primary key: CDC needs one to key its change log "
                "and rows (add a PRIMARY KEY, or declare the key columns in the schema)"
            )
            raise NoPrimaryKeyError(msg)
        unknown = [k for k in self.primary_key if k not in names]
        if unknown:
            msg = f"table {self.table!r}: key columns {unknown} are not columns"
            raise InvalidSchemaError(msg)

    @property
    def primary_key(self) -> tuple[str, ...]:
        """Partition key columns followed by clustering key columns."""
        return self.partition_key + self.clustering_key

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """The columns that are not part of the primary key."""
        keys = set(self.primary_key)
        return tuple(column for column in self.columns if column.name not in keys)

    def problems(self, row: Mapping[str, JsonValue]) -> list[str]:
        """Why `row` (a full row: every column) does not conform to this schema; [] if it does."""
        found: list[str] = []
        by_name = {column.name: column for column in self.columns}
        found.extend(f"unknown column {name!r}" for name in row if name not in by_name)
        for column in self.columns:
            value = row.get(column.name)
            if value is None:
                if not column.nullable or column.name in self.primary_key:
                    found.append(f"column {column.name!r} is null")
            elif not fits(column.type, value):
                found.append(f"column {column.name!r}: {value!r} is not a {column.type.value}")
        return found

    def incompatibilities(self, newer: TableSchema) -> list[str]:
        """Why readers of this version could not read `newer`; [] when the change is compatible."""
        found: list[str] = []
        if newer.primary_key != self.primary_key:
            found.append(f"primary key changed from {self.primary_key} to {newer.primary_key}")
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
        """Read a schema document written by `to_json` (or by hand); InvalidSchemaError if bad."""
        try:
            document = json.loads(text)
            columns = tuple(
                Column(
                    name=str(c["name"]),
                    type=ColumnType(c["type"]),
                    nullable=bool(c.get("nullable", True)),
                )
                for c in document["columns"]
            )
            return cls(
                table=str(document["table"]),
                columns=columns,
                partition_key=tuple(str(k) for k in document["partition_key"]),
                clustering_key=tuple(str(k) for k in document.get("clustering_key", ())),
            )
        except (ValueError, KeyError, TypeError) as exc:
            msg = f"not a schema document: {exc}"
            raise InvalidSchemaError(msg) from exc


def full_row(
    schema: TableSchema, key: Sequence[JsonValue], values: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    """Every column of the schema, in order: key values, then values, None where missing."""
    row: dict[str, JsonValue] = dict(zip(schema.primary_key, key, strict=True))
    for column in schema.value_columns:
        row[column.name] = values.get(column.name)
    return {column.name: row[column.name] for column in schema.columns}
