"""The SQL of the SQLite capture's triggers: each write of a captured table becomes a change row.

The triggers render the key and the new row as JSON inside the application's own transaction,
so they must never raise: an error in a trigger fails the application's INSERT, UPDATE or
DELETE. Every value SQLite may hold in a column (any type in any column) is therefore either
rendered as JSON of the column's logical type or set aside under a name no schema has (see
`ordo.cdc.schema.not_json_cell`), for the materializer to dead-letter with the reason.
"""

from __future__ import annotations

from ordo.cdc.column_type import ColumnType
from ordo.cdc.schema import INFINITIES, Column, TableSchema, not_json_cell
from ordo.storage.sql_materialized_table import quote_identifier

CHANGES = "ordo_cdc_changes"
"""The change table the triggers write to; its rowid is the change's position."""
_NOW_US = "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"


EVENTS = ("insert", "update", "delete")
"""The writes a captured table has a trigger for."""


CAPTURE_TRIGGERS = "type = 'trigger' AND name GLOB 'ordo_cdc_*'"
"""The condition on sqlite_master's rows of the capture's triggers: GLOB, whose `_` is itself
and which minds case, where LIKE took the application's `ORDO-CDC-audit` for one of them (and an
install dropped it as a moved trigger)."""


def trigger_name(table: str, event: str) -> str:
    """The capture's trigger on `table` for `event` (one of EVENTS)."""
    return f"ordo_cdc_{table}_{event}"


def trigger_sql(schema: TableSchema, event: str) -> str:
    """The CREATE TRIGGER statement that records `event` on `schema`'s table as a change row.

    A capture compares it with the installed one to re-create triggers that are stale.
    """
    new_key, old_key = _key_json_sql(schema, "NEW."), _key_json_sql(schema, "OLD.")
    row = _row_json_sql(schema, "NEW.")
    values = {
        "insert": f"'I', {new_key}, NULL, {row}",
        "update": f"'U', {new_key}, {old_key}, {row}",
        "delete": f"'D', {old_key}, NULL, NULL",
    }[event]
    checks = _json_checks(schema, "NEW.")
    checked = f" FROM (SELECT {checks})" if checks and event != "delete" else ""
    trigger, table = (
        quote_identifier(trigger_name(schema.table, event)),
        quote_identifier(schema.table),
    )
    return (
        f"CREATE TRIGGER {trigger} AFTER {event.upper()} "
        f"ON {table} BEGIN INSERT INTO {CHANGES} "
        f"(table_name, op, key_json, old_key_json, row_json, captured_at_us) "
        f"SELECT {_literal(schema.table)}, {values}, {_NOW_US}{checked}; END"
    )


def snapshot_sql(schema: TableSchema) -> str:
    """The SELECT of every row's key and row JSON in `schema`'s table, as the triggers write."""
    checks = _json_checks(schema, "")
    rows = f"SELECT *, {checks} FROM {quote_identifier(schema.table)}" if checks else None
    source = f"({rows})" if rows else quote_identifier(schema.table)
    return f"SELECT {_key_json_sql(schema, '')}, {_row_json_sql(schema, '')} FROM {source}"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _key_json_sql(schema: TableSchema, prefix: str) -> str:
    """json_array() of the primary key columns (`prefix` "NEW.", "OLD." or ""), see `_key_value`."""
    by_name = {c.name: c for c in schema.columns}
    parts = (_key_value(prefix + quote_identifier(k), by_name[k].type) for k in schema.primary_key)
    return f"json_array({', '.join(parts)})"


def _key_value(ref: str, logical: ColumnType) -> str:
    """SQL that renders one key column as a JSON value that no other key of the table has.

    SQLite keys rows by value and storage class (the integer 1, the text '1' and the BLOB x'31'
    are three rows; 1 and 1.0, which it compares equal, one), so a key is carried as it is,
    and the materializer dead-letters one that does not fit its column. Two renderings of
    values would make keys of others: a BOOLEAN's truth (2, 0.5 and 'yes' were the row 1 or
    0's key, so the materialized table held one row for both, and deleting either deleted it)
    and the hex a BYTES column makes of text and numbers (the text '1' and the number 1 were
    the BLOB x'31'). A boolean key is therefore true or false only for the integers 1 and 0, as
    any boolean is (`_json_expression`), and a bytes key is a BLOB's hex only. A value JSON
    cannot carry as the column's (`_uncarried`), or anything but a BLOB in a bytes key, becomes
    null: a key has no other name to go under, and json_array() would refuse a BLOB and fail
    the application's write. The materializer dead-letters the null key.
    """
    if logical is ColumnType.BYTES:
        return f"CASE WHEN typeof({ref}) = 'blob' THEN lower(hex({ref})) END"
    value = _json_expression(ref, logical)
    uncarried = _uncarried(ref, logical)
    return value if uncarried is None else f"CASE WHEN {uncarried} THEN NULL ELSE {value} END"


