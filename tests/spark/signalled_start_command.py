"""`ordo ARGS...`, which gets a signal right after Spark has started.

usage: python signalled_start_command.py SIGNAL ARGS...

SIGNAL is a signal's name (SIGTERM, SIGINT). The command runs as `ordo ARGS...` does, but the
signal comes right after the start of Spark (`job_session._started`) has returned, before the
command's next step, however long the start takes (a signal sent from outside lands there only
by chance): the moment between the start's stop flag and the next one (the wait for an
executor, a Spark job's).

(A signal as a module is first imported, pyspark's, needs no such script:
`signalled_import_support` gives the real `ordo` a `sitecustomize` that sends it.)
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ordo.cli.root import cli

if TYPE_CHECKING:  # imported once Spark starts, not before
    from pyspark.sql import SparkSession


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
    name, *args = sys.argv[1:]
    _signal_when_started(signal.Signals[name])
    cli(args, prog_name="ordo")
