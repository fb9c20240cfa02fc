"""Lock files a job cannot make: one line naming the lock file, not the OSError's traceback.

A folder in the lock file's place stands for every lock file the OS refuses: these tests run as
root, which no permission stops (a capture of a source in a read-only folder failed the same way).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cdc_cli_support import one_line_error, readings, registered, run_ordo
from ordo.storage.lock_file import LOCK_FILE


def test_capture_names_a_lock_file_it_cannot_make(tmp_path: Path, journal: str) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    lock = tmp_path / "shop.db-ordo-capture.lock"
    lock.mkdir()
    log = tmp_path / "log"
    capture = ("cdc", "capture", str(source), "--table", "items", "--journal", journal)
    code, _, err = run_ordo(*capture, "--change-log", str(log))
    one_line_error(
        code, err, f"StorageUnavailableError: cannot take the lock file {lock}: Is a directory"
    )
    with sqlite3.connect(source) as conn:  # no change table, no triggers
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("items",)]
    assert not log.exists()


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
        f"StorageUnavailableError: cannot take the lock file {checkpoint / LOCK_FILE}: "
        "Is a directory",
    )
