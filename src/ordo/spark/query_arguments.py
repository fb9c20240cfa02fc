"""Checks of what starts ordo's streaming queries: the session, the checkpoint, the trigger.

`projection` and `materialize` take the same ones and check them before anything is opened,
created or started: each failed where first used, as an AttributeError (a session of None), a
TypeError (a checkpoint of None) or PySpark's own error, after `materialize` had created the
sink's schema and the change log's folder.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from ordo import arguments
from ordo.errors import ConfigurationError
from ordo.settings.loading import flag
from ordo.spark.checkpoint import local_checkpoint_path


def require_session(spark: object) -> SparkSession:
    """`spark` when it is a SparkSession; ConfigurationError naming it otherwise."""
    arguments.instance(spark, SparkSession, name="spark", error=ConfigurationError)
    return spark  # type: ignore[return-value]


def check_query_arguments(
    spark: SparkSession, *, checkpoint: str, available_now: bool, processing_time: str | None
) -> None:
    """ConfigurationError naming the first argument of a query's start that is of no use.

    `available_now` must be a bool ("no" ran the query once and stopped), `processing_time`
    None or an interval's text ("10 seconds"), and not both set: the interval was ignored.
    """
    require_session(spark)
    local_checkpoint_path(checkpoint)  # it refuses what is no path or URI
    flag("available_now", available_now)
    if processing_time is not None and (
        not isinstance(processing_time, str) or not processing_time.strip()
    ):
        msg = (
            "processing_time must be an interval such as '10 seconds', or None, got "
            f"{processing_time!r:.80}"
        )
        raise ConfigurationError(msg)
    if available_now and processing_time is not None:
        msg = f"available_now and processing_time ({processing_time!r}) are two triggers: give one"
        raise ConfigurationError(msg)
