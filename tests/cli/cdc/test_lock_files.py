"""Lock files a job cannot make: one line naming the lock file, not the OSError's traceback;
a capture refused its lock (made or held, of an SQLite file or a PostgreSQL slot) leaves no
journal, change log or schema behind.

A folder in the lock file's place stands for every lock file the OS refuses: these tests run as
root, which no permission stops (a capture of a source in a read-only folder failed the same way).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from cdc_cli_support import one_line_error, readings, registered, run_ordo
from ordo.storage.change_sources import change_source_at
from ordo.storage.lock_file import LOCK_FILE, exclusive_lock
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import fresh_slot


def test_capture_names_a_lock_file_it_cannot_make(tmp_path: Path, journal: str) -> None:
    """Refused before the journal is opened: it was created (and the schema registered)."""
    source = _source(tmp_path)
    lock = tmp_path / "shop.db-ordo-capture.lock"
    lock.mkdir()
    log = tmp_path / "log"
    capture = ("cdc", "capture", str(source), "--table", "items", "--journal", journal)
    code, _, err = run_ordo(*capture, "--change-log", str(log))
    one_line_error(
        code, err, f"StorageAccessError: cannot take the lock file {lock}: Is a directory"
    )
    with sqlite3.connect(source) as conn:  # no change table, no triggers
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("items",)]
    assert not log.exists()
    assert not (tmp_path / "ordo.db").exists()


def test_a_capture_of_a_held_source_registers_no_schema(tmp_path: Path, journal: str) -> None:
    """The schema was registered in the journal before the second capture was refused."""
    assert run_ordo("init", "--journal", journal)[0] == 0
    source = _source(tmp_path)
    running = f"a capture of {source} is already running"
    capture = ("cdc", "capture", str(source), "--table", "items", "--journal", journal)
    with exclusive_lock(tmp_path / "shop.db-ordo-capture.lock", running):
        code, _, err = run_ordo(*capture, "--change-log", str(tmp_path / "log"))
    one_line_error(code, err, f"AlreadyRunningError: {running} (pid ")
    assert run_ordo("cdc", "schemas", "list", "--journal", journal)[2] == (
        "no schemas registered\n"
    )


@pytest.mark.postgres
def test_a_capture_of_a_held_slot_leaves_no_journal_or_change_log(
    tmp_path: Path, journal: str, postgres_dsn: str
) -> None:
    """The slot's capture lock was taken after the journal was opened, the schema registered
    and the change log's folder made: the refused capture left them behind."""
    slot = fresh_slot()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY)")
    log = tmp_path / "log"
    capture = ("cdc", "capture", postgres_dsn, "--slot", slot, "--table", "items")
    try:
        with change_source_at(postgres_dsn, ["items"], slot=slot):  # a capture of the slot runs
            code, _, err = run_ordo(*capture, "--journal", journal, "--change-log", str(log))
    finally:
        with PostgresChangeSource(postgres_dsn, slot=slot, tables=["items"]) as source:
            source.drop()
    one_line_error(
        code, err, f"AlreadyRunningError: a capture of slot {slot!r} is already running ("
    )
    assert not log.exists()
    assert not (tmp_path / "ordo.db").exists()


def _source(tmp_path: Path) -> Path:
    """An SQLite source with an `items` table to capture."""
    source = tmp_path / "shop.db"
    with closing(sqlite3.connect(source)) as conn, conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    return source


def test_materialize_names_a_lock_file_it_cannot_make(tmp_path: Path, journal: str) -> None:
    """Refused before Spark starts, as a checkpoint another run holds is."""
    ingest = registered(tmp_path, journal)
    assert run_ordo(*ingest, stdin=readings())[0] == 0
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / LOCK_FILE).mkdir(parents=True)
    code, _, err = run_ordo(
        "cdc",
        "materialize",
        "readings",
        "--journal",
        journal,
        "--change-log",
        str(tmp_path / "log"),
        "--checkpoint",
        str(checkpoint),
    )
    one_line_error(
        code,
        err,
        f"StorageAccessError: cannot take the lock file {checkpoint / LOCK_FILE}: Is a directory",
    )
