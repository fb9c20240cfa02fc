"""Change capture for SQLite, the embedded default: triggers copy each write into a change table.

`install()` creates, in the source database, the change table `ordo_cdc_changes` and AFTER
INSERT/UPDATE/DELETE triggers on every captured table that record the key and the full new row
as JSON. The change table's rowid is the position: it grows in commit order, so it is also the
write time of every cell (last write wins by position = commit order per row). `advance` deletes
what was published, so the rows waiting in the change table are what the source retains. When a
captured table's columns change, `schemas()` (which every capture window calls) re-creates its
triggers with the new columns; SQLite triggers cannot name columns dynamically, so writes made
between an ALTER TABLE and that moment lack the new column (run `ordo cdc capture --install`
right after altering a captured table).
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path

from ordo.cdc.change_rows import ChangeRows, key_text
from ordo.cdc.json_text import parse_json
from ordo.cdc.mutation import Audit, Cell, Mutation, snapshot_segment
from ordo.cdc.ports import CapturedWindow, SourceStatus
from ordo.cdc.schema import Column, ColumnType, TableSchema, require_captured_key
from ordo.errors import CaptureError, UnmappableColumnTypeError
from ordo.storage.sql_materialized_table import quote_identifier
from ordo.storage.sqlite.change_triggers import (
    CHANGES,
    snapshot_sql,
    trigger_name,
    trigger_sql,
)
from ordo.storage.sqlite.datastore import SQLiteDatastore, read_only_connection

SOURCE = "sqlite"
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


class SQLiteChangeSource:
    """ChangeSource over an SQLite file; `name` (the segment of every audit) is "sqlite:<file>"."""

    def __init__(self, path: str | Path, tables: Sequence[str]) -> None:
        if not tables:
            msg = "name at least one table to capture"
            raise CaptureError(msg)
        self.path = Path(path)
        self.tables = tuple(tables)
        check_capturable(self.path, self.tables)  # a bad table leaves the file as it was
        self._db = SQLiteDatastore(self.path)

    @property
    def name(self) -> str:
        """The segment name that every captured mutation's audit carries."""
        return _source_name(self.path)

    def install(self) -> None:
        """Create the change table and (re)create the triggers of every captured table."""
        with self._db.write_transaction() as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {CHANGES} ("
                "position INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL, "
                "op TEXT NOT NULL, key_json TEXT NOT NULL, old_key_json TEXT, row_json TEXT, "
                "captured_at_us INTEGER NOT NULL)"
            )
            for schema in (_read_schema(conn, self.path, table) for table in self.tables):
                self._create_triggers(conn, schema)

    def schemas(self) -> Sequence[TableSchema]:
        """The captured tables' schemas from the catalog; triggers follow column changes."""
        with self._db.connection() as conn:
            schemas = [_read_schema(conn, self.path, table) for table in self.tables]
            installed = {
                row[0]: row[1]
                for row in conn.execute(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                    "AND name LIKE 'ordo_cdc_%_insert'"
                )
            }
        if any(
            trigger_sql(s, "insert") != installed.get(trigger_name(s, "insert")) for s in schemas
        ):
            self.install()
        return schemas

    def peek(self, *, max_changes: int) -> CapturedWindow:
        """Up to `max_changes` rows of the change table (each row is its own transaction).

        Built column by column from the change table's JSON texts, with no object per change
        (see `ordo.cdc.change_rows`): the row JSON is already the `cell_values` column, every
        cell written at the change's position.
        """
        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT position, table_name, op, key_json, old_key_json, row_json, "
                f"captured_at_us FROM {CHANGES} WHERE {_of_tables(self.tables)} "
                "ORDER BY position LIMIT ?",
                (*self.tables, max_changes),
            ).fetchall()
        window = _ChangeColumns(self.name)
        for row in rows:
            window.add(*row)
        return CapturedWindow(
            rows=window.rows(),
            up_to=rows[-1][0] if rows else self._confirmed(),
            has_more=len(rows) >= max_changes,
        )

    def advance(self, *, up_to: int) -> None:
        """Forget the captured tables' change rows up to `up_to` (inclusive): they are published.

        Rows of other tables whose triggers an earlier capture installed stay for the capture
        that names them.
        """
        with self._db.write_transaction() as conn:
            conn.execute(
                f"DELETE FROM {CHANGES} WHERE position <= ? AND {_of_tables(self.tables)}",
                (up_to, *self.tables),
            )

    def status(self) -> SourceStatus:
        """Confirmed position = one before the oldest waiting row; retained = rows waiting."""
        with self._db.connection() as conn:
            return _status(conn, self.path, self.tables)

    def snapshot(self, table: str) -> Iterator[Mutation]:
        """The table's current rows as INSERT-like mutations, written at the change table's head.

        Read in one transaction with the head position, so every later change has a higher
        position and wins over the snapshot; the materializer emits them as READ messages. The
        audit segment is `snapshot_segment(name, now)` with row ordinals as positions.
        """
        schema = next(s for s in self.schemas() if s.table == table)
        with self._db.write_transaction() as conn:  # one consistent read of rows and head
            head = conn.execute(
                "SELECT seq FROM sqlite_sequence WHERE name = ?", (CHANGES,)
            ).fetchone()
            rows = conn.execute(snapshot_sql(schema)).fetchall()
        write_time = head[0] if head else 0
        captured_at_us = time.time_ns() // 1000
        segment = snapshot_segment(self.name, captured_at_us)
        for ordinal, (key_json, row_json) in enumerate(rows, start=1):
            yield Mutation(
                table=table,
                partition_key=tuple(parse_json(key_json)),
                cells={
                    column: Cell(value=value, write_time=write_time)
                    for column, value in parse_json(row_json).items()
                },
                liveness=Cell(value=True, write_time=write_time),
                audit=Audit(
                    source=SOURCE,
                    segment=segment,
                    position=ordinal,
                    captured_at_us=captured_at_us,
                ),
            )

    def close(self) -> None:
        """Close the connections to the source file."""
        self._db.close()

    def _create_triggers(self, conn: sqlite3.Connection, schema: TableSchema) -> None:
        for event in ("insert", "update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {quote_identifier(trigger_name(schema, event))}")
            conn.execute(trigger_sql(schema, event))

    def _confirmed(self) -> int:
        confirmed = self.status().confirmed_position
        return 0 if confirmed is None else confirmed


