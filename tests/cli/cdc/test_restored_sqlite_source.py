"""`ordo cdc capture` of an SQLite file restored from a copy: its change table went back.

The change table's rowid is the position (AUTOINCREMENT, its head in `sqlite_sequence`), and
both live in the file: a copy put back takes up the positions it had when it was copied, so
its new writes are captured at positions the change log already holds for the changes made
after the copy. Skipped as published, they were lost without a word and deleted at the
source. docs/cdc.md ("Limits") promises the capture stops with SourceRewoundError before it
publishes or advances anything, at every run, and that capturing afresh with `--snapshot` into
a new change log is the way on.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from cdc_cli_support import capture_orders, log_files, one_line_error, run_ordo
from ordo.cdc.mutation import SNAPSHOT_MARK
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.sqlite.change_source import read_status
from sqlite_support import run_sql

_FILES = ("", "-wal", "-shm")
"""The source file and the WAL files of a live SQLite database, copied and put back together."""


def _copy(source: Path, to: Path) -> None:
    """Copy the database `source` to `to` as a backup does: the file with its WAL, if any."""
    for suffix in _FILES:
        copied, target = Path(f"{source}{suffix}"), Path(f"{to}{suffix}")
        target.unlink(missing_ok=True)
        if copied.exists():
            shutil.copyfile(copied, target)


def _waiting(source: Path) -> list[tuple[object, ...]]:
    """The change table's rows: the changes the source still has to publish."""
    with closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT * FROM ordo_cdc_changes ORDER BY position").fetchall()


def _orders(log: Path) -> dict[int, int]:
    """The quantity of each order as the change log's rows fold: the last one by position,
    a snapshot's rows (read after every change before them) before the changes at the head."""
    rows = sorted(
        ParquetChangeLog(log).read("orders"),
        key=lambda m: (m.cells["qty"].write_time, SNAPSHOT_MARK not in m.audit.segment),
    )
    return {int(str(m.partition_key[0])): int(str(m.cells["qty"].value)) for m in rows}


def test_a_source_restored_from_a_copy_is_refused_until_captured_afresh(
    tmp_path: Path, journal: str
) -> None:
    """Orders 1..3 were captured, the file copied, and each order updated and captured (positions
    4..6). The copy put back updates them again at 4..6, with other quantities: the capture is
    refused, one line and status 1, at every run, with the log and the change table as they
    were; a capture with `--snapshot` into a new change log has the restored source's rows."""
    source, log = tmp_path / "shop.db", tmp_path / "log"
    run_sql(source, "CREATE TABLE orders (id INTEGER PRIMARY KEY, qty INTEGER)")
    assert capture_orders(log, journal, str(source)).startswith("published no changes")
    run_sql(source, *(f"INSERT INTO orders VALUES ({i}, {i})" for i in (1, 2, 3)))
    assert capture_orders(log, journal, str(source)).startswith("published orders=3 ")
    _copy(source, tmp_path / "backup.db")
    run_sql(source, *(f"UPDATE orders SET qty = {10 * i} WHERE id = {i}" for i in (1, 2, 3)))
    assert capture_orders(log, journal, str(source)).startswith("published orders=3 ")
    assert _orders(log) == {1: 10, 2: 20, 3: 30}

    _copy(tmp_path / "backup.db", source)  # the source restored
    run_sql(source, *(f"UPDATE orders SET qty = {100 * i} WHERE id = {i}" for i in (1, 2, 3)))
    files, waiting = log_files(log), _waiting(source)
    assert [row[0] for row in waiting] == [4, 5, 6]
    status = read_status(source, ["orders"])
    for _ in range(2):
        code, _out, err = run_ordo(
            "cdc", "capture", str(source), "--table", "orders", "--change-log", str(log),
            "--journal", journal,
        )  # fmt: skip
        one_line_error(code, err, "SourceRewoundError: table 'orders', segment 'sqlite:shop.db.")
        assert "the source committed a change at position 4," in err
        assert log_files(log) == files
        assert _waiting(source) == waiting
        assert read_status(source, ["orders"]) == status

    # the way on: the tables captured afresh, with --snapshot, into a new change log
    fresh = tmp_path / "fresh-log"
    code, out, err = run_ordo(
        "cdc", "capture", str(source), "--table", "orders", "--change-log", str(fresh),
        "--journal", journal, "--snapshot",
    )  # fmt: skip
    assert code == 0, err
    assert out.strip() == (
        "published a snapshot of orders=3, then orders=3 (skipped 0 already in the log)"
    )
    assert _orders(fresh) == {1: 100, 2: 200, 3: 300}
    assert _waiting(source) == []
    run_sql(source, "UPDATE orders SET qty = 7 WHERE id = 2")
    assert capture_orders(fresh, journal, str(source)).startswith("published orders=1 ")
    assert _orders(fresh) == {1: 100, 2: 7, 3: 300}
    code, out, err = run_ordo(
        "cdc", "status", "--source", str(source), "--table", "orders", "--journal", journal,
        "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["sources"][0]["name"] == status.name
