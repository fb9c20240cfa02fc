"""A change log's folders and files that are not what they should be: a folder that is a file,
a `.parquet` file that is not Parquet, a folder that is no partition. Each is one line naming
the path, not a traceback, and a refused command changes nothing.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from cdc_cli_support import log_files, one_line_error, readings, registered, run_ordo
from ordo.storage.parquet.partition_record import PARTITIONS_RECORD
from permission_support import locked_out


def test_ingest_refuses_a_change_log_under_a_file(tmp_path: Path, journal: str) -> None:
    ingest = registered(tmp_path, journal)
    (tmp_path / "notes").write_text("mine")
    log = tmp_path / "notes" / "log"
    lines = tmp_path / "readings.jsonl"
    lines.write_text(readings() + "\n")
    code, _, err = run_ordo(*ingest, "--change-log", str(log), str(lines))
    one_line_error(code, err, f"StorageAccessError: cannot write change log {log}: File exists: ")
    assert (tmp_path / "notes").read_text() == "mine"


@pytest.mark.parametrize("command", ["ingest", "capture"])
def test_a_table_whose_change_log_is_a_file_is_refused_before_anything_changes(
    tmp_path: Path, journal: str, command: str
) -> None:
    """Found only when the table's first file was written: after a capture's triggers."""
    ingest = registered(tmp_path, journal)
    log = tmp_path / "log"
    log.mkdir()
    (log / "readings").write_text("mine")
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE readings (id INTEGER PRIMARY KEY, label TEXT)")
    lines = tmp_path / "readings.jsonl"
    lines.write_text(readings() + "\n")
    args = {
        "ingest": (*ingest, str(lines)),
        "capture": ("cdc", "capture", str(source), "--table", "readings", "--journal", journal),
    }[command]
    code, _, err = run_ordo(*args, "--change-log", str(log))
    one_line_error(
        code,
        err,
        f"StorageIntegrityError: the change log of table 'readings', {log / 'readings'}, "
        "is not a folder",
    )
    assert log_files(log) == {"readings": b"mine"}
    with sqlite3.connect(source) as conn:  # no change table, no triggers
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("readings",)]


@pytest.mark.parametrize("command", [("cdc", "status"), ("status",)])
def test_status_names_a_change_log_file_that_is_not_parquet(
    tmp_path: Path, journal: str, command: tuple[str, ...]
) -> None:
    ingest = registered(tmp_path, journal)
    assert run_ordo(*ingest, stdin=readings())[0] == 0
    stray = next((tmp_path / "log" / "readings").glob("partition=*")) / "seg-7-7.parquet"
    stray.write_text("not Parquet")
    code, _, err = run_ordo(*command, "--journal", journal, "--change-log", str(tmp_path / "log"))
    one_line_error(code, err, f"StorageIntegrityError: change log file {stray} cannot be read")


def test_folders_that_are_no_partition_are_not_the_logs(tmp_path: Path, journal: str) -> None:
    """A log written before partition counts were recorded counts its partition folders."""
    ingest = registered(tmp_path, journal)
    assert run_ordo(*ingest, stdin=readings())[0] == 0
    table = tmp_path / "log" / "readings"
    (table / PARTITIONS_RECORD).unlink()
    (table / "partition=old").mkdir()
    (table / "partition=old" / "copy.parquet").write_text("not the log's")
    status = ("cdc", "status", "--journal", journal, "--change-log", str(tmp_path / "log"))
    code, out, err = run_ordo(*status, "--json")
    assert code == 0, err
    (summary,) = json.loads(out)["change_logs"]
    assert (summary["partitions"], summary["files"], summary["mutations"]) == (1, 1, 1)
    code, out, err = run_ordo(*ingest, stdin=readings(position=2))
    assert code == 0, err
    assert out == "stdin: published 1, skipped 0\n"


_REFUSED_TO_EVERYONE = Path("/proc/sys/vm/drop_caches")
"""A file the kernel lets no one read, root included (it is write-only): these tests run as root,
which a file's permissions do not stop."""


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ("folder", "StorageAccessError: {doing}: Is a directory: {record}"),
        ("unreadable", "StorageAccessError: {doing}: Permission denied: {record}"),
    ],
)
def test_a_partition_count_that_cannot_be_read_is_named_and_a_permission_is_no_outage(
    tmp_path: Path, journal: str, record: str, problem: str
) -> None:
    """A permission was StorageUnavailableError, which a capture retried as an outage."""
    ingest = registered(tmp_path, journal)
    assert run_ordo(*ingest, stdin=readings())[0] == 0
    table = tmp_path / "log" / "readings"
    (table / PARTITIONS_RECORD).unlink()
    if record == "folder":
        (table / PARTITIONS_RECORD).mkdir()
    else:
        (table / PARTITIONS_RECORD).symlink_to(_REFUSED_TO_EVERYONE)
    code, _, err = run_ordo(*ingest, stdin=readings(position=2))
    doing = f"cannot read the partition count of change log {table}"
    one_line_error(code, err, problem.format(doing=doing, record=table / PARTITIONS_RECORD))


