"""One SparkSession for the whole run, with ordo's data sources registered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from ordo.spark import start_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = start_session(master="local[2]", app_name="ordo-tests")
    yield session
    session.stop()
