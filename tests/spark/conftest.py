"""One SparkSession for the whole run, with ordo's data sources registered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from ordo.spark import python_for_workers, register


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    python_for_workers()
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
