"""Static registration of ordo's `ordo_events_by_tag` data source with Spark.

When a session first looks up a Python data source, Spark's Python worker imports every
top-level module on its path whose name starts with `pyspark_` and registers its `DefaultSource`
(pyspark/sql/worker/lookup_data_sources.py). With this directory on PYTHONPATH, the Spark
Connect server that `spark-pipelines` starts knows `ordo_events_by_tag` without a
`spark.dataSource.register(...)` call (see README.md for why the example avoids that call).
"""

from __future__ import annotations

from ordo.spark.events_by_tag_source import EventsByTagDataSource as DefaultSource

__all__ = ["DefaultSource"]
