"""`ordo ARGS...`, which gets a signal at a set moment of its start.

usage: python signalled_start_command.py SIGNAL MOMENT ARGS...

SIGNAL is a signal's name (SIGTERM, SIGINT). The command runs as `ordo ARGS...` does, but the
signal comes at MOMENT, however long the steps before it take (a signal sent from outside lands
there only by chance):

- `importing`: as the command first imports pyspark, which takes seconds, before any check of
  its options (--sink, the journal) and before its `job_session` holds the signal;
- `started`: right after the start of Spark (`job_session._started`) has returned, before the
  command's next step: the moment between the start's stop flag and the next one (the wait for
  an executor, a Spark job's).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ordo.cli.main import cli

if TYPE_CHECKING:  # imported at MOMENT, not before
    from pyspark.sql import SparkSession


class _SignalledImport(importlib.abc.MetaPathFinder):
    """Sends `number` as the process first imports pyspark; finds nothing itself."""

    def __init__(self, number: signal.Signals) -> None:
        self.number = number

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pyspark":
            sys.meta_path.remove(self)
            signal.raise_signal(self.number)  # its handler runs (or raises) here
        return None


def _signal_when_started(number: signal.Signals) -> None:
    """Sends `number` right after each start of Spark (`job_session._started`) has returned."""
    from ordo.spark import job_session

    started = job_session._started

    def signalled_started(*, master: str, app_name: str, output: Path) -> SparkSession:
        spark = started(master=master, app_name=app_name, output=output)
        signal.raise_signal(number)
        return spark

    job_session._started = signalled_started


if __name__ == "__main__":
    name, moment, *args = sys.argv[1:]
    number = signal.Signals[name]
    if moment == "importing":
        sys.meta_path.insert(0, _SignalledImport(number))
    elif moment == "started":
        _signal_when_started(number)
    else:
        sys.exit(f"unknown moment {moment!r}: importing or started")
    cli(args, prog_name="ordo")
