"""Ctrl-C or SIGTERM while `ordo` imports: the one line and status of a stopped command.

Importing the command line and then the command's modules takes a few tenths of a second of
every run, before any command holds a stop. Ctrl-C there ended the run with Python's
KeyboardInterrupt traceback (status -2), or with click's "Aborted!" and status 1 once the
command's module was being imported; SIGTERM by its default action (status -15, no line). The
signal comes as a module of the start is first imported (`signalled_import_support`): a third
party's that the root group imports, ordo's own, the command's module, and one that module
imports; by the console script and by `python -m ordo`.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from signalled_import_support import signalled_at_import

ORDO = Path(sys.executable).parent / "ordo"
"""The console script (pyproject's [project.scripts]), as the virtual environment installed it."""

_ENTRIES = {"ordo": [str(ORDO)], "python -m ordo": [sys.executable, "-m", "ordo"]}

_INIT = ["init", "--journal", "j.db"]
"""`ordo init`, which would create the journal j.db in the working directory."""

_LINE = "ordo interrupted while starting: nothing done\n"


@pytest.mark.parametrize("entry", list(_ENTRIES))
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("click", _INIT),
        ("ordo.cli.lazy_commands", _INIT),
        ("ordo.cli.journal", _INIT),
        ("ordo.storage.open", _INIT),
        ("ordo.cli.pipeline", ["pipeline", "run", "pipeline.toml"]),  # a Spark command
    ],
)
def test_a_stop_while_ordo_imports_ends_it_with_one_line_and_its_status(
    tmp_path: Path, entry: str, name: str, module: str, args: list[str]
) -> None:
    stopped = subprocess.run(
        [*_ENTRIES[entry], *args],
        capture_output=True,
        text=True,
        env=signalled_at_import(name, module),
        cwd=tmp_path,
        check=False,
    )

    status = 128 + signal.Signals[name]
    assert (stopped.returncode, stopped.stdout, stopped.stderr) == (status, "", _LINE)
    assert not (tmp_path / "j.db").exists()  # nothing done
