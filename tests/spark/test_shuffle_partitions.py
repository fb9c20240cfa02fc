"""A session start_session starts has a shuffle partition per core of a local master.

Unless the user set `spark.sql.shuffle.partitions`; a materializer's checkpoint keeps the
number of its first run (one made with the four partitions of earlier sessions resumes in a
session of two).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc_support import USERS
from operations_support import execute
from ordo.cdc import Audit, Cell, JsonValue, Mutation, SchemaRegistry
from ordo.cdc.change_rows import ChangeRows
from ordo.spark import MaterializerSpec
from ordo.spark.materializer import materialize_available
from ordo.spark.register import CLUSTER_SHUFFLE_PARTITIONS, shuffle_partitions
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog

pytestmark = pytest.mark.spark

_KEY = "spark.sql.shuffle.partitions"
_STARTS = """
import sys
from ordo.spark import start_session

for master in sys.argv[1:]:
    spark = start_session(master=master, app_name="shuffle-partitions-test")
    print(spark.conf.get("spark.sql.shuffle.partitions"), flush=True)
    spark.stop()
"""
"""Starts a session on each master in turn in one process (the JVM stays: PySpark keeps its
first), printing each one's shuffle partitions."""


def test_the_runs_local_session_has_a_shuffle_partition_per_core(spark: SparkSession) -> None:
    assert spark.conf.get(_KEY) == "2"  # tests/conftest.py: local[2]


@pytest.mark.parametrize(
    ("master", "partitions"),
    [
        ("local", 3),
        ("local[3]", 3),
        ("local[*]", 3),
        ("local[3,2]", 3),
        ("local-cluster[2,1,1024]", CLUSTER_SHUFFLE_PARTITIONS),
        ("spark://127.0.0.1:7077", CLUSTER_SHUFFLE_PARTITIONS),
        ("yarn", CLUSTER_SHUFFLE_PARTITIONS),
        ("k8s://https://127.0.0.1:6443", CLUSTER_SHUFFLE_PARTITIONS),
    ],
)
def test_a_local_master_has_a_partition_per_core_a_clusters_a_fixed_number(
    master: str, partitions: int
) -> None:
    """`cores` is the session's default parallelism, which a local master's brackets set."""
    assert shuffle_partitions(master, cores=3) == partitions


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
    chosen = _starts("local[3]", submit_args=f"--conf {_KEY}=7")
    for process, expected in ((plain, ["3", "1"]), (chosen, ["7"])):
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
        assert out.split() == expected


def _write(key: int, time: int, **cells: JsonValue) -> ChangeRows:
    """One write of user `key` at `time` (its row inserted then), as two replicas deliver it."""
    return ChangeRows.from_mutations(
        [
            Mutation(
                table="users",
                partition_key=(key,),
                cells={name: Cell(value=value, write_time=time) for name, value in cells.items()},
                liveness=Cell(value=True, write_time=time),
                audit=Audit(
                    source="cassandra", replica=replica, segment="log", position=time * 100 + key
                ),
            )
            for replica in ("10.0.0.1", "10.0.0.2")
        ]
    )


def test_a_checkpoint_made_with_four_partitions_resumes_with_its_state_in_a_session_of_two(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark takes a stateful query's partitions from its checkpoint, not from the session."""
    sink = f"sqlite:///{tmp_path / 'sink.db'}"
    with stores_at(sink) as stores:
        SchemaRegistry(stores.schemas).register(USERS)
    log = ParquetChangeLog(tmp_path / "log")
    spec = MaterializerSpec(name="view", table="users", change_log=str(log.root), sink=sink)
    checkpoint = str(tmp_path / "checkpoint")
    log.append("users", [(key % 2, _write(key, 10, name=f"u{key}", age=20)) for key in range(8)])
    spark.conf.set(_KEY, "4")
    try:
        materialize_available(spark, spec, checkpoint=checkpoint)
    finally:
        spark.conf.set(_KEY, "2")
    log.append("users", [(key % 2, _write(key, 20, age=30)) for key in range(8)])
    materialize_available(spark, spec, checkpoint=checkpoint)

    updates = execute(sink, "SELECT before_json FROM cdc_messages WHERE op = 'update'")
    assert len(updates) == 8  # every key's state was found: no second create
    assert sorted(row[0] for row in updates) == sorted(
        f'{{"id":{key},"name":"u{key}","age":20}}' for key in range(8)
    )
