"""SQLite rebuilds a materialized table to retype a column: what was made on it survives."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cdc_support import history_of
from ordo.cdc import Audit, ChangeMessage, ChangeOp, Column, ColumnType, JsonValue, TableSchema
from ordo.cdc.message_rows import MessageRows
from ordo.storage.open import stores_at
from ordo.storage.sql_change_sink import SqlChangeSink

ID = Column(name="id", type=ColumnType.LONG, nullable=False)
V1 = TableSchema(
    table="t", columns=(ID, Column(name="n", type=ColumnType.LONG)), partition_key=("id",)
)
V2 = TableSchema(
    table="t", columns=(ID, Column(name="n", type=ColumnType.STRING)), partition_key=("id",)
)


def _apply(sink: SqlChangeSink, batch_id: int, schema: TableSchema, key: int, n: JsonValue) -> None:
    """Batch `batch_id`: row `key` created with `n` (`n` was a long before V2)."""
    message = ChangeMessage(
        table="t",
        op=ChangeOp.CREATE,
        key=(key,),
        before=None,
        after={"id": key, "n": n},
        schema_id=1,
        write_time=1,
        audit=Audit(source="test", position=key),
    )
    sink.apply_batch(
        materializer="m",
        query_id="q",
        batch_id=batch_id,
        target_table="t_materialized",
        messages=MessageRows.from_messages([message]),
        history=history_of(schema, former_types={"n": (ColumnType.LONG,)}),
    )


def test_a_retype_keeps_the_tables_indexes_triggers_and_views(tmp_path: Path) -> None:
    """The rebuild creates them again, keeps a hand-made column's NOT NULL and default (an
    expression too, in a table made by hand), and a view naming the table does not stop its
    rename."""
    path = tmp_path / "sink.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE t_materialized (id INTEGER NOT NULL, n INTEGER, "
            "by_hand TEXT NOT NULL DEFAULT (lower('ME')), PRIMARY KEY (id))"
        )
        conn.execute("CREATE INDEX t_n ON t_materialized (n)")
        conn.execute("CREATE TABLE seen (id INTEGER)")
        conn.execute(
            "CREATE TRIGGER t_seen AFTER UPDATE ON t_materialized "
            "BEGIN INSERT INTO seen VALUES (new.id); END"
        )
        conn.execute("CREATE VIEW t_view AS SELECT n FROM t_materialized")
    with stores_at(f"sqlite:///{path}") as stores:
        _apply(stores.change_sink, 0, V1, 1, 5)
        _apply(stores.change_sink, 1, V2, 2, "x")

    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT n FROM t_view ORDER BY n").fetchall() == [("5",), ("x",)]
        columns = 'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)'
        assert conn.execute(columns, ("t_materialized",)).fetchall() == [
            ("id", "INTEGER", 1, None, 1),
            ("n", "TEXT", 0, None, 0),
            ("by_hand", "TEXT", 1, "lower('ME')", 0),
        ]
        assert conn.execute("SELECT DISTINCT by_hand FROM t_materialized").fetchall() == [("me",)]
        made = (
            "SELECT type, name FROM sqlite_master WHERE tbl_name = 't_materialized' "
            "AND type IN ('index', 'trigger') ORDER BY name"
        )
        assert conn.execute(made).fetchall() == [("index", "t_n"), ("trigger", "t_seen")]
        assert conn.execute("SELECT id FROM seen").fetchall() == [(1,)]  # the converted row
