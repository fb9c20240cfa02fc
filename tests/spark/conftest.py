"""One SparkSession for the whole run, with ordo's data sources registered."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ordo.spark import python_for_workers, register

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    python_for_workers()
    # Spark's Python workers import the tests' handler modules by name.
    paths = [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ordo-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
