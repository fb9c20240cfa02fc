"""What the journal commands import: every `ordo` command pays its imports at start.

pyarrow (with numpy, ~0.1 s) came with the CDC commands' change log and `ordo status`, and rich
(~20 ms) with the commands that draw tables or progress bars, although the journal's commands
use neither: each of them, and each test that runs one in a process of its own, waited for both.
Then the root group imported every command's module, and with them CDC, the simulation and the
processors' commands (~0.2 s of a 0.3 s start); a command's module is now imported when it runs.
Opening a journal imported all of `ordo.processing`, `ordo.tools` and `ordo.query` with the
token store, the operations store and the tag view store, which import only a few of their
modules, and built the token and operations stores, which no journal command uses: the three
packages now import a name when it is first asked for, and the two stores are built on first use.

The commands that write or read the change log do import pyarrow, but not pandas, which they do
not use either: pyarrow imports it (0.3 s) to ask whether what `pa.array` or `pa.scalar` is given
is a pandas object, and `pq.read_table` makes a scalar when it imports `pyarrow.dataset`. The
change log's files are built and read without either (`ordo.storage.parquet.arrow_columns`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cdc_cli_support import readings
from ordo.simulation.cdc import SIMULATED_SCHEMA

_UNUSED = (
    *("pyarrow", "numpy", "pandas", "pyspark", "rich"),
    *("ordo.cdc", "ordo.simulation", "ordo.spark", "ordo.tools.status"),
    *("ordo.cli.cdc", "ordo.cli.cleanup", "ordo.cli.demo", "ordo.cli.pipeline"),
    *("ordo.cli.processors", "ordo.cli.reconcile", "ordo.cli.simulate"),
    *("ordo.cli.spark_archive", "ordo.cli.status", "ordo.cli.verify"),
    *("ordo.processing.processor", "ordo.processing.worker", "ordo.processing.sequencing"),
    *("ordo.tools.cleanup", "ordo.tools.reconciliation", "ordo.tools.verification"),
    *("ordo.processing.ports", "ordo.processing.control", "ordo.storage.sql_token_store"),
    "ordo.storage.sql_operations_store",
)
"""Modules no journal command uses: the change log's, Spark's, the tables', CDC's, the
simulation's, the other commands', and the processors' and operations' (the packages import
their names on first use, and the stores build their token and operations stores on first use)."""

_RUN = f"""
import sys
from ordo.cli.root import cli

for args in (["init"], ["append", sys.argv[1]], ["events", "order-1"], ["tags"], ["info"],
             ["query", "order"]):
    cli(args, prog_name="ordo", standalone_mode=False)  # the journal: ORDO_JOURNAL
print("loaded:", *(m for m in {_UNUSED!r} if m in sys.modules))
"""


def test_the_journal_commands_import_no_module_they_do_not_use(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"persistence_id": "order-1", "payload": 1, "tags": ["order"]}\n')
    ran = subprocess.run(
        [sys.executable, "-c", _RUN, str(events)],
        env={**os.environ, "ORDO_JOURNAL": f"sqlite:///{tmp_path / 'journal.db'}"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "appended 1 event" in ran.stdout  # the commands ran, and did their work
    assert ran.stdout.splitlines()[-1] == "loaded:"


_CHANGE_LOG_RUN = """
import os
import sqlite3
import sys
from ordo.cdc import Publisher
from ordo.cdc.change_rows import ChangeRows
from ordo.cli.root import cli
from ordo.storage.parquet import ParquetChangeLog

folder = sys.argv[1]
journal, log, source = f"sqlite:///{folder}/journal.db", f"{folder}/log", f"{folder}/shop.db"
change_log = ["--journal", journal, "--change-log", log]
with sqlite3.connect(source) as conn:
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)")
    conn.execute("INSERT INTO orders VALUES (1, 'new'), (2, NULL)")


def ordo(*args):
    cli(list(args), prog_name="ordo", standalone_mode=False)


ordo("init", "--journal", journal)
ordo("cdc", "schemas", "register", f"{folder}/readings.json", "--journal", journal)
ordo("cdc", "ingest", f"{folder}/first.jsonl", *change_log)
ordo("cdc", "ingest", f"{folder}/second.jsonl", *change_log)
ordo("cdc", "capture", source, "--table", "orders", "--snapshot", *change_log)
ordo("cdc", "compact", "--change-log", log)
ordo("cdc", "status", *change_log)
os.remove(f"{log}/readings/_partitions.json")  # as logs written before counts were recorded
ordo("cdc", "ingest", f"{folder}/second.jsonl", "--partitions", "8", *change_log)  # keys read
held = ChangeRows.from_mutations(list(ParquetChangeLog(log).read("orders")))
again = Publisher(ParquetChangeLog(log)).publish_rows(held)  # a capture's: reads their times
print("published again:", again.published, "loaded:", "pandas" in sys.modules)
"""


def test_the_change_log_commands_import_no_pandas(tmp_path: Path) -> None:
    """Ingest, capture, compaction (merging files), status, a publish to a log without a
    partition count (which reads its keys) and a capture's publish of rows the log holds (which
    reads their capture times) in one process: none imports pandas."""
    (tmp_path / "readings.json").write_text(SIMULATED_SCHEMA.to_json())
    (tmp_path / "first.jsonl").write_text(readings(position=1) + "\n")
    (tmp_path / "second.jsonl").write_text(readings(position=2) + "\n")
    ran = subprocess.run(
        [sys.executable, "-c", _CHANGE_LOG_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "first.jsonl: published 1, skipped 0" in ran.stdout
    assert "readings: 2 files -> 1, 2 rows" in ran.stdout  # the two ingests' files merged
    assert "second.jsonl: published 0, skipped 1" in ran.stdout
    assert ran.stdout.splitlines()[-1] == "published again: {} loaded: False"
