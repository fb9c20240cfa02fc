"""Captured SQLite tables: their schema as a TableSchema, read from the file's catalog.

SQLite's declared column types are free text; the capture maps them to logical types by SQLite's
own affinity rules, refined, and refuses a column it cannot map, a table without a primary key
or one keyed by a JSON column before anything is installed in the file.
"""

from __future__ import annotations

import sqlite3
import string
from collections.abc import Sequence
from pathlib import Path

from ordo.cdc.column_type import ColumnType
from ordo.cdc.schema import Column, TableSchema, require_captured_key, require_scalar_key
from ordo.errors import CaptureError, UnmappableColumnTypeError
from ordo.storage.captured_tables import refuse_names_of_one_table
from ordo.storage.file_errors import require_nameable
from ordo.storage.sql_materialized_table import quote_identifier
from ordo.storage.sqlite.datastore import read_only_connection
from ordo.storage.sqlite.driver_errors import refuse_folders_beside

_AFFINITY: tuple[tuple[str, ColumnType], ...] = (
    ("BOOL", ColumnType.BOOLEAN),
    ("INT", ColumnType.LONG),
    ("CHAR", ColumnType.STRING),
    ("CLOB", ColumnType.STRING),
    ("TEXT", ColumnType.STRING),
    ("UUID", ColumnType.STRING),
    ("BLOB", ColumnType.BYTES),
    ("REAL", ColumnType.DOUBLE),
    ("FLOA", ColumnType.DOUBLE),
    ("DOUB", ColumnType.DOUBLE),
    ("DECIMAL", ColumnType.DECIMAL),
    ("NUMERIC", ColumnType.DECIMAL),
    ("DATETIME", ColumnType.TIMESTAMP),
    ("TIMESTAMP", ColumnType.TIMESTAMP),
    ("DATE", ColumnType.DATE),
    ("JSON", ColumnType.JSON),
)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
"""How SQLite folds a name it looks up: ASCII letters only (`É` and `é` are two tables)."""


def _logical_type(declared: str) -> ColumnType | None:
    """The logical type of a declared SQLite column type (SQLite's affinity rules, refined)."""
    upper = declared.upper()
    return next((logical for fragment, logical in _AFFINITY if fragment in upper), None)


def column_type(table: str, column: str, declared: str) -> ColumnType:
    """The logical type of a declared SQLite column type; UnmappableColumnTypeError if none."""
    logical = _logical_type(declared)
    if logical is not None:
        return logical
    msg = f"table {table!r} column {column!r}: cannot map SQLite type {declared!r} (declare one)"
    raise UnmappableColumnTypeError(msg)


def json_columns(conn: sqlite3.Connection, tables: Sequence[str]) -> dict[str, frozenset[str]]:
    """Each table's JSON columns, by the catalog (a table dropped since has none).

    The capture checks their documents' numbers (`ordo.storage.sqlite.change_numbers`); unlike
    `read_schema` it refuses nothing: changes of a table dropped since are still published.
    """
    return {
        table: frozenset(
            row[1]
            for row in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")
            if _logical_type(row[2]) is ColumnType.JSON
        )
        for table in tables
    }


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to an existing source file (CaptureError when there is none).

    A folder beside it where SQLite keeps a file is refused here (`refuse_folders_beside`): a
    capture checks its source so before it creates its journal or installs anything. So is a
    path that can name no file (StorageAccessError): pathlib's look raised the bare OSError at
    a name too long, and took a symbolic link loop for no file.
    """
    require_nameable(path, doing=f"no SQLite database at {path} to capture")
    if not path.is_file():  # connecting would create an empty database
        msg = f"no SQLite database at {path} to capture"
        raise CaptureError(msg)
    refuse_folders_beside(path, what="source database")
    try:
        conn = read_only_connection(path)
    except sqlite3.Error as exc:
        msg = f"cannot read {path} as an SQLite database: {exc}"
        raise CaptureError(msg) from exc
    try:  # connecting reads nothing: a file that is not SQLite fails at its first statement
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        conn.close()
        msg = f"cannot read {path} as an SQLite database: {exc}"
        raise CaptureError(msg) from exc
    return conn


def read_schema(conn: sqlite3.Connection, path: Path, table: str) -> TableSchema:
    """The table's schema from the catalog; CaptureError (or the schema's own) if not capturable."""
    info = conn.execute(f"PRAGMA table_info({quote_identifier(table)})").fetchall()
    if not info:
        msg = f"table {table!r} does not exist in {path}"
        raise CaptureError(msg)
    key = tuple(name for *_, pk, name in sorted((row[5], row[1]) for row in info if row[5]))
    # The key first: its fix creates the table again, which is when the types get declared too.
    untyped = ", ".join(repr(row[1]) for row in info if _logical_type(row[2]) is None)
    require_captured_key(
        table,
        key,
        how="SQLite cannot add one to an existing table: create it again with a PRIMARY KEY "
        + (f"and a type for {untyped} " if untyped else "")
        + "(and copy its rows over)",
    )
    columns = tuple(
        Column(name=name, type=column_type(table, name, declared), nullable=not notnull and not pk)
        for _, name, declared, notnull, _, pk in info
    )
    schema = TableSchema(table=table, columns=columns, partition_key=key)
    require_scalar_key(
        schema,
        how="declare it TEXT, which captures the text the application stored (create the table "
        "again and copy its rows over)",
    )
    return schema


def refuse_one_table_twice(tables: Sequence[str]) -> None:
    """Refuse two of `tables` that are one table: SQLite ignores the ASCII case of its names.

    `orders` and `ORDERS` were captured as two tables: each row snapshotted into the change log
    of each name, its changes published under the name whose triggers were installed last only
    (the triggers' names are one too). The PostgreSQL capture refuses them alike
    (`refuse_names_of_one_table` of both).
    """
    refuse_names_of_one_table((table, table.translate(_ASCII_LOWER)) for table in tables)
