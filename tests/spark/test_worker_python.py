"""Spark's Python workers, started by a local session, import pyspark compiled (worker_python)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ordo.spark.worker_python import spark_python_path, worker_python

pytestmark = pytest.mark.spark

# Spark's workers cannot import this test module: ship its data source by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]


class _WhereFrom(InputPartition):
    """Carries where the planning process imported pyspark from to the executor."""

    def __init__(self, planner: str) -> None:
        self.planner = planner


class _WhereFromReader(DataSourceReader):
    def partitions(self) -> list[InputPartition]:
        return [_WhereFrom(pyspark.__file__ or "")]

    def read(self, partition: InputPartition) -> Iterator[tuple[str, str]]:
        assert isinstance(partition, _WhereFrom)
        yield partition.planner, pyspark.__file__ or ""


class _WhereFromSource(DataSource):
    """A data source whose one row names the pyspark its planner and its reader imported."""

    @classmethod
    def name(cls) -> str:
        return "ordo_test_where_from"

    def schema(self) -> str:
        return "planner STRING, reader STRING"

    def reader(self, schema: object) -> DataSourceReader:
        return _WhereFromReader()


def test_a_local_sessions_workers_import_pyspark_from_the_installed_package(
    spark: SparkSession,
) -> None:
    """Its planning process and executor's worker, not Spark's zip (compiled at each start)."""
    spark.dataSource.register(_WhereFromSource)
    row = spark.read.format("ordo_test_where_from").load().collect()[0]
    installed = str(Path(pyspark.__file__ or "").parent)
    assert Path(row["planner"]).parent == Path(installed), row
    assert Path(row["reader"]).parent == Path(installed), row


def test_the_launcher_drops_sparks_entries_and_keeps_the_others_in_order() -> None:
    zip_, jar, py4j = spark_python_path()
    mine = ["/my modules", "/more*", "relative"]
    path = [zip_, jar, py4j, mine[0], zip_, mine[1], jar, py4j, mine[2]]
    shown = subprocess.run(
        [
            worker_python("local[2]"),
            "-c",
            "import os, pyspark; print(os.environ['PYTHONPATH']); print(pyspark.__file__)",
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert shown[0] == os.pathsep.join(mine)
    assert ".zip" not in shown[1]


def test_workers_elsewhere_run_this_interpreter() -> None:
    """A cluster's workers run on other machines: no launcher written on this one."""
    for master in ("spark://somewhere:7077", "k8s://https://somewhere:6443", "yarn"):
        assert worker_python(master) == sys.executable


def test_workers_run_this_interpreter_where_no_launcher_can_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temp folder that cannot hold the launcher costs the speed-up, not the session."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    assert worker_python("local[2]") == sys.executable
