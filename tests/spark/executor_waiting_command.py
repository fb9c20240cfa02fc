"""`ordo ARGS...`, which marks the wait for a cluster's executor: the child process of
test_standalone_cluster.py's stops during that wait.

usage: python executor_waiting_command.py MARKER ARGS...

The command runs as `ordo ARGS...` does. Each time its wait for an executor asks the driver
whether one has come (`job_session._has_executor`, within the stop flag it looks at), the file
MARKER is touched first: a signal the test sends once it exists comes during that wait, not
while Spark starts, however long the start takes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession

from ordo.cli.root import cli
from ordo.spark import job_session

_has_executor = job_session._has_executor


def _marked_has_executor(spark: SparkSession) -> bool:
    Path(sys.argv[1]).touch()
    return _has_executor(spark)


if __name__ == "__main__":
    job_session._has_executor = _marked_has_executor
    cli(sys.argv[2:], prog_name="ordo")
