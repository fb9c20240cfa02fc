"""Schemas: conformance, the compatibility rule, and the JSON document."""

from __future__ import annotations

import pytest

from ordo.cdc import Column, ColumnType, TableSchema
from ordo.errors import InvalidSchemaError, NoPrimaryKeyError

BASE = TableSchema(
    table="t",
    columns=(
        Column(name="id", type=ColumnType.LONG, nullable=False),
        Column(name="price", type=ColumnType.DECIMAL),
        Column(name="seen", type=ColumnType.TIMESTAMP),
    ),
    partition_key=("id",),
)


def _with(*columns: Column) -> TableSchema:
    return TableSchema(table="t", columns=columns, partition_key=("id",))


def test_adding_a_nullable_column_is_compatible_and_anything_else_is_not() -> None:
    added = _with(*BASE.columns, Column(name="note", type=ColumnType.STRING))
    assert BASE.incompatibilities(added) == []
    assert BASE.incompatibilities(_with(*BASE.columns[:2])) == ["column 'seen' dropped"]
    retyped = _with(BASE.columns[0], Column(name="price", type=ColumnType.STRING), BASE.columns[2])
    assert BASE.incompatibilities(retyped) == ["column 'price' retyped decimal -> string"]
    required = _with(*BASE.columns, Column(name="n", type=ColumnType.LONG, nullable=False))
    assert BASE.incompatibilities(required) == ["column 'n' added as NOT NULL"]


def test_rows_are_checked_against_types_and_nullability() -> None:
    good = {"id": 1, "price": "9.99", "seen": "2026-11-21T10:00:00+00:00"}
    assert BASE.problems(good) == []
    assert BASE.problems({"id": None, "price": "abc", "seen": 3, "x": 1}) == [
        "unknown column 'x'",
        "column 'id' is null",
        "column 'price': 'abc' is not a decimal",
        "column 'seen': 3 is not a timestamp",
    ]


def test_the_json_document_round_trips_and_fingerprints_are_stable() -> None:
    assert TableSchema.from_json(BASE.to_json()) == BASE
    assert TableSchema.from_json(BASE.to_json()).fingerprint == BASE.fingerprint
    with pytest.raises(InvalidSchemaError):
        TableSchema.from_json('{"table": "t"}')


def test_a_table_without_primary_key_is_rejected_with_advice() -> None:
    with pytest.raises(NoPrimaryKeyError, match="PRIMARY KEY"):
        TableSchema(table="t", columns=BASE.columns, partition_key=())
