"""Schemas: conformance, the compatibility rule, and the JSON document."""

from __future__ import annotations

import math
import sys

import pytest

from ordo.cdc import Column, ColumnType, JsonValue, TableSchema
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


def test_moving_a_key_column_between_partition_and_clustering_key_is_incompatible() -> None:
    """It was accepted at once: the fold, which keeps state per partition key, then started
    every existing row afresh, and its next message wrote nulls over the row's other values."""
    wide = TableSchema(table="t", columns=BASE.columns, partition_key=("id", "seen"))
    split = TableSchema(
        table="t", columns=BASE.columns, partition_key=("id",), clustering_key=("seen",)
    )
    assert wide.incompatibilities(split) == ["partition key changed from ('id', 'seen') to ('id',)"]
    assert split.incompatibilities(wide) == ["partition key changed from ('id',) to ('id', 'seen')"]
    assert split.incompatibilities(split) == []


def test_a_schema_is_keyed_as_another_with_the_same_key_columns_split_and_types() -> None:
    """A value column's retype keeps the key; other key columns (even as many), another order
    or split between partition and clustering key, or a key column's retype do not."""
    seen = BASE.columns[2]
    price_as_text = Column(name="price", type=ColumnType.STRING)
    assert BASE.is_keyed_as(_with(BASE.columns[0], price_as_text, seen))
    by_seen = TableSchema(table="t", columns=BASE.columns, partition_key=("seen",))
    id_as_text = _with(Column(name="id", type=ColumnType.STRING), *BASE.columns[1:])
    assert not BASE.is_keyed_as(by_seen)
    assert not BASE.is_keyed_as(id_as_text)
    pair = TableSchema(table="t", columns=BASE.columns, partition_key=("id", "seen"))
    for other in (
        TableSchema(table="t", columns=BASE.columns, partition_key=("seen", "id")),
        TableSchema(
            table="t", columns=BASE.columns, partition_key=("id",), clustering_key=("seen",)
        ),
    ):
        assert not pair.is_keyed_as(other)
    assert pair.is_keyed_as(pair)


def test_rows_are_checked_against_types_and_nullability() -> None:
    good: dict[str, JsonValue] = {"id": 1, "price": "9.99", "seen": "2026-11-21T10:00:00+00:00"}
    assert BASE.problems(good) == []
    assert BASE.problems({"id": None, "price": "abc", "seen": 3, "x": 1}) == [
        "unknown column 'x'",
        "column 'id' is null",
        "column 'price': 'abc' is not a decimal",
        "column 'seen': 3 is not a timestamp",
    ]


def test_a_double_is_a_finite_float_or_an_integer_within_a_doubles_range() -> None:
    """An integer is held as its nearest double, up to the largest one (what rounds beyond it
    is out of range): 10**400 passed as a double, which no double column holds, and a sink
    failed the whole batch writing it."""
    schema = _with(BASE.columns[0], Column(name="n", type=ColumnType.DOUBLE))
    for fitting in (1, -(2**53) - 1, 2**1024 - 2**970 - 1, sys.float_info.max):
        assert schema.problems({"id": 1, "n": fitting}) == []
    for out_of_range in (2**1024 - 2**970, -(2**1024), 10**400):
        assert schema.problems({"id": 1, "n": out_of_range}) == [
            f"column 'n': {out_of_range!r} is not a double"
        ]


def test_a_long_is_an_integer_of_64_bits() -> None:
    """Every sink holds a long in 64 bits: 2**63 passed as a long, and a sink failed the whole
    batch writing it. A bool is no long, though Python's True is the integer 1."""
    schema = _with(BASE.columns[0], Column(name="n", type=ColumnType.LONG))
    for fitting in (0, 2**63 - 1, -(2**63)):
        assert schema.problems({"id": 1, "n": fitting}) == []
    for out_of_range in (2**63, -(2**63) - 1, 10**400, True, 1.0):
        assert schema.problems({"id": 1, "n": out_of_range}) == [
            f"column 'n': {out_of_range!r} is not a long"
        ]


@pytest.mark.parametrize(
    ("column_type", "value"),
    [
        (ColumnType.DOUBLE, math.inf),
        (ColumnType.DOUBLE, -math.inf),
        (ColumnType.DOUBLE, math.nan),
        (ColumnType.DOUBLE, "Infinity"),
        (ColumnType.DECIMAL, math.inf),
        (ColumnType.DECIMAL, "NaN"),
        (ColumnType.DECIMAL, "-Infinity"),
        (ColumnType.DECIMAL, "sNaN"),
    ],
)
def test_nan_and_infinities_are_no_value_of_a_numeric_column(
    column_type: ColumnType, value: float | str
) -> None:
    """JSON has none of them: a message carrying one would not be JSON, or not a number."""
    schema = _with(BASE.columns[0], Column(name="n", type=column_type))
    assert schema.problems({"id": 1, "n": value}) == [
        f"column 'n': {value!r} is not a {column_type.value}"
    ]
    assert schema.problems({"id": 1, "n": 1.5}) == []


