"""How a value of a column reads after an accepted retype: the same value, or refused.

The sink converts the rows of a materialized table with it when an operator accepts a version
that retypes a column, so the table holds what the column's new type can hold, and the same on
every backend (a database's own casts differ: SQLite's turn 'abc' into 0, PostgreSQL's text
forms of timestamps follow the session's zone). The fold converts the values a message shows
with it (`retyped_row`), and the sink those of a message of an older version, so the types a
row's values have never depend on which version wrote them.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from typing import cast

from ordo.cdc.column_type import ColumnType, fits
from ordo.cdc.json_text import compact_json, parse_json
from ordo.cdc.mutation import JsonValue
from ordo.cdc.schema import TableSchema
from ordo.errors import UnconvertibleValueError


def retyped_value(value: JsonValue, to: ColumnType) -> JsonValue:
    """`value` (a column's value in its message form) as a value of `to`, losing nothing.

    A value `to` already accepts stays as it is (a long in a double or decimal column, a
    decimal's text in a string column, anything in a json column). A string column takes the
    JSON text of any other value (`5` -> `"5"`, `true` -> `"true"`); a long, double or boolean
    column takes a string that is the JSON text of one of its values (`"12"`, `"1.5"`,
    `"true"`), and a long column a double without a fraction that 64 bits hold (not 1e30).
    Anything else raises ValueError: no conversion that would round, guess or drop it.
    """
    if value is None or fits(to, value):
        return value
    if to is ColumnType.STRING:
        return compact_json(value)
    if isinstance(value, str) and to in (ColumnType.LONG, ColumnType.DOUBLE, ColumnType.BOOLEAN):
        try:
            parsed = parse_json(value)
        except ValueError:
            parsed = None
        if parsed is not None and fits(to, parsed):
            return cast(JsonValue, parsed)
    if to is ColumnType.LONG and isinstance(value, float) and value.is_integer():
        whole = int(value)
        if fits(to, whole):
            return whole
    msg = f"{value!r} is not a {to.value}"
    raise ValueError(msg)


def retyped_columns(schemas: Iterable[TableSchema]) -> frozenset[str]:
    """The columns that the `schemas` (versions of one table) do not all give the same type."""
    types: dict[str, set[ColumnType]] = {}
    for schema in schemas:
        for column in schema.columns:
            types.setdefault(column.name, set()).add(column.type)
    return frozenset(name for name, found in types.items() if len(found) > 1)


def retyped_row(
    row: MutableMapping[str, JsonValue],
    schema: TableSchema,
    columns: Iterable[str],
    *,
    key: Sequence[JsonValue],
) -> None:
    """Convert `row`'s values of `columns` (in place) to the types `schema` gives them.

    `columns` are those another version of the table types otherwise (so the values may be of
    that type): checking only them costs nothing for a table never retyped. A column `row` or
    `schema` does not have is skipped. Raises UnconvertibleValueError, naming `key` (the row's
    primary key), for a value that does not convert (`retyped_value`).
    """
    by_name = schema.by_name
    for name in columns:
        column = by_name.get(name)
        value = row.get(name)
        if column is None or value is None or fits(column.type, value):
            continue
        try:
            row[name] = retyped_value(value, column.type)
        except ValueError as exc:
            raise UnconvertibleValueError(
                table=schema.table,
                column=name,
                type=column.type.value,
                key=tuple(key),
                value=value,
            ) from exc
