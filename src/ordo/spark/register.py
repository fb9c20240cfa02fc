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


ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
"""The state store the CDC materializer needs (transformWithState); fixed per checkpoint."""


LISTING_ON_DRIVER = 100_000
"""How many files a query's file source may name before Spark lists them with a job."""


def start_session(*, master: str = "local[*]", app_name: str = "ordo") -> SparkSession:
    """A SparkSession for ordo's jobs: sources registered, UI and console progress bar off.

    Stateful queries keep their state in RocksDB, which the CDC materializer requires; the
    provider cannot change once a query has a checkpoint, so it is set before the first run.
    Files named in a micro-batch are listed on the driver up to `LISTING_ON_DRIVER` of them:
    Spark's default lists more than 32 paths with a Spark job of one task per path, which costs
    the materializer far more than the listing itself (bench/cdc.py measures both).
    """
    python_for_workers()
    session = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_STATE_STORE)
        .config("spark.sql.sources.parallelPartitionDiscovery.threshold", str(LISTING_ON_DRIVER))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