@pytest.mark.parametrize(
    "text", ["1_000", " 1", "1 ", "\uff11", "0x10", "1e", ".", "", "+", "1.5.2", "\u0661"]
)
def test_a_decimal_is_ascii_digits_in_plain_or_exponent_notation(text: str) -> None:
    """Decimal() reads each of them ("1_000" as 1000): an SQLite NUMERIC key holding such text
    is a row apart from the number, and a PostgreSQL sink refused the text, failing the batch."""
    schema = _with(BASE.columns[0], Column(name="n", type=ColumnType.DECIMAL))
    assert schema.problems({"id": 1, "n": text}) == [f"column 'n': {text!r} is not a decimal"]
    for number in ("1", "-1.50", "+2.", ".5", "1.0e-20", "0.300000000000000044", "9E+3"):
        assert schema.problems({"id": 1, "n": number}) == []


@pytest.mark.parametrize(
    ("column_type", "text"),
    [
        (ColumnType.DATE, "2024-W01-1"),  # Python reads week dates, PostgreSQL refuses them
        (ColumnType.DATE, "2024W011"),
        (ColumnType.DATE, "20240101"),
        (ColumnType.DATE, "2024-01-01T00:00"),
        (ColumnType.DATE, "\uff12\uff10\uff12\uff14-01-01"),
        (ColumnType.DATE, "2024-02-30"),
        (ColumnType.TIMESTAMP, "2024-W01-1T00:00"),
        (ColumnType.TIMESTAMP, "2024-01-01T00"),  # an hour alone: PostgreSQL refuses it
        (ColumnType.TIMESTAMP, "20240101T000000"),
        (ColumnType.TIMESTAMP, "2024-01-01T00:00:00,5"),
        (ColumnType.TIMESTAMP, "2024-01-01T00:00:00.1234567"),  # Python cuts, PostgreSQL rounds
        (ColumnType.TIMESTAMP, "2024-01-01X00:00:00"),
        (ColumnType.TIMESTAMP, "2024-01-01T24:00:00"),  # PostgreSQL: the next day
        (ColumnType.TIMESTAMP, "2024-01-01T00:00:60"),
        (ColumnType.TIMESTAMP, "2024-01-01T00:00:00+05:30:15.5"),
        (ColumnType.TIMESTAMP, " 2024-01-01"),
    ],
)
def test_dates_and_timestamps_are_the_iso_forms_python_and_postgresql_read_alike(
    column_type: ColumnType, text: str
) -> None:
    """fromisoformat() reads each of the refused texts; a PostgreSQL sink's DATE refused some,
    failing the whole batch, and read others otherwise."""
    schema = _with(BASE.columns[0], Column(name="t", type=column_type))
    assert schema.problems({"id": 1, "t": text}) == [
        f"column 't': {text!r} is not a {column_type.value}"
    ]
    valid = {
        ColumnType.DATE: ["2024-01-01", "0001-01-01", "9999-12-31", "2024-02-29"],
        ColumnType.TIMESTAMP: [
            "2024-01-01",
            "2024-01-01 00:00",
            "2024-01-01T00:00:00",
            "2024-01-01 00:00:00.5Z",
            "2024-01-01T00:00:00.123456+05:30",
            "2024-01-01T00:00:00-08",
            "1900-01-01T00:00:00+00:19:32",
        ],
    }
    for fitting in valid[column_type]:
        assert schema.problems({"id": 1, "t": fitting}) == []


def test_the_json_document_round_trips_and_fingerprints_are_stable() -> None:
    assert TableSchema.from_json(BASE.to_json()) == BASE
    assert TableSchema.from_json(BASE.to_json()).fingerprint == BASE.fingerprint
    with pytest.raises(InvalidSchemaError):
        TableSchema.from_json('{"table": "t"}')


def test_a_table_without_primary_key_is_rejected_with_advice() -> None:
    """A declared schema names its key columns; a captured table needs a key in its database."""
    with pytest.raises(NoPrimaryKeyError, match="name its key columns in the schema's 'partition"):
        TableSchema(table="t", columns=BASE.columns, partition_key=())
    with pytest.raises(NoPrimaryKeyError, match="partition_key"):
        TableSchema.from_json(
            '{"table": "t", "columns": [{"name": "id", "type": "long"}], "partition_key": []}'
        )


def test_a_hand_written_document_needs_only_the_required_keys() -> None:
    schema = TableSchema.from_json(
        '{"table": "t", "columns": [{"name": "id", "type": "long"}], "partition_key": ["id"]}'
    )
    assert schema == TableSchema(
        table="t", columns=(Column(name="id", type=ColumnType.LONG),), partition_key=("id",)
    )
    keyed = TableSchema(
        table="t", columns=BASE.columns, partition_key=("id",), clustering_key=("seen",)
    )
    assert TableSchema.from_json(keyed.to_json()) == keyed