_PLAIN_KEY = re.compile(r'\[(?:-?[0-9]+|"[ !#-\[\]-~]*")(?:,(?:-?[0-9]+|"[ !#-\[\]-~]*"))*\]')
"""A json_array() text of integers and printable ASCII strings without escapes: SQLite writes
those exactly as `key_text` does."""


def _key_text(sqlite_json: str) -> str:
    """The change log's key text (`key_text`) of a key as SQLite's json_array() wrote it.

    Routing and the materializer hash the text, so it must be the one `key_text` gives for the
    same key (the snapshot's keys take that path); SQLite writes floats and non-ASCII text
    differently, so anything but the plain cases is decoded and encoded again.
    """
    if _PLAIN_KEY.fullmatch(sqlite_json):
        return sqlite_json
    return key_text(tuple(parse_json(sqlite_json)))


class _ChangeColumns:
    """Collects a window of change table rows as the columns of `ChangeRows`.

    Only eight columns vary between the changes of one source; the others are filled at the end.
    """

    def __init__(self, segment: str) -> None:
        self._segment = segment
        self._tables: list[str] = []
        self._keys: list[str] = []
        self._values: list[str | None] = []
        self._values_times: list[int | None] = []
        self._liveness: list[int | None] = []
        self._deleted: list[int | None] = []
        self._positions: list[int] = []
        self._captured: list[int] = []

    def add(
        self,
        position: int,
        table: str,
        op: str,
        key_json: str,
        old_key_json: str | None,
        row_json: str | None,
        captured_at_us: int,
    ) -> None:
        """One change row: a delete, or an upsert (a primary-key change deletes the old key).

        CaptureError for a key that is not JSON: an infinite REAL key as triggers installed by
        an earlier ordo wrote it (`[Inf]`); today's write it as a string (see `_finite`).
        """
        is_moved = old_key_json is not None and old_key_json != key_json  # both json_array()
        try:
            key = _key_text(key_json)
            old_key = _key_text(old_key_json) if is_moved and old_key_json else None
        except ValueError as exc:
            msg = (
                f"table {table!r}: change {position} of {CHANGES} has the key {key_json}, "
                f"which is not JSON ({exc}); it cannot be published: delete that row of "
                f"{CHANGES} to go on"
            )
            raise CaptureError(msg) from exc
        if op == "D":
            self._append(table, key, position, captured_at_us, None)
            return
        if old_key is not None:
            self._append(table, old_key, position, captured_at_us, None)
        self._append(table, key, position, captured_at_us, row_json or "{}")

    def _append(
        self, table: str, key: str, position: int, captured_at_us: int, values: str | None
    ) -> None:
        """A delete (`values` None) or an upsert of the row's JSON `values` at `position`."""
        self._tables.append(table)
        self._keys.append(key)
        self._positions.append(position)
        self._captured.append(captured_at_us)
        has_cells = values is not None and values != "{}"
        self._values.append(values if has_cells else None)
        self._values_times.append(position if has_cells else None)
        self._liveness.append(None if values is None else position)
        self._deleted.append(position if values is None else None)

    def rows(self) -> ChangeRows:
        """What was added, in order."""
        count = len(self._positions)
        nothing = (None,) * count  # a tuple: four columns share it
        return ChangeRows(
            {
                "table": self._tables,
                "partition_key": self._keys,
                "clustering_key": ("[]",) * count,
                "cells": nothing,
                "cell_values": self._values,
                "cell_values_time": self._values_times,
                "liveness_time": self._liveness,
                "liveness_ttl_s": nothing,
                "row_deleted_at": self._deleted,
                "partition_deleted_at": nothing,
                "schema_id": nothing,
                "source": (SOURCE,) * count,
                "replica": ("",) * count,
                "segment": (self._segment,) * count,
                "position": self._positions,
                "captured_at_us": self._captured,
            }
        )


