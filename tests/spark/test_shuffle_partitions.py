"""A session start_session starts has a shuffle partition per core of a local master.

Unless the user set `spark.sql.shuffle.partitions`. (A materializer's checkpoint keeps the
number of its first run: tests/spark/test_materializer.py.) The processes that start sessions
here also print their local files' file system (`ordo.spark.local_files`), which the user's
choice overrides too.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pyspark.sql import SparkSession

from ordo.spark.local_files import FILE_SYSTEMS
from ordo.spark.register import CLUSTER_SHUFFLE_PARTITIONS, shuffle_partitions

pytestmark = pytest.mark.spark

_KEY = "spark.sql.shuffle.partitions"
_STARTS = """
import sys
from ordo.spark import start_session

for master in sys.argv[1:]:
    spark = start_session(master=master, app_name="shuffle-partitions-test")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    print(spark.conf.get("spark.sql.shuffle.partitions"), hadoop.get("fs.file.impl"), flush=True)
    spark.stop()
"""
"""Starts a session on each master in turn in one process (the JVM stays: PySpark keeps its
first), printing each one's shuffle partitions and local file system."""
_ORDOS = FILE_SYSTEMS["spark.hadoop.fs.file.impl"]
_HADOOPS = "org.apache.hadoop.fs.LocalFileSystem"


def test_the_runs_local_session_and_its_new_sessions_have_a_partition_per_core(
    spark: SparkSession,
) -> None:
    """A new session of the context has them too (Spark's 200 when they were the session's)."""
    assert spark.conf.get(_KEY) == "2"  # tests/conftest.py: local[2]
    assert spark.newSession().conf.get(_KEY) == "2"


@pytest.mark.parametrize(
    ("master", "partitions"),
    [
        ("local", 1),
        ("local[3]", 3),
        ("local[*]", 5),
        ("local[3,2]", 3),
        ("local[*, 4]", 5),
        ("local-cluster[2,1,1024]", CLUSTER_SHUFFLE_PARTITIONS),
        ("spark://127.0.0.1:7077", CLUSTER_SHUFFLE_PARTITIONS),
        ("yarn", CLUSTER_SHUFFLE_PARTITIONS),
        ("k8s://https://127.0.0.1:6443", CLUSTER_SHUFFLE_PARTITIONS),
    ],
)
def test_a_local_master_has_a_partition_per_core_a_clusters_a_fixed_number(
    master: str, partitions: int
) -> None:
    """`local[*]` has as many as the JVM has processors (5 here)."""
    assert shuffle_partitions(master, processors=5) == partitions


def _starts(*masters: str, submit_args: str | None = None) -> subprocess.Popen[str]:
    environment = dict(os.environ)
    if submit_args is not None:
        environment["PYSPARK_SUBMIT_ARGS"] = f"{submit_args} pyspark-shell"
    return subprocess.Popen(
        [sys.executable, "-c", _STARTS, *masters],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.timeout(300)
def test_a_new_session_gets_its_masters_cores_unless_the_user_set_the_partitions() -> None:
    """The second start of a process (its JVM kept from the first) gets its own master's too.

    The two processes run at once: each starts Spark (seconds).
    """
    plain = _starts("local[3]", "local[1]")
    chosen = _starts(
        "local[3]", submit_args=f"--conf {_KEY}=7 --conf spark.hadoop.fs.file.impl={_HADOOPS}"
    )
    for process, expected in (
        (plain, ["3", _ORDOS, "1", _ORDOS]),
        (chosen, ["7", _HADOOPS]),
    ):
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
        assert out.split() == expected