_ID = '{"name": "id", "type": "long"}'


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("{not json", "not a JSON document: "),
        ("[1, 2]", r"the schema document must be a JSON object, got \[1, 2\]"),
        (f'{{"columns": [{_ID}], "partition_key": ["id"]}}', "missing key 'table'"),
        (
            f'{{"table": "t", "columns": [{_ID}], "partition_key": ["id"], "key": ["id"]}}',
            r"the schema document has unknown key 'key' \(valid keys: table, columns, "
            r"partition_key, clustering_key\)",
        ),
        (
            '{"table": "t", "columns": [{"name": "id", "type": "long", "null": false}], '
            '"partition_key": ["id"]}',
            r"column 'id' has unknown key 'null' \(valid keys: name, type, nullable\)",
        ),
        (
            '{"table": "t", "columns": [{"name": "id", "type": "long", "nullable": "yes"}], '
            '"partition_key": ["id"]}',
            "column 'id': 'nullable' must be true or false, got 'yes'",
        ),
        (
            '{"table": "t", "columns": [{"name": "id", "type": "uuid"}], "partition_key": ["id"]}',
            "column 'id': type 'uuid' is not one of string, long, double, boolean, decimal, "
            "timestamp, date, bytes, json",
        ),
        (
            f'{{"table": 7, "columns": [{_ID}], "partition_key": ["id"]}}',
            "'table' must be a non-empty string, got 7",
        ),
        (
            '{"table": "t", "columns": [], "partition_key": ["id"]}',
            "'columns' must be a non-empty list of column objects",
        ),
        (
            '{"table": "t", "columns": ["id"], "partition_key": ["id"]}',
            "column 1 must be a JSON object, got 'id'",
        ),
        (
            '{"table": "t", "columns": [{"name": 7, "type": "long"}], "partition_key": ["id"]}',
            "column 1: 'name' must be a non-empty string, got 7",
        ),
        (
            '{"table": "t", "columns": [{"type": "long"}], "partition_key": ["id"]}',
            "column 1 is missing key 'name'",
        ),
        (
            f'{{"table": "t", "columns": [{_ID}], "partition_key": "id"}}',
            r"'partition_key' must be a list of column names \(strings\), got 'id'",
        ),
        (
            f'{{"table": "t", "columns": [{_ID}], "partition_key": ["id"], "clustering_key": [1]}}',
            r"'clustering_key' must be a list of column names \(strings\), got \[1\]",
        ),
        # A lone surrogate, escaped in JSON: registering it failed with UnicodeEncodeError.
        (
            f'{{"table": "t\\ud800", "columns": [{_ID}], "partition_key": ["id"]}}',
            "'table' 't\\\\ud800' is not valid Unicode text: surrogates not allowed",
        ),
        (
            '{"table": "t", "columns": [{"name": "\\ud800", "type": "long"}], '
            '"partition_key": ["\\ud800"]}',
            "column '\\\\ud800': 'name' '\\\\ud800' is not valid Unicode text",
        ),
    ],
)
def test_a_bad_document_is_rejected_with_what_is_wrong(document: str, problem: str) -> None:
    with pytest.raises(InvalidSchemaError, match=problem):
        TableSchema.from_json(document)


@pytest.mark.parametrize(("partition_key", "clustering_key"), [(("a", "a"), ()), (("a",), ("a",))])
def test_a_key_column_appears_once_in_the_key(
    partition_key: tuple[str, ...], clustering_key: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidSchemaError, match="appear more than once"):
        TableSchema(
            table="t",
            columns=(Column(name="a", type=ColumnType.LONG),),
            partition_key=partition_key,
            clustering_key=clustering_key,
        )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"name": 1}, r"^a column name must be a non-empty string, got 1"),
        ({"name": ""}, r"^a column name must be a non-empty string, got ''"),
        ({"name": "a\x00v2"}, r"^a column name must not contain a NUL character"),
        ({"type": "string"}, r"^column 'a': type 'string' is not a ColumnType"),
        ({"nullable": "no"}, r"^column 'a': nullable must be True or False, got 'no'"),
    ],
)
def test_a_column_field_of_the_wrong_type_is_refused(
    fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(InvalidSchemaError, match=problem):
        Column(**({"name": "a", "type": ColumnType.STRING} | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"table": 5}, r"^a schema's table name must be a non-empty string, got 5"),
        ({"columns": [Column(name="a", type=ColumnType.LONG)]}, r"columns must be a tuple of"),
        ({"columns": ("a",)}, r"columns must be a tuple of Columns"),
        ({"partition_key": "a"}, r"a key must be a tuple of column names, got 'a'"),
        ({"clustering_key": (1,)}, r"a key must be a tuple of column names, got \(1,\)"),
    ],
)
def test_a_table_schema_field_of_the_wrong_type_is_refused(
    fields: dict[str, object], problem: str
) -> None:
    values: dict[str, object] = {
        "table": "t",
        "columns": (Column(name="a", type=ColumnType.LONG),),
        "partition_key": ("a",),
    }
    with pytest.raises(InvalidSchemaError, match=problem):
        TableSchema(**(values | fields))  # type: ignore[arg-type]
