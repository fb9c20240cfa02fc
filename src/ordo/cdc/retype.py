"""How a value of a column reads after an accepted retype: the same value, or refused.

The sink converts the rows of a materialized table with it when an operator accepts a version
that retypes a column, so the table holds what the column's new type can hold, and the same on
every backend (a database's own casts differ: SQLite's turn 'abc' into 0, PostgreSQL's text
forms of timestamps follow the session's zone).
"""

from __future__ import annotations

from typing import cast

from ordo.cdc.json_text import compact_json, parse_json
from ordo.cdc.mutation import JsonValue
from ordo.cdc.schema import ColumnType, fits


def retyped_value(value: JsonValue, to: ColumnType) -> JsonValue:
    """`value` (a column's value in its message form) as a value of `to`, losing nothing.

    A value `to` already accepts stays as it is (a long in a double or decimal column, a
    decimal's text in a string column, anything in a json column). A string column takes the
    JSON text of any other value (`5` -> `"5"`, `true` -> `"true"`); a long, double or boolean
    column takes a string that is the JSON text of one of its values (`"12"`, `"1.5"`,
    `"true"`), and a long column a double without a fraction. Anything else raises ValueError:
    no conversion that would round, guess or drop it.
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
        return int(value)
    msg = f"{value!r} is not a {to.value}"
    raise ValueError(msg)
