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
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
