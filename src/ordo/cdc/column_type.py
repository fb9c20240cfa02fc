"""The logical column types of table schemas, and which JSON values fit each.

A change message's values are JSON; a column's type says how to read them and which values a
sink can write: `fits` is what a retype's conversions check, and `misfit` (`fits`, and no NUL
character, which no sink stores) what the schema's `problems` and the materializer check.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from enum import StrEnum

from ordo.cdc.mutation import JsonValue


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


_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A decimal number as text: ASCII digits, an optional fraction and exponent, nothing else."""


def _is_decimal(value: JsonValue) -> bool:
    """A finite number, or a string of one in plain or exponent notation (`_DECIMAL_TEXT`).

    Decimal() reads more: `"NaN"` and `"Infinity"`, which are no decimal's value (JSON numbers
    are finite, PostgreSQL captures them as null, and the sink's NUMERIC column would refuse
    some of them, `sNaN`, failing the whole batch), and `"1_000"`, `" 1 "` or the digits of
    other scripts (fullwidth, Arabic-Indic). An SQLite NUMERIC column keeps such text as text,
    a row (and key) apart from the number 1000 or 1; a PostgreSQL sink's NUMERIC refuses it
    (15 does, failing the whole batch) or reads it as that number, the other row's key.
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and _DECIMAL_TEXT.fullmatch(value) is not None


def _is_double(value: JsonValue) -> bool:
    """A finite float (JSON has no NaN or infinities), or an integer a double holds.

    An integer beyond 2**53 is held rounded, as a DOUBLE PRECISION or REAL column holds it. One
    beyond a double's range (10**400) no double column holds: a sink cannot write it (SQLite
    cannot bind it, PostgreSQL's double precision is out of range), which failed the whole
    batch, and as a key it was a fold key of no row of the sink.
    """
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


_LONG_RANGE = range(-(2**63), 2**63)
"""The integers a long holds: 64 bits in every sink (SQLite's INTEGER, PostgreSQL's BIGINT,
Spark's LongType)."""


def _is_long(value: JsonValue) -> bool:
    """An integer of 64 bits (a bool is no long: JSON's `true` is not the number 1).

    JSON integers have no bound, and Python reads any: 2**63 passed as a long, and a sink
    cannot write it (SQLite cannot bind it, PostgreSQL's BIGINT is out of range), which failed
    the whole batch, and as a key it was a fold key of no row of the sink.
    """
    return isinstance(value, int) and not isinstance(value, bool) and value in _LONG_RANGE


_DATE_TEXT = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_ISO_TEXT = {
    dt.date: re.compile(_DATE_TEXT),
    dt.datetime: re.compile(
        _DATE_TEXT + r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?"
        r"(?:Z|[+-][0-9]{2}(?::[0-9]{2}){0,2})?)?"
    ),
}
"""A date as `YYYY-MM-DD`; a timestamp as a date, or a date, `T` or a space, `HH:MM`, optional
seconds with up to six digits of fraction and an optional zone (`Z`, `+HH`, `+HH:MM`,
`+HH:MM:SS`): ASCII digits, the forms Python and PostgreSQL both read, and read alike."""


def _is_iso(value: JsonValue, parse: type[dt.datetime] | type[dt.date]) -> bool:
    """A string in `_ISO_TEXT`'s form that `parse` reads: a real date, time and zone.

    Python's fromisoformat() reads more: week dates (`2024-W01-1`), the basic format
    (`20240101T0000`), an hour alone (`T00`), a comma before the fraction, any character
    between date and time, more than six digits of fraction (cut, where PostgreSQL rounds).
    A PostgreSQL sink's DATE refuses some of them, failing the whole batch, and reads others
    otherwise; an SQLite sink stored them as they are. `2024-01-01T24:00` and a leap second
    (`:60`), which PostgreSQL reads as the next day or minute, Python refuses.
    """
    if not isinstance(value, str) or _ISO_TEXT[parse].fullmatch(value) is None:
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
            return _is_long(value)
        case ColumnType.DOUBLE:
            return _is_double(value)
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


def holds_nul(value: JsonValue) -> bool:
    """Whether `value` is a string holding a NUL character, or JSON with such a string or key."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            if any("\x00" in name for name in item):
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def misfit(column_type: ColumnType, value: JsonValue) -> str | None:
    r"""Why a non-null `value` cannot be a value of `column_type` in a message; None if it can.

    Either it does not `fits` the type, or it holds a NUL character (`holds_nul`), which no
    sink stores: PostgreSQL's text and jsonb refuse it (as does ordo's journal on both
    backends). SQLite stores text with one, PostgreSQL's json keeps `\u0000` as written and
    an ingested line may hold one; materialized into PostgreSQL it failed the whole batch, at
    every restart, so the materializer dead-letters its change instead.
    """
    if not fits(column_type, value):
        return f"is not a {column_type.value}"
    if column_type in _FREE_TEXT and holds_nul(value):
        return "holds a NUL character, which no sink stores"
    return None


_FREE_TEXT = frozenset({ColumnType.STRING, ColumnType.JSON})
"""The types whose values may hold any character: `fits` pins every other type's text to a
form without NUL (digits, an ISO date, hex), so `misfit` walks no number or date for one."""
