"""Change capture for SQLite, the embedded default: triggers copy each write into a change table.

`install()` creates, in the source database, the change table `ordo_cdc_changes` and AFTER
INSERT/UPDATE/DELETE triggers on every captured table that record the key and the full new row
as JSON. The change table's rowid is the position: it grows in commit order, so it is also the
write time of every cell (last write wins by position = commit order per row). `advance` deletes
what was published, so the rows waiting in the change table are what the source retains. When a
captured table's columns change, `schemas()` (which every capture window calls) re-creates its
triggers with the new columns; SQLite triggers cannot name columns dynamically, so writes made
between an ALTER TABLE and that moment lack the new column (run `ordo cdc capture` once right
after altering a captured table). The segment of every audit is recorded in the file when the
capture is installed (`ordo.storage.sqlite.change_segment`), unique to the file.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path

from ordo.cdc.column_type import ColumnType
from ordo.cdc.json_text import parse_json
from ordo.cdc.mutation import Audit, Cell, Mutation, snapshot_segment
from ordo.cdc.ports import CapturedWindow, SourceStatus
from ordo.cdc.schema import TableSchema
from ordo.errors import CaptureError
from ordo.storage.sql_materialized_table import quote_identifier
from ordo.storage.sqlite.catalog import (
    json_columns,
    open_read_only,
    read_schema,
    refuse_one_table_twice,
)
from ordo.storage.sqlite.change_columns import ChangeColumns
from ordo.storage.sqlite.change_numbers import set_aside_rounded
from ordo.storage.sqlite.change_segment import legacy_segment, record_segment, recorded_segment
from ordo.storage.sqlite.change_text import fetch_change_rows
from ordo.storage.sqlite.change_triggers import (
    CAPTURE_TRIGGERS,
    CHANGES,
    EVENTS,
    snapshot_sql,
    trigger_name,
    trigger_sql,
)
from ordo.storage.sqlite.datastore import SQLiteDatastore, has_table

SOURCE = "sqlite"


class SQLiteChangeSource:
    """ChangeSource over an SQLite file; `name` is the segment of every audit, recorded in it."""

    def __init__(self, path: str | Path, tables: Sequence[str]) -> None:
        if not tables:
            msg = "name at least one table to capture"
            raise CaptureError(msg)
        self.path = Path(path)
        self.tables = tuple(tables)
        check_capturable(self.path, self.tables)  # a bad table leaves the file as it was
        self._db = SQLiteDatastore(self.path, what="source database")
        self._name: str | None = None
        """The segment recorded in the file, once read or recorded (it never changes)."""

    @property
    def name(self) -> str:
        """The segment name that every captured mutation's audit carries.

        The one recorded in the file; before `install` records one, `sqlite:<file name>`.
        """
        if self._name is None:
            with self._db.connection() as conn:
                self._name = recorded_segment(conn)
        return legacy_segment(self.path) if self._name is None else self._name

    def install(self) -> None:
        """Create the change table and (re)create the triggers of every captured table.

        Also drops the triggers a table took along when it was renamed (SQLite moves them with
        it): their change rows name the old table, so each write of the renamed table was
        logged twice, once for no capture of it, or for a new table of the old name. Writes
        between the RENAME and this moment are logged under the old name only.
        """
        with self._db.write_transaction() as conn:
            _drop_moved_triggers(conn)
            self._name = record_segment(conn, self.path)  # before the change table is made
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {CHANGES} ("
                "position INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL, "
                "op TEXT NOT NULL, key_json TEXT NOT NULL, old_key_json TEXT, row_json TEXT, "
                "captured_at_us INTEGER NOT NULL)"
            )
            for schema in (read_schema(conn, self.path, table) for table in self.tables):
                self._create_triggers(conn, schema)

    def schemas(self) -> Sequence[TableSchema]:
        """The captured tables' schemas from the catalog; triggers follow column changes."""
        with self._db.connection() as conn:
            schemas = [read_schema(conn, self.path, table) for table in self.tables]
            installed = {
                row[0]: row[1]
                for row in conn.execute(
                    f"SELECT name, sql FROM sqlite_master WHERE {CAPTURE_TRIGGERS} "
                    "AND name GLOB '*_insert'"
                )
            }
        if any(
            trigger_sql(s, "insert") != installed.get(trigger_name(s.table, "insert"))
            for s in schemas
        ):
            self.install()
        return schemas

    def peek(self, *, max_changes: int) -> CapturedWindow:
        """Up to `max_changes` rows of the change table (each row is its own transaction).

        Built column by column from the change table's JSON texts, with no object per change
        (see `ordo.cdc.change_rows`): the row JSON is already the `cell_values` column, every
        cell written at the change's position. JSON documents a double would round are set
        aside (`ordo.storage.sqlite.change_numbers`).
        """
        with self._db.connection() as conn:
            rows = fetch_change_rows(  # text that is not UTF-8 set aside
                conn,
                "SELECT position, table_name, op, key_json, old_key_json, row_json, "
                f"captured_at_us FROM {CHANGES} WHERE {_of_tables(self.tables)} "
                "ORDER BY position LIMIT ?",
                (*self.tables, max_changes),
            )
            documents = json_columns(conn, self.tables)
        window = ChangeColumns(source=SOURCE, segment=self.name, json_columns=documents)
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
            return _status(conn, self.name, self.tables)

    def snapshot(self, table: str) -> Iterator[Mutation]:
        """The table's current rows as INSERT-like mutations, written at the change table's head.

        Read in one transaction with the head position, so every later change has a higher
        position and wins over the snapshot; the materializer emits them as READ messages. The
        audit segment is `snapshot_segment(name, now)` with row ordinals as positions. JSON
        documents a double would round are set aside as `peek` sets them aside.
        """
        schema = next(s for s in self.schemas() if s.table == table)
        with self._db.write_transaction() as conn:  # one consistent read of rows and head
            head = conn.execute(
                "SELECT seq FROM sqlite_sequence WHERE name = ?", (CHANGES,)
            ).fetchone()
            rows = fetch_change_rows(conn, snapshot_sql(schema))
        write_time = head[0] if head else 0
        captured_at_us = time.time_ns() // 1000
        segment = snapshot_segment(self.name, captured_at_us)
        documents = {c.name for c in schema.value_columns if c.type is ColumnType.JSON}
        for ordinal, (key_json, row_json) in enumerate(rows, start=1):
            yield Mutation(
                table=table,
                partition_key=tuple(parse_json(key_json)),
                cells={
                    column: Cell(value=value, write_time=write_time)
                    for column, value in parse_json(set_aside_rounded(row_json, documents)).items()
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
        for event in EVENTS:
            name = trigger_name(schema.table, event)
            conn.execute(f"DROP TRIGGER IF EXISTS {quote_identifier(name)}")
            conn.execute(trigger_sql(schema, event))

    def _confirmed(self) -> int:
        confirmed = self.status().confirmed_position
        return 0 if confirmed is None else confirmed


def check_capturable(path: Path, tables: Sequence[str]) -> list[TableSchema]:
    """The tables' schemas; refuse a file or a table the capture cannot take (read only).

    CaptureError (or the schema's own error) names the problem; the file is left as it was.
    """
    refuse_one_table_twice(tables)
    with closing(open_read_only(path)) as conn:
        return [read_schema(conn, path, table) for table in tables]


def read_status(path: Path, tables: Sequence[str]) -> SourceStatus:
    """The capture's status in the file at `path`, read only.

    What `ordo status` and `ordo cdc status` show: looking must not install a capture (the
    change table and triggers that log every later write), nor switch the file to WAL. A table
    without the capture's triggers is a CaptureError naming the captured ones.
    """
    with closing(open_read_only(path)) as conn:
        if not has_table(conn, CHANGES):
            msg = f"no capture is installed in {path}: start one with `ordo cdc capture`"
            raise CaptureError(msg)
        captured = sorted(
            str(row[0]).removeprefix("ordo_cdc_").removesuffix("_insert")
            for row in conn.execute(
                f"SELECT name FROM sqlite_master WHERE {CAPTURE_TRIGGERS} AND name GLOB '*_insert'"
            )
        )
        for table in tables:
            if table not in captured:
                msg = f"table {table!r} is not captured in {path} (captured: {', '.join(captured)})"
                raise CaptureError(msg)
        return _status(conn, recorded_segment(conn) or legacy_segment(path), tables)


def _drop_moved_triggers(conn: sqlite3.Connection) -> None:
    """Drop the capture's triggers that sit on another table than the one their name names."""
    for name, table in conn.execute(
        f"SELECT name, tbl_name FROM sqlite_master WHERE {CAPTURE_TRIGGERS}"
    ).fetchall():
        if name not in {trigger_name(table, event) for event in EVENTS}:
            conn.execute(f"DROP TRIGGER {quote_identifier(name)}")


def _of_tables(tables: Sequence[str]) -> str:
    """The condition on the change table's rows of `tables` (one parameter per table).

    The change table holds the rows of every table an earlier capture installed triggers for;
    a capture publishes and forgets only those of the tables it names.
    """
    return f"table_name IN ({', '.join('?' * len(tables))})"


def _status(conn: sqlite3.Connection, name: str, tables: Sequence[str]) -> SourceStatus:
    oldest, newest, waiting = conn.execute(
        f"SELECT MIN(position), MAX(position), COUNT(*) FROM {CHANGES} WHERE {_of_tables(tables)}",
        tuple(tables),
    ).fetchone()
    head = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (CHANGES,)).fetchone()
    return SourceStatus(
        name=name,
        segment=name,
        tables=tuple(tables),
        confirmed_position=(oldest - 1) if oldest is not None else (head[0] if head else None),
        head_position=newest if newest is not None else (head[0] if head else None),
        retained_bytes=None,
        retained_changes=waiting,
    )
