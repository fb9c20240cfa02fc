"""SQLite capture by triggers: every kind of write becomes a mutation, peek and advance, the
snapshot, and the tables refused.

The capture loop over it is in test_sqlite_source_capture, the values SQLite holds that JSON
cannot in test_sqlite_source_values (the `database` and `source` fixtures are in conftest.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ordo.cdc import ColumnType
from ordo.cdc.change_rows import key_text
from ordo.errors import (
    CaptureError,
    JsonKeyColumnError,
    NoPrimaryKeyError,
    UnmappableColumnTypeError,
)
from ordo.storage.sqlite.change_source import SQLiteChangeSource
from sqlite_support import fingerprint, run_sql


def test_schemas_come_from_the_catalog(source: SQLiteChangeSource) -> None:
    users, orders = source.schemas()
    assert [(c.name, c.type, c.nullable) for c in users.columns] == [
        ("id", ColumnType.LONG, False),
        ("name", ColumnType.STRING, False),
        ("active", ColumnType.BOOLEAN, True),
        ("photo", ColumnType.BYTES, True),
        ("score", ColumnType.DOUBLE, True),
    ]
    assert orders.partition_key == ("id", "line")


def test_inserts_updates_deletes_and_key_changes_become_mutations(
    source: SQLiteChangeSource, database: Path
) -> None:
    run_sql(
        database,
        "INSERT INTO users VALUES (1, 'ada', 1, x'0102', 1.5)",
        "UPDATE users SET score = 2.5 WHERE id = 1",
        "UPDATE users SET id = 2 WHERE id = 1",
        "DELETE FROM users WHERE id = 2",
    )
    window = source.peek(max_changes=10)
    kinds = [
        (m.partition_key, m.liveness is not None, m.row_deleted_at is not None)
        for m in window.mutations
    ]
    assert kinds == [
        ((1,), True, False),
        ((1,), True, False),
        ((1,), False, True),
        ((2,), True, False),
        ((2,), False, True),
    ]
    first = window.mutations[0]
    assert {c: cell.value for c, cell in first.cells.items()} == {
        "name": "ada",
        "active": True,
        "photo": "0102",
        "score": 1.5,
    }
    positions = [m.audit.position for m in window.mutations]
    assert positions == sorted(positions)
    assert window.up_to == positions[-1]


def test_keys_get_the_change_logs_key_text_whatever_sqlite_wrote(
    source: SQLiteChangeSource, database: Path
) -> None:
    ids = ["plain id", "zoë", 'a"b', "tab\there", "1.5"]
    run_sql(
        database,
        *(f"INSERT INTO orders VALUES ('{i.replace(chr(39), chr(39) * 2)}', 2, 1)" for i in ids),
    )
    run_sql(database, "INSERT INTO orders VALUES (1.5, 2.5, 1)")  # a REAL in an INTEGER column
    rows = source.peek(max_changes=10).rows
    expected = [*((i, 2) for i in ids), ("1.5", 2.5)]
    assert rows.column("partition_key") == [key_text(k) for k in expected]
    assert [m.partition_key for m in rows.mutations()] == expected


def test_peek_does_not_consume_and_advance_forgets(
    source: SQLiteChangeSource, database: Path
) -> None:
    run_sql(
        database, "INSERT INTO orders VALUES ('a', 1, 3)", "INSERT INTO orders VALUES ('a', 2, 4)"
    )
    first = source.peek(max_changes=1)
    assert source.peek(max_changes=1) == first
    source.advance(up_to=first.up_to)
    second = source.peek(max_changes=10)
    assert [m.partition_key for m in second.mutations] == [("a", 2)]
    assert source.status().retained_changes == 1


def test_a_capture_takes_and_forgets_only_the_changes_of_its_tables(
    source: SQLiteChangeSource, database: Path
) -> None:
    """Triggers an earlier capture installed keep logging other tables' changes: those wait for
    the capture that names them (and its schema checks) instead of being published here."""
    run_sql(
        database,
        "INSERT INTO users (id, name) VALUES (1, 'a')",
        "INSERT INTO orders VALUES ('o', 1, 2)",
    )
    orders_only = SQLiteChangeSource(database, ["orders"])
    try:
        window = orders_only.peek(max_changes=10)
        orders_only.advance(up_to=window.up_to)
        assert orders_only.status().retained_changes == 0
    finally:
        orders_only.close()

    assert [m.table for m in window.mutations] == ["orders"]
    assert [m.table for m in source.peek(max_changes=10).mutations] == ["users"]
    assert source.status().retained_changes == 1


def test_a_renamed_tables_old_triggers_are_dropped_by_the_next_install(
    source: SQLiteChangeSource, database: Path
) -> None:
    """SQLite moves a table's triggers with it on RENAME, but their change rows still name the
    old table: every write of the renamed table was logged twice, once under a name no capture
    of it publishes (the change table grew for good), or published to a new table of the old
    name."""
    run_sql(database, "ALTER TABLE orders RENAME TO lines")
    renamed = SQLiteChangeSource(database, ["lines"])
    try:
        renamed.install()
        run_sql(database, "INSERT INTO lines VALUES ('o', 1, 2)")
        window = renamed.peek(max_changes=10)
        with sqlite3.connect(database) as conn:
            logged = conn.execute("SELECT table_name FROM ordo_cdc_changes").fetchall()
            triggers = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'lines'"
            ).fetchall()
    finally:
        renamed.close()
    assert [m.table for m in window.mutations] == ["lines"]
    assert logged == [("lines",)]
    assert sorted(name for (name,) in triggers) == [
        "ordo_cdc_lines_delete",
        "ordo_cdc_lines_insert",
        "ordo_cdc_lines_update",
    ]


def test_an_install_keeps_the_applications_own_triggers(database: Path) -> None:
    """The capture found its triggers by LIKE 'ordo_cdc_%', where `_` is any character and case
    is ignored: an install dropped the application's `ORDO-CDC-audit` as a moved one of its own.
    """
    run_sql(
        database,
        "CREATE TABLE audit (at TEXT)",
        'CREATE TRIGGER "ORDO-CDC-audit" AFTER INSERT ON users '
        "BEGIN INSERT INTO audit VALUES ('x'); END",
    )
    source = SQLiteChangeSource(database, ["users"])
    try:
        source.install()
    finally:
        source.close()
    run_sql(database, "INSERT INTO users (id, name) VALUES (1, 'ada')")
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT COUNT(*) FROM audit").fetchone() == (1,)


def test_snapshot_reads_existing_rows_at_the_head(
    source: SQLiteChangeSource, database: Path
) -> None:
    run_sql(database, "INSERT INTO users VALUES (7, 'bob', 0, NULL, NULL)")
    rows = list(source.snapshot("users"))
    assert len(rows) == 1
    assert rows[0].audit.is_snapshot
    assert rows[0].cells["active"].value is False
    assert rows[0].liveness is not None
    assert rows[0].liveness.write_time == source.peek(max_changes=10).up_to


def test_bad_tables_are_rejected(database: Path) -> None:
    run_sql(database, "CREATE TABLE loose (a TEXT)", "CREATE TABLE odd (id INTEGER PRIMARY KEY, x)")
    with pytest.raises(NoPrimaryKeyError, match="loose"):
        SQLiteChangeSource(database, ["loose"]).install()
    with pytest.raises(UnmappableColumnTypeError, match="'x'"):
        SQLiteChangeSource(database, ["odd"]).install()
    with pytest.raises(CaptureError, match="missing"):
        SQLiteChangeSource(database, ["missing"]).install()
    with pytest.raises(CaptureError, match="no SQLite database at"):
        SQLiteChangeSource(database.parent / "typo.db", ["users"])
    assert not (database.parent / "typo.db").exists()


def test_two_names_of_one_table_are_refused_before_anything_is_installed(database: Path) -> None:
    """SQLite names a table without regard to ASCII case: `orders` and `ORDERS` were captured
    as two tables, each row snapshotted into the change log of each name, but its changes
    published under the name whose triggers were installed last only (as on PostgreSQL)."""
    before = fingerprint(database)
    with pytest.raises(CaptureError) as refused:
        SQLiteChangeSource(database, ["orders", "users", "ORDERS"])
    assert str(refused.value) == "tables 'orders' and 'ORDERS' are one table: name it once"
    assert fingerprint(database) == before


def test_a_table_without_a_key_or_types_is_refused_for_its_key_naming_the_columns_to_type(
    database: Path,
) -> None:
    """Adding the key means creating the table again, which is when the types are declared:
    refused for the types first, the table would be created again twice."""
    run_sql(database, "CREATE TABLE bare (a, b TEXT, c)")
    with pytest.raises(NoPrimaryKeyError) as refused:
        SQLiteChangeSource(database, ["bare"]).install()
    assert str(refused.value) == (
        "table 'bare' has no primary key: CDC keys its change log and rows by it; SQLite cannot "
        "add one to an existing table: create it again with a PRIMARY KEY and a type for 'a', "
        "'c' (and copy its rows over) to capture it"
    )


def test_a_table_keyed_by_a_json_column_is_refused_before_anything_is_installed(
    database: Path,
) -> None:
    """SQLite holds `{"a": 1}` and `{"a":1}` as two rows; their keys rendered as JSON were one,
    so the materialized table held one row for both (and a delete of either deleted it)."""
    run_sql(
        database,
        "CREATE TABLE docs (k JSON PRIMARY KEY, n INTEGER)",
        """INSERT INTO docs VALUES ('{"a": 1}', 1), ('{"a":1}', 2)""",
    )
    before = fingerprint(database)
    with pytest.raises(JsonKeyColumnError) as refused:
        SQLiteChangeSource(database, ["users", "docs"]).install()
    assert str(refused.value) == (
        "table 'docs': key column 'k' holds JSON, which cannot key captured rows (CDC keys rows "
        "by the JSON text of scalar key values: JSON the source holds as two rows could be one "
        "key, and an object or array is no scalar); declare it TEXT, which captures the text "
        "the application stored (create the table again and copy its rows over) to capture it"
    )
    assert fingerprint(database) == before  # not even the other table's triggers


def test_a_text_key_holding_json_text_is_captured_as_that_text(database: Path) -> None:
    """A TEXT key is the text SQLite compares, whatever it looks like, in the snapshot and
    in the triggers' changes alike: `{"a": 1}` and `{"a":1}` are two keys."""
    keys = ('{"a": 1}', '{"a":1}', "[1, 2]", '"s"', "null")
    run_sql(database, "CREATE TABLE docs (k TEXT PRIMARY KEY, n INTEGER)")
    source = SQLiteChangeSource(database, ["docs"])
    try:
        source.install()
        run_sql(database, *(f"INSERT INTO docs VALUES ('{k}', {n})" for n, k in enumerate(keys)))
        snapshot = [m.partition_key for m in source.snapshot("docs")]
        changes = source.peek(max_changes=10).rows
    finally:
        source.close()
    assert sorted(snapshot) == sorted((k,) for k in keys)
    assert [m.partition_key for m in changes.mutations()] == [(k,) for k in keys]
    assert list(changes.column("partition_key")) == [key_text((k,)) for k in keys]
