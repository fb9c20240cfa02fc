"""`ordo cdc capture` from SQLite: a snapshot and changes, the partition count it keeps,
and the sources and tables it refuses (of PostgreSQL too) before it changes anything.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from cdc_cli_support import log_files, one_line_error, run_ordo
from ordo.cdc import partition_of
from ordo.storage.parquet import ParquetChangeLog
from postgres_source_support import fresh_slot


def test_capture_publishes_a_snapshot_and_the_changes_of_sqlite_tables(
    tmp_path: Path, journal: str
) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)", [(i, f"i{i}", i) for i in range(5)])
    log = tmp_path / "log"
    args = ("cdc", "capture", str(source), "--table", "items", "--journal", journal)
    code, out, err = run_ordo(*args, "--change-log", str(log), "--snapshot")
    assert code == 0, err
    assert "snapshot items: 5 rows" in err
    assert out == (
        "published a snapshot of items=5, then no changes (skipped 0 already in the log)\n"
    )
    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE items SET qty = 99 WHERE id = 3")
    code, out, err = run_ordo(*args, "--change-log", str(log))
    assert code == 0
    assert out.strip() == "published items=1 (skipped 0 already in the log)"
    assert err.startswith("capturing: published items=1, up to ")
    mutations = list(ParquetChangeLog(log).read("items"))
    assert len(mutations) == 6
    assert sum(m.audit.is_snapshot for m in mutations) == 5

    code, out, _ = run_ordo("cdc", "schemas", "list", "--journal", journal, "--json")
    assert [(v["table"], v["version"], v["accepted"]) for v in json.loads(out)] == [
        ("items", 1, True)
    ]
    code, out, _ = run_ordo(
        "cdc", "status", "--journal", journal, "--change-log", str(log), "--json"
    )
    assert code == 0
    assert json.loads(out)["change_logs"][0]["mutations"] == 6
    code, out, err = run_ordo("cdc", "schemas", "list", "itmes", "--journal", journal)
    assert (code, out) == (0, "")
    assert err == "no schemas registered for table 'itmes' (tables with schemas: items)\n"


def test_capture_refuses_another_partition_count_before_it_changes_the_source(
    tmp_path: Path, journal: str
) -> None:
    source, fresh = tmp_path / "shop.db", tmp_path / "fresh.db"
    for path in (source, fresh):
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, qty INTEGER)")
            conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, i) for i in range(5)])
    log = tmp_path / "log"
    capture = ("cdc", "capture", "--table", "items", "--journal", journal, "--change-log", str(log))
    code, _, err = run_ordo(*capture, str(source), "--snapshot", "--partitions", "4")
    assert code == 0, err
    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE items SET qty = 99 WHERE id = 3")
    before = log_files(log)

    for path in (source, fresh):
        code, out, err = run_ordo(*capture, str(path), "--partitions", "3")
        one_line_error(
            code, err, "PartitionCountMismatchError: table 'items': its change log has 4 partitions"
        )
        assert "use --partitions 4 (partitions=4)" in err
    assert log_files(log) == before
    with sqlite3.connect(fresh) as conn:  # refused before its change triggers were installed
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]
    assert names == ["items"]

    code, out, err = run_ordo(*capture, str(source))  # the log's count, and the change kept for it
    assert code == 0, err
    assert out.strip() == "published items=1 (skipped 0 already in the log)"
    changed = [
        f
        for f in (log / "items").glob("partition=*/*.parquet")
        if str(f.relative_to(log)) not in before
    ]
    assert [f.parent.name for f in changed] == [f"partition={partition_of((3,), 4)}"]


@pytest.mark.parametrize("table", ["items", "nosuch"])
def test_capture_from_a_bad_source_leaves_no_journal_behind(tmp_path: Path, table: str) -> None:
    source = tmp_path / "shop.db"
    if table == "nosuch":
        with sqlite3.connect(source) as conn:
            conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    journal = tmp_path / "new.db"
    code, _, err = run_ordo(
        "cdc", "capture", str(source), "--table", table, "--journal", str(journal)
    )
    one_line_error(code, err, "CaptureError: ")
    assert not journal.exists()


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
@pytest.mark.parametrize("journal_mode", ["delete", "wal"])
def test_a_folder_where_sqlite_keeps_a_file_beside_the_source_is_refused_before_any_change(
    tmp_path: Path, journal: str, journal_mode: str, suffix: str
) -> None:
    """The read-only check passed a `-shm` folder: the capture created its journal, switched the
    source to WAL, then failed with "attempt to write a readonly database" (StorageAccessError,
    a permission problem there was not); a `-wal` or `-journal` folder was "unable to open
    database file" or "disk I/O error". Now a StorageAccessError naming the folder: no retry
    mends it until the folder goes."""
    source = tmp_path / "shop.db"
    with closing(sqlite3.connect(source)) as conn, conn:
        conn.execute(f"PRAGMA journal_mode = {journal_mode}")
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    before = source.read_bytes()
    Path(f"{source}{suffix}").mkdir()
    problem = (
        f"StorageAccessError: cannot open SQLite source database {source}: "
        f"{source}{suffix} is a folder, not the {suffix} file SQLite keeps beside it\n"
    )

    args = ("cdc", "capture", str(source), "--table", "items", "--journal", journal)
    code, _, err = run_ordo(*args, "--change-log", str(tmp_path / "log"))
    one_line_error(code, err, problem)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["shop.db", f"shop.db{suffix}"]
    assert source.read_bytes() == before

    assert run_ordo("init", "--journal", journal)[0] == 0
    code, _, err = run_ordo(
        "cdc", "status", "--source", str(source), "--table", "items", "--journal", journal
    )
    one_line_error(code, err, problem)
    assert source.read_bytes() == before


@pytest.mark.parametrize("command", [("cdc", "capture"), ("cdc", "status", "--source")])
def test_a_source_that_is_not_sqlite_is_one_line(
    tmp_path: Path, journal: str, command: tuple[str, ...]
) -> None:
    assert run_ordo("init", "--journal", journal)[0] == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 100)
    code, _, err = run_ordo(*command, str(notes), "--table", "items", "--journal", journal)
    one_line_error(code, err, f"CaptureError: cannot read {notes} as an SQLite database: ")
    assert notes.read_text().startswith("not a database")


@pytest.mark.parametrize("command", [("cdc", "capture"), ("cdc", "status", "--source")])
def test_a_source_url_of_an_unknown_scheme_is_called_a_source(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """The URL parser is the journal's: its error must name what the URL is for."""
    journal = tmp_path / "ordo.db"
    if command[1] == "status":
        assert run_ordo("init", "--journal", str(journal))[0] == 0
    code, _, err = run_ordo(*command, "mysql://x/y", "--table", "t", "--journal", str(journal))
    one_line_error(
        code,
        err,
        "UnknownUrlSchemeError: unknown source URL scheme 'mysql' in 'mysql://x/y'; use one of: "
        "sqlite, postgresql, postgres",
    )
    assert journal.exists() == (command[1] == "status")  # a capture creates no journal


