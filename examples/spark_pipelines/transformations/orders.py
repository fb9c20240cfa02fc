"""The streaming table `orders`: every event tagged "order" of an ordo journal, once.

spark-pipelines imports this file with its Spark Connect session in the global `spark`. The
source `ordo_events_by_tag` is registered statically by `pyspark_ordo.py` (next to
spark-pipeline.yaml; that directory must be on PYTHONPATH), not with `ordo.spark.register(spark)`
here: with a source registered on the session, pyspark 4.3.0's `spark-pipelines run` fills the
table and then exits 1 with `[UNKNOWN_RESPONSE] Unknown response: Plan observed(
__python_accumulator__=...)` (see README.md).

The journal comes from the environment:

- ORDO_JOURNAL: the journal URL, e.g. sqlite:////abs/path/journal.db (required)
- ORDO_FIRST_TIME_BUCKET: the journal's first time bucket, "yyyyMMddTHH:mm" (required)
- ORDO_EVENTUAL_CONSISTENCY_DELAY_MS: optional, the source's default is 5000: events younger
  than that wait for the next run
- ORDO_SEGMENTS: optional, input partitions per micro-batch (default 1)
"""

from __future__ import annotations

import importlib.util
import os

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

from ordo.spark.schemas import EVENT_ROW_DDL

spark: SparkSession = globals()["spark"]  # put there by spark-pipelines before the import

if importlib.util.find_spec("pyspark_ordo") is None:
    message = (
        "ordo_events_by_tag is registered by pyspark_ordo.py: put the directory of "
        "spark-pipeline.yaml (examples/spark_pipelines) on PYTHONPATH"
    )
    raise RuntimeError(message)


def _source_options() -> dict[str, str]:
    options = {
        "journal": os.environ["ORDO_JOURNAL"],
        "firstTimeBucket": os.environ["ORDO_FIRST_TIME_BUCKET"],
        "tag": "order",
        "segments": os.environ.get("ORDO_SEGMENTS", "1"),
    }
    delay = os.environ.get("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS")
    if delay is not None:
        options["eventualConsistencyDelayMs"] = delay
    return options


@dp.table(
    name="orders",
    comment="Events tagged 'order' from the ordo journal, in tag order per persistence id.",
    schema=EVENT_ROW_DDL,
)
def orders() -> DataFrame:
    """A streaming read of the tag: each pipeline run appends what arrived since the last."""
    return spark.readStream.format("ordo_events_by_tag").options(**_source_options()).load()
