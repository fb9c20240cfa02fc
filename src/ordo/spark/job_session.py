"""The SparkSession of one command-line job (demo, pipelines, CDC, rebuild, verify)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from ordo.spark.register import start_session

SPARK_LOG_VARIABLE = "ORDO_SPARK_LOG"
"""Environment variable naming the file a command's Spark writes its console output to."""


def spark_output_path(app_name: str) -> Path:
    """Where the job `app_name` sends Spark's console output: ORDO_SPARK_LOG, else a temp file.

    One file per job name, replaced by its next run, so that two different jobs running at
    once (a pipeline and a materializer) keep apart.
    """
    chosen = os.environ.get(SPARK_LOG_VARIABLE)
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / f"{app_name}.log"


@contextmanager
def job_session(
    *, master: str, app_name: str, announce: Callable[[str], object] | None = None
) -> Iterator[SparkSession]:
    """The active session if there is one (left running), else a new one stopped at the end.

    A command run inside a process that already has a session (a notebook, the test suite)
    must neither start a second one nor stop the caller's. A new session's JVM writes its
    console output to `spark_output_path(app_name)`, not to the terminal the command prints to;
    `announce` is told so before Spark starts (which takes seconds).
    """
    is_running = SparkSession.getActiveSession() is not None
    output = spark_output_path(app_name)
    if not is_running and announce is not None:
        announce(f"starting Spark (its own output goes to {output}) ...")
    spark = start_session(master=master, app_name=app_name, output=output)
    try:
        yield spark
    finally:
        if not is_running:
            spark.stop()
