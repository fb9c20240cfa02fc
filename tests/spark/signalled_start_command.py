"""`ordo ARGS...`, which gets SIGTERM as soon as its Spark session has started.

usage: python signalled_start_command.py ARGS...

The command runs as `ordo ARGS...` does, but the signal comes right after the start of Spark
(`job_session._started`) has returned, before the command's next step: the moment between the
start's stop flag and the next one (the wait for an executor, a Spark job's), however long
the start takes. A signal sent from outside lands there only by chance.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from ordo.cli.main import cli
from ordo.spark import job_session

_started = job_session._started


def _signalled_started(*, master: str, app_name: str, output: Path) -> SparkSession:
    spark = _started(master=master, app_name=app_name, output=output)
    signal.raise_signal(signal.SIGTERM)
    return spark


if __name__ == "__main__":
    job_session._started = _signalled_started
    cli(sys.argv[1:], prog_name="ordo")