def test_a_capture_stops_at_a_partition_folder_that_is_a_file_without_retrying_it(
    tmp_path: Path, journal: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found when a window is published, which a capture retries on an outage: "File exists"
    was StorageUnavailableError, retried (a WARNING each time) for the whole reconnect timeout,
    for a file that no retry moves out of the way."""
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    log = tmp_path / "log"
    capture = (
        *("cdc", "capture", str(source), "--table", "items", "--journal", journal),
        *("--change-log", str(log), "--reconnect-timeout-ms", "60000"),
    )
    assert run_ordo(*capture)[0] == 0  # installs the triggers
    (log / "items").mkdir(parents=True, exist_ok=True)
    for partition in range(8):  # the default count: whichever the row's key goes to
        (log / "items" / f"partition={partition}").write_text("mine")
    with sqlite3.connect(source) as conn:
        conn.execute("INSERT INTO items VALUES (1, 'a')")
    caplog.set_level(logging.WARNING, logger="ordo")

    code, _, err = run_ordo(*capture)

    one_line_error(code, err, f"StorageAccessError: cannot write change log {log}: File exists: ")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    with sqlite3.connect(source) as conn:  # nothing published, so nothing forgotten
        assert conn.execute("SELECT count(*) FROM ordo_cdc_changes").fetchone() == (1,)


@pytest.mark.parametrize("command", [("cdc", "status"), ("status",)])
def test_status_refuses_a_partition_folder_it_cannot_list(
    tmp_path: Path, journal: str, command: tuple[str, ...]
) -> None:
    """It showed "0 mutations in 0 files": pathlib's glob skipped the folder without a word.

    `locked_out` (tests/permission_support.py): a folder's mode stops root there.
    """
    ingest = registered(tmp_path, journal)
    assert run_ordo(*ingest, stdin=readings())[0] == 0
    log = tmp_path / "log"
    partition = next((log / "readings").glob("partition=*"))
    args = (*command, "--journal", journal, "--change-log", str(log))
    code, _, err = locked_out(partition, lambda: run_ordo(*args))
    one_line_error(
        code,
        err,
        f"StorageAccessError: cannot read change log {log}: Permission denied: {partition}",
    )


def test_status_refuses_a_change_log_in_a_folder_it_may_not_look_in(
    tmp_path: Path, journal: str
) -> None:
    """The bare PermissionError of the look at whether the named --change-log is a folder."""
    ingest = registered(tmp_path, journal)
    locked = tmp_path / "locked"
    log = locked / "log"
    assert run_ordo(*ingest[:-1], str(log), stdin=readings())[0] == 0
    status = ("cdc", "status", "--journal", journal, "--change-log", str(log))
    code, _, err = locked_out(locked, lambda: run_ordo(*status))
    one_line_error(
        code, err, f"StorageAccessError: cannot read change log {log}: Permission denied: {log}"
    )


def test_materialize_refuses_a_table_folder_it_cannot_list_before_spark_starts(
    tmp_path: Path, journal: str
) -> None:
    """Spark started, and its query failed on the folder (AccessDeniedException)."""
    ingest = registered(tmp_path, journal)
    assert run_ordo(*ingest, stdin=readings())[0] == 0
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    materialize = (
        *("cdc", "materialize", "readings", "--journal", journal, "--master", "local[1]"),
        *("--change-log", str(log), "--checkpoint", str(checkpoint)),
    )
    code, _, err = locked_out(log / "readings", lambda: run_ordo(*materialize))
    one_line_error(
        code,
        err,
        f"StorageAccessError: cannot read change log {log}: Permission denied: {log / 'readings'}",
    )
    assert not checkpoint.exists()
