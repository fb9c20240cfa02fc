"""Registering ordo's Spark data sources with a session."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from ordo.spark.events_by_tag_source import EventsByTagDataSource


def register(spark: SparkSession) -> None:
    """Make `ordo_events_by_tag` known to `spark` (readStream and read)."""
    spark.dataSource.register(EventsByTagDataSource)


def python_for_workers() -> None:
    """Let Spark's Python workers run this interpreter (the one with ordo and pyarrow).

    Call before creating the SparkSession; an explicit PYSPARK_PYTHON wins.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
