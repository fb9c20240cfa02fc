"""`ordo cdc capture` stopped by a signal at each point of its publishes, in-process."""

from __future__ import annotations

import shutil
import signal
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from interrupt_support import signalled_after
from ordo.cdc import Publisher
from ordo.cdc.mutation import SNAPSHOT_MARK
from ordo.cli.root import cli
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.sqlite.change_source import SQLiteChangeSource

MAX_CALLS = 3_000
"""More C calls than the capture's two publishes make: the loop ends before, or fails."""


def test_a_signal_anywhere_in_a_capture_s_publish_ends_it_with_its_line_and_status_130(
    tmp_path: Path,
) -> None:
    """Ctrl-C landing in the wait of a publish for its file writers (a Condition of the thread
    pool, as it starts a writer or waits for one) broke the pool's lock: the capture ended with
    a RuntimeError ("release unlocked lock", "cannot release un-acquired lock") and status 1,
    and its process did not end, the pool's threads waited for. SIGTERM did so too."""
    template = tmp_path / "template"
    template.mkdir()
    with sqlite3.connect(template / "shop.db") as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"s{i}") for i in range(3)])
    installed = SQLiteChangeSource(template / "shop.db", ["items"])
    installed.install()  # the changes from here on are captured; the rows before, snapshot
    installed.close()
    with sqlite3.connect(template / "shop.db") as conn:
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"c{i}") for i in range(3, 6)])
    with stores_at(f"sqlite:///{template / 'ordo.db'}"):
        pass  # the journal's tables, made once: each run copies them (the signals land later)
    interrupted = 0
    for calls in range(1, MAX_CALLS):
        run = tmp_path / f"run{calls}"
        shutil.copytree(template, run)
        args = ["cdc", "capture", str(run / "shop.db"), "--table", "items"]
        args += ["--journal", f"sqlite:///{run / 'ordo.db'}", "--change-log", str(run / "log")]
        with signalled_after(calls, signal.SIGINT, within=Publisher.publish_rows):
            result = CliRunner().invoke(cli, [*args, "--snapshot", "--partitions", "1"])
        if result.exit_code == 0:
            break
        assert (result.exit_code, result.stderr.splitlines()[-1:]) == (
            130,
            ["capture interrupted; everything published is durable"],
        ), f"{calls}: {result.exception!r}"
        interrupted += 1
        assert CliRunner().invoke(cli, args).exit_code == 0  # the next run captures the rest
        captured = [
            m.partition_key
            for m in ParquetChangeLog(run / "log").read("items")
            if SNAPSHOT_MARK not in m.audit.segment
        ]
        assert sorted(captured) == [(3,), (4,), (5,)]  # each change once
        assert [p.name for p in (run / "log").rglob(".*")] == []  # no staged file left
        assert list(run.glob("*.lock")) == []
        shutil.rmtree(run)
    else:
        msg = f"a capture's publishes made more than {MAX_CALLS} C calls"
        raise AssertionError(msg)
    assert interrupted > 1