def check_capturable(path: Path, tables: Sequence[str]) -> list[TableSchema]:
    """The tables' schemas; refuse a file or a table the capture cannot take (read only).

    CaptureError (or the schema's own error) names the problem; the file is left as it was.
    """
    with closing(_read_only(path)) as conn:
        return [_read_schema(conn, path, table) for table in tables]


def read_status(path: Path, tables: Sequence[str]) -> SourceStatus:
    """The capture's status in the file at `path`, read only.

    What `ordo status` and `ordo cdc status` show: looking must not install a capture (the
    change table and triggers that log every later write), nor switch the file to WAL. A table
    without the capture's triggers is a CaptureError naming the captured ones.
    """
    with closing(_read_only(path)) as conn:
        has_changes = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CHANGES,)
        ).fetchone()
        if has_changes is None:
            msg = f"no capture is installed in {path}: start one with `ordo cdc capture`"
            raise CaptureError(msg)
        captured = sorted(
            str(row[0]).removeprefix("ordo_cdc_").removesuffix("_insert")
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' "
                "AND name LIKE 'ordo_cdc_%_insert'"
            )
        )
        for table in tables:
            if table not in captured:
                msg = f"table {table!r} is not captured in {path} (captured: {', '.join(captured)})"
                raise CaptureError(msg)
        return _status(conn, path, tables)


def _source_name(path: Path) -> str:
    return f"sqlite:{path.name}"


def _read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to an existing source file (CaptureError when there is none)."""
    if not path.is_file():  # connecting would create an empty database
        msg = f"no SQLite database at {path} to capture"
        raise CaptureError(msg)
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


def _read_schema(conn: sqlite3.Connection, path: Path, table: str) -> TableSchema:
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
    return TableSchema(table=table, columns=columns, partition_key=key)


def _of_tables(tables: Sequence[str]) -> str:
    """The condition on the change table's rows of `tables` (one parameter per table).

    The change table holds the rows of every table an earlier capture installed triggers for;
    a capture publishes and forgets only those of the tables it names.
    """
    return f"table_name IN ({', '.join('?' * len(tables))})"


def _status(conn: sqlite3.Connection, path: Path, tables: Sequence[str]) -> SourceStatus:
    oldest, newest, waiting = conn.execute(
        f"SELECT MIN(position), MAX(position), COUNT(*) FROM {CHANGES} WHERE {_of_tables(tables)}",
        tuple(tables),
    ).fetchone()
    head = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (CHANGES,)).fetchone()
    return SourceStatus(
        name=_source_name(path),
        tables=tuple(tables),
        confirmed_position=(oldest - 1) if oldest is not None else (head[0] if head else None),
        head_position=newest if newest is not None else (head[0] if head else None),
        retained_bytes=None,
        retained_changes=waiting,
    )