def test_capture_refuses_a_table_without_primary_key(tmp_path: Path, journal: str) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE loose (name TEXT)")
    code, _, err = run_ordo("cdc", "capture", str(source), "--table", "loose", "--journal", journal)
    one_line_error(
        code,
        err,
        "NoPrimaryKeyError: table 'loose' has no primary key: CDC keys its change log and rows "
        "by it; SQLite cannot add one to an existing table: create it again with a PRIMARY KEY "
        "(and copy its rows over) to capture it",
    )
    assert "schema" not in err  # a captured table's schema is the catalog's: nothing to declare


@pytest.mark.postgres
def test_capture_refuses_an_unlogged_table_naming_it_as_sql_spells_it(
    tmp_path: Path, journal: str, postgres_dsn: str
) -> None:
    """No change of it would ever be decoded; the advice quotes the name the ALTER needs."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute('CREATE UNLOGGED TABLE "Items" (id int PRIMARY KEY)')
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    slot = fresh_slot()
    args = ("cdc", "capture", postgres_dsn, "--slot", slot, "--table", "Items")
    code, _, err = run_ordo(*args, "--journal", journal)
    one_line_error(
        code,
        err,
        "CaptureError: table 'Items' is UNLOGGED: its writes reach no WAL, so no change of it is "
        f'decoded; run ALTER TABLE {row[0]}."Items" SET LOGGED to capture it',
    )
    assert not (tmp_path / "ordo.db").exists()


@pytest.mark.postgres
def test_capture_takes_a_quoted_table_name_holding_a_dot(
    tmp_path: Path, journal: str, postgres_dsn: str
) -> None:
    """Split at its last dot, `--table '"my.table"'` was a table that "does not exist"."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute('CREATE TABLE "my.table" (id int PRIMARY KEY)')
        conn.execute('INSERT INTO "my.table" VALUES (1), (2)')
    slot = fresh_slot()
    args = ("cdc", "capture", postgres_dsn, "--slot", slot, "--table", '"my.table"')
    try:
        code, out, err = run_ordo(
            *args, "--journal", journal, "--change-log", str(tmp_path / "log"), "--snapshot"
        )
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )
    assert code == 0, err
    assert out == (
        'published a snapshot of "my.table"=2, then no changes (skipped 0 already in the log)\n'
    )


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('"my.table', "has a double quote that does not open or close a whole name"),
        ("db.public.items", "has 3 dot-separated names: give table or schema.table"),
        ("public.", "has an empty name"),
    ],
)
def test_capture_refuses_a_malformed_table_name_in_one_line(
    tmp_path: Path, journal: str, postgres_dsn: str, table: str, problem: str
) -> None:
    code, _, err = run_ordo("cdc", "capture", postgres_dsn, "--table", table, "--journal", journal)
    one_line_error(code, err, f"ConfigurationError: table {table!r} {problem}")
    assert not (tmp_path / "ordo.db").exists()


def test_a_source_sqlite_may_only_read_is_named_as_the_source_database(
    tmp_path: Path, journal: str
) -> None:
    """It was "cannot open SQLite journal": the journal was fine, the source was not.

    A file format newer than this SQLite writes (write version 3) stands for every file SQLite
    opens read-only: these tests run as root, which a read-only file does not stop.
    """
    source = tmp_path / "shop.db"
    with closing(sqlite3.connect(source)) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    with source.open("r+b") as file:
        file.seek(18)  # the file format's write version
        file.write(b"\x03")
    args = ("cdc", "capture", str(source), "--table", "items", "--journal", journal)
    code, _, err = run_ordo(*args, "--change-log", str(tmp_path / "log"))
    one_line_error(
        code,
        err,
        f"StorageAccessError: cannot open SQLite source database {source}: "
        "attempt to write a readonly database\n",
    )