def _row_json_sql(schema: TableSchema, prefix: str) -> str:
    """json_object() of the value columns (keys travel separately), each as its logical type.

    It reads the columns `_json_checks` computes, which the statement must select from.
    """
    parts = [_cell(prefix + quote_identifier(c.name), c) for c in schema.value_columns]
    return f"json_object({', '.join(parts)})"


def _json_check(column: Column) -> str:
    """The name of the column of `_json_checks` that says whether `column` holds JSON."""
    return quote_identifier(f"ordo_cdc_is_json {column.name}")


def _json_checks(schema: TableSchema, prefix: str) -> str:
    """The select list of `_is_json` of each JSON value column (none: ""), named `_json_check`.

    `_cell` needs it twice, for the name and the value, and json_tree() is the dearest part of
    the application's write: computed once in a subquery, it is walked once.
    """
    return ", ".join(
        f"{_is_json(prefix + quote_identifier(c.name))} AS {_json_check(c)}"
        for c in schema.value_columns
        if c.type is ColumnType.JSON
    )


def _is_infinite(ref: str) -> str:
    """Whether `ref` holds an infinite REAL (`9e999` is SQLite's literal for one)."""
    return f"(typeof({ref}) = 'real' AND abs({ref}) = 9e999)"


def _finite(ref: str, expression: str) -> str:
    """`expression`, or the string "Infinity" / "-Infinity" when `ref` holds an infinite REAL.

    JSON has no infinities: SQLite's json_object() writes `Inf` (3.40) or `9.0e999` (later
    versions, which Python reads as an infinity), so the change log would hold text no reader
    downstream can parse, or a number it cannot write back. As a string the value is valid
    JSON that no numeric column accepts: the materializer sends the change to the dead letters
    with the column named, and `ordo cdc materialize` reports them, instead of an unreadable
    mutation or a silently altered value. (NaN cannot be stored: SQLite stores NULL instead.)
    """
    positive, negative = map(_literal, INFINITIES)
    return (
        f"CASE WHEN {_is_infinite(ref)} "
        f"THEN CASE WHEN {ref} > 0 THEN {positive} ELSE {negative} END ELSE {expression} END"
    )


def _exact(ref: str) -> str:
    """`ref`, or the text of a finite REAL that reads back as that very double.

    SQLite 3.40 writes a REAL with 15 significant digits (json_object(), json(), CAST AS TEXT),
    so 0.1 + 0.2 was captured as 0.3, and the largest doubles as `1.79769313486232e+308`,
    beyond a double's range. That text is kept when it reads back as the REAL; otherwise
    printf's 18 digits, which read back as the same double where SQLite computes them in an
    80-bit long double (x86-64; 17 digits would not always).
    """
    short = f"CAST({ref} AS TEXT)"
    return (
        f"CASE WHEN typeof({ref}) <> 'real' THEN {ref} WHEN CAST({short} AS REAL) = {ref} "
        f"THEN {short} ELSE printf('%!.18g', {ref}) END"
    )


def _json_expression(ref: str, logical: ColumnType) -> str:
    """SQL that renders one column of NEW/OLD as a JSON value of its logical type.

    A column of any type may hold any value in SQLite: numbers and text pass through as they
    are (`_as_stored`), and the materializer checks them against the schema. A BOOLEAN column
    (NUMERIC affinity, which stores '1' and 1.0 as 1) renders the integers 1 and 0 as true and
    false and holds anything else as it is: read by its truth, 2 was captured as true and the
    text 'true' or 'yes' as false (SQLite's truth test reads text as its leading number), a
    value the application never wrote; as it is, no boolean column accepts it and the
    materializer dead-letters the change. A JSON column is `_cell`'s own case (a key column
    cannot be one: see `require_scalar_key`), and a key column renders bytes otherwise
    (`_key_value`).
    """
    match logical:
        case ColumnType.BOOLEAN:
            truth = f"json(CASE WHEN {ref} THEN 'true' ELSE 'false' END)"
            is_truth = f"typeof({ref}) = 'integer' AND {ref} IN (0, 1)"
            return f"CASE WHEN {is_truth} THEN {truth} ELSE {_as_stored(ref)} END"
        case ColumnType.BYTES:
            return f"CASE WHEN {ref} IS NULL THEN NULL ELSE lower(hex({ref})) END"
        case ColumnType.DECIMAL:
            return _finite(ref, f"CAST({_exact(ref)} AS TEXT)")
        case _:
            return _as_stored(ref)


