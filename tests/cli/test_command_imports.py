"""What the journal commands import: every `ordo` command pays its imports at start.

pyarrow (with numpy, ~0.1 s) came with the CDC commands' change log and `ordo status`, and rich
(~20 ms) with the commands that draw tables or progress bars, although the journal's commands
use neither: each of them, and each test that runs one in a process of its own, waited for both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_UNUSED = ("pyarrow", "numpy", "pandas", "pyspark", "rich")
"""Modules no journal command uses (the change log's, Spark's, and the tables')."""

_RUN = f"""
import sys
from ordo.cli.main import cli

for args in (["init"], ["append", sys.argv[1]], ["events", "order-1"], ["tags"], ["info"],
             ["query", "order"]):
    cli(args, prog_name="ordo", standalone_mode=False)  # the journal: ORDO_JOURNAL
print("loaded:", *(m for m in {_UNUSED!r} if m in sys.modules))
"""


def test_the_journal_commands_import_neither_pyarrow_nor_spark_nor_rich(tmp_path: Path) -> None:
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
