"""A SparkSession for one batch job run from the command line (rebuild, verify)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from ordo.spark.register import start_session


@contextmanager
def job_session(*, master: str, app_name: str) -> Iterator[SparkSession]:
    """The active session if there is one (left running), else a new one stopped at the end.

    A command run inside a process that already has a session (a notebook, the test suite)
    must neither start a second one nor stop the caller's.
    """
    is_running = SparkSession.getActiveSession() is not None
    spark = start_session(master=master, app_name=app_name)
    try:
        yield spark
    finally:
        if not is_running:
            spark.stop()
