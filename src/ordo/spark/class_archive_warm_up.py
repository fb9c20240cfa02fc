"""The start of Spark whose JVM's classes make the class archive: what ordo's jobs load, once.

`make_archive` runs `python -m ordo.spark.class_archive_warm_up SPARK_OUTPUT` with
`-XX:ArchiveClassesAtExit` among the driver JVM's options; the JVM writes every class it loaded
as it exits, and later starts map them instead of loading them from Spark's jars. What the
warm-up leaves out still loads from the jars: slower, the same job.

So it runs, small, what ordo's jobs have in common: an SQL job with a shuffle; a Python function
over Arrow (the Spark source's and the projections' steps); and a stateful stream as the
materializer's is (the Parquet file source, `transformWithStateInPandas` with value and map
state in RocksDB, `foreachBatch`, an `availableNow` trigger), which loads Spark's streaming
engine, its checkpoints and state store, some 2,000 classes that a streaming job's first query
loaded from the jars before. It prints the JVM's exit status last: the archive exists once that
is 0.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from ordo.spark.register import start_session

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type hints


class _RunningCount(StatefulProcessor):
    """Each key's count of rows so far, in value state, and its last batch's, in map state."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._total = handle.getValueState("total", "n long")
        self._batches = handle.getMapState("batches", "k long", "n long")

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd

        counted = sum(len(frame) for frame in rows)
        total = (self._total.get() or (0,))[0] + counted
        self._total.update((total,))
        self._batches.updateValue(key, (counted,))
        yield pd.DataFrame({"k": [key[0]], "n": [total]})

    def close(self) -> None:
        """Nothing held."""


def warm_up(spark: SparkSession, folder: str) -> None:
    """Run the jobs whose classes the archive holds; `folder` takes the stream's files."""
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    spark.range(10).mapInArrow(lambda batches: batches, "id long").collect()
    spark.range(100).selectExpr("id % 7 AS k").write.parquet(f"{folder}/log")
    counts = (
        spark.readStream.schema("k long")
        .parquet(f"{folder}/log")
        .groupBy("k")
        .transformWithStateInPandas(_RunningCount(), "k long, n long", "Append", "None")
    )
    query = (
        counts.writeStream.foreachBatch(_collect)
        .option("checkpointLocation", f"{folder}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def _collect(batch: DataFrame, _batch_id: int) -> None:
    batch.collect()


def main() -> None:
    """Start Spark (its output to argv[1]), warm up, stop; print the JVM's exit status."""
    spark = start_session(master="local[2]", app_name="ordo-class-archive", output=sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="ordo-class-archive-") as folder:
        warm_up(spark, folder)
    jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]  # PySpark started it
    spark.stop()
    jvm.stdin.close()  # the gateway JVM exits when its stdin closes, writing the archive then
    print(jvm.wait())


if __name__ == "__main__":
    main()