def _as_stored(ref: str) -> str:
    """SQL that renders `ref` as the JSON value SQLite holds.

    A number or text as it is: a REAL exactly (`_exact`), an infinity as a string (`_finite`).
    """
    real = f"json({_exact(ref)})"  # a JSON number, not the string _exact gives
    return _finite(ref, f"CASE WHEN typeof({ref}) = 'real' THEN {real} ELSE {ref} END")


def _is_json(ref: str) -> str:
    """Whether `ref` is NULL, a finite REAL or standard JSON text with no number out of range.

    A JSON column has NUMERIC affinity: it stores text that looks like a number as one, and a
    finite REAL is carried exactly (`_exact`), whatever SQLite's 15 digits of it read as.
    json_valid(), unlike json(), never raises; its one-argument form is the only one SQLite
    before 3.45 has (two arguments would fail every write to the table on an older SQLite). It
    accepts `1e999`, which SQLite reads as an infinity, as Python does, and which no reader
    after the change log could read as the source's value: json_tree() finds such numbers
    (type `real`: a number with a fraction or exponent, those Python's parse_float reads; a
    long integer is no `real`, and Python reads it exactly). It raises for text that is not
    JSON, so only valid text reaches it (CASE evaluates one branch).

    json_tree() costs the application's write a few times what json() does, so it walks only
    text that may hold such a number: one with an exponent of three digits or more, or else
    of 210 characters or more (a literal of 1.8e308 or more with a smaller exponent has 210
    digits at least). A GLOB that starts with a literal character is a fast scan; a class
    would not be.
    """
    may_be_out_of_range = (
        f"(length({ref}) >= 210 OR {ref} GLOB '*e[0-9+][0-9][0-9]*' "
        f"OR {ref} GLOB '*E[0-9+][0-9][0-9]*')"
    )
    out_of_range = f"SELECT 1 FROM json_tree({ref}) WHERE type = 'real' AND abs(atom) = 9e999"
    return (
        f"(CASE WHEN {ref} IS NULL THEN 1 WHEN typeof({ref}) = 'real' THEN abs({ref}) <> 9e999 "
        f"WHEN NOT json_valid({ref}) THEN 0 WHEN {may_be_out_of_range} "
        f"THEN NOT EXISTS ({out_of_range}) ELSE 1 END)"
    )


def _uncarried(ref: str, logical: ColumnType) -> str | None:
    """Whether `ref` holds a value JSON cannot carry as a `logical` value; None: it always can.

    In a JSON column what `_is_json` refuses (json() raises "malformed JSON" for text that does
    not parse, and an error inside a trigger fails the application's INSERT or UPDATE: capture
    must never do that); in a column of any other type but bytes a BLOB (json_object() and
    json_array() refuse one); in a string column an infinite REAL too: as the string
    "Infinity" it would fit, and be a value the application does not read back (a column of
    TEXT affinity stores the text SQLite makes of it, `Inf`, carried as it is). Other types
    refuse the string "Infinity" themselves (`_finite`).
    """
    is_blob = f"typeof({ref}) = 'blob'"
    match logical:
        case ColumnType.BYTES:
            return None
        case ColumnType.JSON:
            return f"NOT {_is_json(ref)}"
        case ColumnType.STRING:
            return f"({is_blob} OR {_is_infinite(ref)})"
        case _:
            return is_blob


def _aside_text(ref: str) -> str:
    """The string an uncarried value is recorded as.

    A BLOB as `x'<hex>'`, an infinite REAL as "Infinity" or "-Infinity", anything else as its
    text: never a number, which would be read as the column's value.
    """
    blob = f"'x''' || lower(hex({ref})) || ''''"
    return _finite(
        ref, f"CASE WHEN typeof({ref}) = 'blob' THEN {blob} ELSE CAST({ref} AS TEXT) END"
    )


def _cell(ref: str, column: Column) -> str:
    """The json_object() name and value of one value column.

    A value JSON cannot carry as the column's (`_uncarried`) goes under `not_json_cell(name)`
    as a string (`_aside_text`): the change is captured, no schema accepts it, and the
    materializer dead-letters it saying which column holds what. A JSON column's check is
    the statement's (`_json_checks`).
    """
    name, aside = _literal(column.name), _literal(not_json_cell(column.name))
    uncarried = _uncarried(ref, column.type)
    if uncarried is None:
        return f"{name}, {_json_expression(ref, column.type)}"
    if column.type is ColumnType.JSON:  # json() outermost: its result is JSON, not a string
        uncarried = f"NOT {_json_check(column)}"
        aside_json, carried = f"json_quote({_aside_text(ref)})", _exact(ref)
        value = f"json(CASE WHEN {uncarried} THEN {aside_json} ELSE {carried} END)"
    else:
        carried = _json_expression(ref, column.type)
        value = f"CASE WHEN {uncarried} THEN {_aside_text(ref)} ELSE {carried} END"
    return f"CASE WHEN {uncarried} THEN {aside} ELSE {name} END, {value}"
